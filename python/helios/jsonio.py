"""Reading JSON that Helios did not write itself (result files named on a
command line, the tuning cache): bounded in size and nesting, decoded as UTF-8,
and every failure one ValueError that names the file and the reason."""

from __future__ import annotations

import json
import os
from typing import Any

# Result files hold raw samples (a few MB for a large bench); anything far
# larger is not a Helios file, and reading it whole could exhaust memory.
MAX_JSON_BYTES = 64 << 20


def read_json(path: str | os.PathLike[str], max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The parsed document, or ValueError("PATH: why") for a file that cannot be
    opened, is larger than max_bytes, is not UTF-8, is not JSON or nests too
    deeply to parse. Reads at most max_bytes + 1 bytes (safe on /dev/zero)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise ValueError(f"{os.fspath(path)}: cannot read ({e.strerror or e})") from None
    if len(raw) > max_bytes:
        raise ValueError(f"{os.fspath(path)}: larger than {max_bytes >> 20} MiB; not a Helios JSON file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{os.fspath(path)}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{os.fspath(path)}: JSON nested too deeply to read") from None
    except ValueError as e:
        raise ValueError(f"{os.fspath(path)}: not valid JSON ({e})") from None


def read_object(path: str | os.PathLike[str], what: str = "a helios result", max_bytes: int = MAX_JSON_BYTES) -> dict:
    """read_json for a file that must hold one JSON object."""
    data = read_json(path, max_bytes)
    if not isinstance(data, dict):
        raise ValueError(f"{os.fspath(path)}: expected a JSON object ({what}), got {type(data).__name__}")
    return data
