"""Reading result files given on a command line: one ValueError with the path
and the reason for anything that is not a readable JSON object."""
from __future__ import annotations

import json


def read_object(path: str, what: str = "a helios result") -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason})") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read a JSON result ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object ({what}), got {type(data).__name__}")
    return data
