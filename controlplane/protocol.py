"""uvicorn's HTTP/1.1 protocol (h11), answering its own 400s as the API's one JSON error object.

A request uvicorn cannot parse (a malformed request line or header, an invalid chunk
size) never reaches the application: uvicorn answers it ``400 text/plain "Invalid HTTP
request received."`` itself. :class:`JsonErrorH11Protocol` sends the same status as
``{"error", "kind": "input", "hint"}`` so that every answer of the service is one JSON
object (docs/controlplane.md, "Errors"). ``lumion serve`` passes it as uvicorn's ``http``
protocol class (h11 is what uvicorn would pick anyway when httptools is not installed).
"""

from __future__ import annotations

import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from controlplane.errors import error_body


def bad_request_body(message: str) -> bytes:
    """The JSON body of a request the HTTP parser refused."""
    return json.dumps(error_body(f"malformed HTTP request: {message}", "input")).encode()


class JsonErrorH11Protocol(H11Protocol):
    """:class:`uvicorn.protocols.http.h11_impl.H11Protocol` whose parser errors are JSON."""

    def send_400_response(self, msg: str) -> None:
        """Answer 400 with the error object and close (as uvicorn does: the stream is unusable)."""
        body = bad_request_body(msg)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()
