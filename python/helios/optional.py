"""Optional dependencies: imported where a feature needs them, and when one is
missing, one ImportError that names the feature and the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingDependencyError(ImportError):
    """A feature's optional dependency is not installed."""


# module -> the pyproject extra that installs it
EXTRAS = {"scipy": "stats", "matplotlib": "notebook", "torch": "torch", "tqdm": "progress", "zstandard": "machine-code",
          "safetensors": "models"}  # fmt: skip


def require(module: str, feature: str) -> ModuleType:
    """Import `module` for `feature`, or raise MissingDependencyError saying what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        extra = EXTRAS.get(top)
        how = f"pip install 'helios-vulkan[{extra}]'" if extra else f"pip install {top}"
        raise MissingDependencyError(f"{feature} needs {top}, which is not installed ({how})") from e
