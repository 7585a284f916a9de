"""JSON Schemas of every LUMION data file and every ``lumion COMMAND --json`` output.

The schemas are generated from pydantic models (:mod:`lab_scripts.schemas.outputs`,
:mod:`lab_scripts.schemas.files`) by ``python -m lab_scripts.schemas`` and committed in
``lab_scripts/schemas/json/`` (shipped in the wheel). Reading and checking them needs only
the standard library and, for :func:`validate`, the ``jsonschema`` package; pydantic is
needed only to regenerate them.

Example:
    >>> "lumion.route" in schema_names() and "lumion.configuration" in schema_names()
    True
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

JSON_DIR = Path(__file__).resolve().parent / "json"
SUFFIX = ".schema.json"


def file_name(name: str) -> str:
    """``lumion.configuration@1`` -> ``lumion.configuration@1.schema.json``."""
    return f"{name}{SUFFIX}"


def schema_names() -> list[str]:
    """The names of the committed schemas (``lumion.route``, ``lumion.configuration@1``, ...)."""
    return sorted(p.name[: -len(SUFFIX)] for p in JSON_DIR.glob(f"*{SUFFIX}"))


@cache
def load(name: str) -> dict[str, Any]:
    """The committed JSON Schema called ``name`` (KeyError naming the known ones if absent)."""
    path = JSON_DIR / file_name(name)
    if not path.is_file():
        raise KeyError(f"no schema {name!r}; known: {', '.join(schema_names())}")
    return json.loads(path.read_text(encoding="utf-8"))


def schema_for(document: dict[str, Any]) -> str:
    """The schema name a document declares (``schema``, plus ``@version`` where that is kept apart)."""
    name = str(document.get("schema"))
    versioned = f"{name}@{document.get('version')}"
    return versioned if (JSON_DIR / file_name(versioned)).is_file() else name


def validate(document: Any, name: str | None = None) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``document`` follows schema ``name``
    (default: the one it declares).

    What ``jsonschema.validate`` does (the schema checked against its dialect first:
    ``SchemaError`` if it breaks it; then the most relevant error, ``best_match``, raised),
    with the check and the validator made once per schema and process: the check was
    26 of every call's 31 ms on a ``lumion.route`` output (issue 29).
    """
    from jsonschema.exceptions import best_match

    error = best_match(validator(name or schema_for(document)).iter_errors(document))
    if error is not None:
        raise error


@cache
def validator(name: str) -> Any:
    """A draft 2020-12 validator of the committed schema ``name``, made once per process after
    the schema is checked against the dialect (``jsonschema.SchemaError`` if it breaks it).
    """
    import jsonschema

    schema = load(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)
