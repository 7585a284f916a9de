"""Security defaults of the service: the bearer-token file, the loopback rule, body and rate limits.

* The token is made on first start with :func:`secrets.token_urlsafe` and written to a file
  only its owner can read (0600, created with ``O_EXCL`` so an existing file is never
  overwritten); a token file that others can read is refused.
* Tokens are compared with :func:`hmac.compare_digest` (constant time).
* The service binds to loopback; another address needs a token file named explicitly
  (so nobody exposes a rack with a token they never looked at).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import stat
import threading
import time
from pathlib import Path

from controlplane.errors import ServiceError
from photonics.bounded_read import SETTINGS_FILE_MAX_BYTES, read_text

TOKEN_BYTES = 32  # 256 bits of randomness: the OWASP session-id floor is 64, this is far past guessing
# A request body is a job or a failure report (< 2 KiB); 64 KiB leaves room for an explicit
# link list of a whole rack while stopping a client from making the service buffer megabytes.
MAX_BODY_BYTES = 64 * 1024
# A scheduler, a health monitor and a dashboard poll a few times a second each; 100 requests/s
# per client is a 20x margin over that, and stops a runaway loop from queueing work on the
# chip's lock. BURST lets a client catch up (events, several jobs) after a pause.
RATE_PER_S = 100.0
RATE_BURST = 200.0
LOOPBACK_NAMES = ("localhost",)
# Buckets kept before the full ones (clients idle long enough to have every token back) are
# dropped: a scan of many source addresses cannot grow the limiter's memory without bound.
MAX_TRACKED_CLIENTS = 10_000


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback interface."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_or_create_token(path: str | os.PathLike[str]) -> tuple[str, bool]:
    """(token, created): read the token file, or create it (0600) with a new random token."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_token(p), False
    except OSError as exc:
        raise ServiceError(
            f"cannot create the token file {p}: {exc.strerror}; give a writable --token-file"
        ) from exc
    token = secrets.token_urlsafe(TOKEN_BYTES)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(token + "\n")
    return token, True


def read_token(path: Path) -> str:
    """The token in ``path``; refused when others can read the file or it is empty."""
    try:
        mode = path.stat().st_mode
        text = read_text(path, SETTINGS_FILE_MAX_BYTES, "token file", "ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ServiceError(f"cannot read the token file {path}: {exc}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ServiceError(
            f"the token file {path} can be read by others (mode {stat.S_IMODE(mode):o}); run chmod 600 {path}"
        )
    if len(text) < 16:
        raise ServiceError(
            f"the token file {path} holds no token of at least 16 characters; delete it to "
            "have a new one made"
        )
    return text


def token_matches(given: str | None, token: str) -> bool:
    """Constant-time comparison of a presented bearer token with the service's."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (None when absent or another scheme)."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class RateLimiter:
    """A token bucket per client: ``rate_per_s`` sustained, ``burst`` at once (rate 0: no limit)."""

    def __init__(self, rate_per_s: float = RATE_PER_S, burst: float = RATE_BURST) -> None:
        self.rate, self.burst = float(rate_per_s), float(burst)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, client: str) -> float:
        """0 when the request may go ahead, else the seconds to wait before the next one."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            if len(self._buckets) >= MAX_TRACKED_CLIENTS:
                self._forget_idle(now)
            tokens, last = self._buckets.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[client] = (tokens - 1.0, now)
                return 0.0
            self._buckets[client] = (tokens, now)
            return (1.0 - tokens) / self.rate

    def _forget_idle(self, now: float) -> None:
        """Drop the buckets that have refilled (their clients would start afresh anyway)."""
        full = [
            c
            for c, (tokens, last) in self._buckets.items()
            if tokens + (now - last) * self.rate >= self.burst
        ]
        for c in full:
            del self._buckets[c]
