#!/usr/bin/env python3
"""Build a results history (the JSON-lines store helios ci --history appends to)
from committed result files: every helios-bench/1 file under the given folders,
with the commit and date each file records. Usage:
  python3 tools/history_from_results.py OUT.jsonl results [...]"""

from __future__ import annotations

import sys
from pathlib import Path

from helios.files import read_object
from helios.harness.results.history import append_history


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.unlink(missing_ok=True)
    n = files = 0
    for root in sys.argv[2:]:
        for f in sorted(Path(root).rglob("*.json")):
            try:
                d = read_object(str(f))
            except (OSError, ValueError):
                continue
            if d.get("schema") != "helios-bench/1" or d.get("status") != "ok":
                continue
            build = d.get("helios_build") or {}
            commit = build.get("commit") or (d.get("git") or {}).get("commit") or "unknown"
            n += append_history(out, d, str(commit), str(d.get("timestamp") or ""))
            files += 1
    print(f"{n} lines from {files} result files -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
