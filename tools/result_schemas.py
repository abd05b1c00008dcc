"""Writes the published JSON Schemas of result files from their row types
(helios.harness.results.rows): the row part of docs/reference/helios-bench-1.schema.json
(BenchRow; the file's top level is written by hand) and the whole of
docs/reference/helios-time-1.schema.json (TimeRow). tests/test_row_schema.py fails when
a committed file and its type differ.

  python3 tools/result_schemas.py            # rewrite the files
  python3 tools/result_schemas.py --check    # exit 1 if one is stale"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helios.harness.results.rows import TIME_SCHEMA, BenchRow, TimeRow
from helios.harness.results.schema import json_schema

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference"
BENCH = REFERENCE / "helios-bench-1.schema.json"
TIME = REFERENCE / "helios-time-1.schema.json"


def bench_text() -> str:
    doc = json.loads(BENCH.read_text())
    doc["$defs"]["row"] = json_schema(BenchRow)
    return json.dumps(doc, indent=2) + "\n"


def time_text() -> str:
    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": TIME_SCHEMA,
        "title": "helios time result",
        "description": "Written by `helios time --out`: provenance (timestamp, helios_build, git, cwd_git, "
        "host), the device, the reference (torch or null), iters, warmup, the check, and a row per shape.",
        "type": "object",
        "required": ["schema", "timestamp", "device", "iters", "warmup", "check", "rows"],
        "properties": {
            "schema": {"const": TIME_SCHEMA},
            "timestamp": {"type": "string"},
            "device": {"type": "object"},
            "reference": {"oneOf": [{"type": "null"}, {"const": "torch"}]},
            "iters": {"type": "integer", "minimum": 1},
            "warmup": {"type": "integer", "minimum": 0},
            "check": {"type": "object", "required": ["passed"]},
            "rows": {"type": "array", "items": {"$ref": "#/$defs/row"}},
        },
        "$defs": {"row": json_schema(TimeRow)},
    }
    return json.dumps(doc, indent=2) + "\n"


def files() -> dict[Path, str]:
    return {BENCH: bench_text(), TIME: time_text()}


def main(argv: list[str]) -> int:
    stale = [p for p, text in files().items() if not p.exists() or p.read_text() != text]
    if "--check" in argv:
        for p in stale:
            print(f"{p} is stale: run python3 tools/result_schemas.py", file=sys.stderr)
        return 1 if stale else 0
    for p, text in files().items():
        p.write_text(text)
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
