"""Writes the row part of docs/reference/helios-bench-1.schema.json from the row type
(helios.harness.results.rows.BenchRow); tests/test_row_schema.py fails when the
committed file and the type differ.

  python3 tools/bench_schema.py            # rewrite the file
  python3 tools/bench_schema.py --check    # exit 1 if it is stale"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helios.harness.results.rows import BenchRow
from helios.harness.results.schema import json_schema

PATH = Path(__file__).resolve().parent.parent / "docs" / "reference" / "helios-bench-1.schema.json"


def generated() -> str:
    doc = json.loads(PATH.read_text())
    doc["$defs"]["row"] = json_schema(BenchRow)
    return json.dumps(doc, indent=2) + "\n"


def main(argv: list[str]) -> int:
    text = generated()
    if "--check" in argv:
        if PATH.read_text() != text:
            print(f"{PATH} is stale: run python3 tools/bench_schema.py", file=sys.stderr)
            return 1
        return 0
    PATH.write_text(text)
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
