"""Writes the published JSON Schemas of result files from their row types
(helios.harness.results.rows): the row part of docs/reference/helios-bench-1.schema.json
(BenchRow; the file's top level is written by hand) and the whole of
docs/reference/helios-time-1.schema.json (TimeRow), helios-suite-1.schema.json (SuiteRow)
helios-decode-1.schema.json (DecodeRow) and helios-train-1.schema.json (TrainRow). tests/test_row_schema.py fails when a
committed file and its type differ.

  python3 tools/result_schemas.py            # rewrite the files
  python3 tools/result_schemas.py --check    # exit 1 if one is stale"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helios.harness.results.rows import (
    DECODE_SCHEMA,
    FILE_FIELDS,
    NESTED_FIELDS,
    SUITE_SCHEMA,
    TIME_SCHEMA,
    TRAIN_SCHEMA,
    BenchRow,
    DecodeRow,
    SuiteRow,
    TimeRow,
    TrainRow,
)
from helios.harness.results.schema import fields_schema, json_schema

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference"
BENCH = REFERENCE / "helios-bench-1.schema.json"
TIME = REFERENCE / "helios-time-1.schema.json"
SUITE = REFERENCE / "helios-suite-1.schema.json"
DECODE = REFERENCE / "helios-decode-1.schema.json"
TRAIN = REFERENCE / "helios-train-1.schema.json"


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


def suite_text(schema: str, row_type: type, title: str, description: str, required: list[str]) -> str:
    """A suite's file: its rows' part from the row type; the top level names the fields
    every such file has (the rest, the workload's configuration, is open)."""
    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema,
        "title": title,
        "description": description,
        "type": "object",
        "required": ["schema", "status", *required, "rows"],
        "properties": {
            "schema": {"const": schema},
            "status": {"type": "string"},
            **fields_schema(FILE_FIELDS.get(schema, {}))["properties"],
            "rows": {"type": "array", "items": {"$ref": "#/$defs/row"}},
        },
        "$defs": {"row": json_schema(row_type)},
    }
    for (of, name), fields in NESTED_FIELDS.items():  # the objects the readers check, still open to more
        if of == schema:
            doc["properties"][name] = fields_schema(fields) | {"type": "object"}
    return json.dumps(doc, indent=2) + "\n"


def files() -> dict[Path, str]:
    suite = suite_text(
        SUITE_SCHEMA, SuiteRow, "helios suite mlp result",
        "Written by `helios suite mlp --out`: provenance, the workload, iters, warmup, and a row per adapter "
        "and token count.", ["workload", "iters", "warmup"],
    )  # fmt: skip
    decode = suite_text(
        DECODE_SCHEMA, DecodeRow, "helios suite decode result",
        "Written by `helios suite decode --out`: provenance, the model's configuration, the memory roof, "
        "and a row per adapter.", ["config"],
    )  # fmt: skip
    train = suite_text(
        TRAIN_SCHEMA, TrainRow, "helios suite train result",
        "Written by `helios suite train --out`: provenance, the model's configuration, the distributed "
        "setup, a row per adapter and the inference smoke.", ["config"],
    )  # fmt: skip
    return {BENCH: bench_text(), TIME: time_text(), SUITE: suite, DECODE: decode, TRAIN: train}


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
