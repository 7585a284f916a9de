"""Generate the JSON Schema files from the pydantic models (needs pydantic: the ``dev`` extra)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from lab_scripts.schemas import JSON_DIR, SUFFIX, file_name
from lab_scripts.schemas.files import DATA_FILES
from lab_scripts.schemas.multicast import MulticastFailoverOutput, MulticastPlanFile
from lab_scripts.schemas.outputs import COMMAND_OUTPUTS, ErrorOutput
from lab_scripts.schemas.plan import PlanFile

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def command_schema_name(command: str) -> str:
    """The schema name of a command's output, read from its model's ``schema`` literal."""
    field = COMMAND_OUTPUTS[command].model_fields["schema_name"]
    return field.annotation.__args__[0]  # type: ignore[union-attr]


def models() -> dict[str, type[BaseModel]]:
    """Every schema name -> its model (data files, command outputs, the error object)."""
    out: dict[str, type[BaseModel]] = dict(DATA_FILES)
    out.update({command_schema_name(c): m for c, m in COMMAND_OUTPUTS.items()})
    out["lumion.error"] = ErrorOutput
    out["lumion.plan"] = PlanFile
    out["lumion.multicast-plan"] = MulticastPlanFile
    out["lumion.multicast-failover"] = MulticastFailoverOutput
    return out


def render(name: str, model: type[BaseModel]) -> str:
    """The JSON text of one schema: the model's schema with a dialect and a title."""
    schema: dict[str, Any] = {"$schema": DIALECT, "$id": file_name(name),
                              **model.model_json_schema(by_alias=True, mode="serialization")}
    schema["title"] = name
    return json.dumps(schema, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def rendered() -> dict[str, str]:
    """Every schema's text by its file name."""
    return {file_name(name): render(name, model) for name, model in models().items()}


def main(argv: list[str]) -> int:
    """Write every schema (or with ``--check`` report the stale ones and return 1)."""
    wanted = rendered()
    stale = [n for n, text in wanted.items()
             if not (JSON_DIR / n).is_file() or (JSON_DIR / n).read_text(encoding="utf-8") != text]
    extra = [p.name for p in JSON_DIR.glob(f"*{SUFFIX}") if p.name not in wanted]
    if "--check" in argv:
        for n in stale + extra:
            print(f"stale: lab_scripts/schemas/json/{n} (run python -m lab_scripts.schemas)")
        return 1 if stale or extra else 0
    JSON_DIR.mkdir(exist_ok=True)
    for n in stale:
        (JSON_DIR / n).write_text(wanted[n], encoding="utf-8")
    for n in extra:
        (JSON_DIR / n).unlink()
    print(f"{len(wanted)} schemas in lab_scripts/schemas/json ({len(stale)} written, {len(extra)} removed)")
    return 0
