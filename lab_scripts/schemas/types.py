"""Field types shared by the schema models: names, units and the two envelope fields.

Units live in the key's suffix (``_ms``, ``_s``, ``_db``, ``_dbm``, ``_ma``, ``_mw``,
``_rad``, ``_nm``, ``_um``, ``_k``), never in a separate field; each type below carries a
description that says so, and the descriptions end up in the generated JSON Schemas.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

PortName = Annotated[str, Field(pattern=r"^port:\d+$", description="a mesh port, port:<n>")]
TbuName = Annotated[str, Field(pattern=r"^tbu:", description="a TBU name, tbu:<row>.<col>.<side> or similar")]
MeshSpec = Annotated[str, Field(min_length=1, description="a mesh as --mesh takes it: smartlight, hex:RxC, "
                                "square:RxC, triangular:RxC, custom or a mesh file name")]
Fingerprint = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$", description="16 hex digits of SHA-256 over "
                                   "the topology (photonics.configuration.mesh_fingerprint)")]
Db = Annotated[float, Field(description="dB")]
# A decibel value that is -inf/+inf in the model (no leak, perfect isolation) prints as null.
DbOrNull = Annotated[float | None, Field(description="dB; null when infinite (nothing leaks)")]
Ms = Annotated[float, Field(ge=0, description="milliseconds")]
Seconds = Annotated[float, Field(ge=0, description="seconds")]
Path = Annotated[str, Field(min_length=1, description="a file path as written")]
Channel = Annotated[int, Field(ge=0, description="heater channel: 2 * TBU index (+1 for the bottom arm)")]
Count = Annotated[int, Field(ge=0)]
TbuState = Literal["bar", "cross"]


class Strict(BaseModel):
    """A model whose JSON Schema refuses keys it does not list (every key is documented)."""

    model_config = ConfigDict(extra="forbid")


class Open(BaseModel):
    """A model of a file whose loader ignores keys it does not know (the schema allows them)."""

    model_config = ConfigDict(extra="allow")

