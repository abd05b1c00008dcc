"""Loading a table of shaders/ (families.py, layouts.py, ops.py) as a module: the
generators' and the tests' one way in."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any


def load_table_module(shader_dir: Path, file: str, name: str) -> Any:
    """shader_dir/file as the module `name` (it imports kernel_types.py beside it)."""
    sys.path.insert(0, str(shader_dir))
    try:
        spec = importlib.util.spec_from_file_location(name, shader_dir / file)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses look the module up while building classes
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(shader_dir))
    return mod
