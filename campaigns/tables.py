"""Campaign results as table files: CSV (always), Parquet when pyarrow is installed."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from campaigns.engine import CampaignError
from photonics.atomic import atomic_write_bytes, atomic_write_text

TABLE_SUFFIXES = (".csv", ".parquet")


def write_table(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write ``rows`` (same keys each) atomically; the suffix picks the format."""
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise CampaignError(f"{out}: a campaign table is .csv or .parquet")
    if not rows:
        raise CampaignError("the campaign produced no rows to write")
    if suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise CampaignError(f"{out}: Parquet needs pyarrow, which is not installed; write CSV "
                                "(--out FILE.csv) or `pip install pyarrow`") from None
        buf = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pylist([dict(r) for r in rows]), buf)
        atomic_write_bytes(out, buf.getvalue().to_pybytes())
        return out
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out, text.getvalue())
    return out


def read_csv(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """Rows of a CSV table as strings (for tests and re-plots)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
