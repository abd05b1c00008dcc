"""Where a measurement came from: when, which Helios build, the working directory's
checkout and the host. Every result file starts with these fields (``provenance``)."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
from typing import Optional

import numpy as np

from ... import __version__, _helios

FLUSH_BYTES = 256 << 20  # --flush-l2: larger than any current GPU's L2 (H100 50 MB, H200 60 MB)


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def helios_build() -> dict:
    """The Helios that measured: its version and the commit its engine was built
    from (baked in at build time; "+dirty" when the tree had local changes)."""
    return {"version": __version__, "build_commit": _helios.BUILD_COMMIT}


def _cwd_git() -> Optional[dict]:
    """The commit of the working directory's checkout, where there is one: the
    user's project, not necessarily Helios. HELIOS_COMMIT overrides."""
    env = os.environ.get("HELIOS_COMMIT")
    if env:
        return {"commit": env, "dirty": None, "source": "HELIOS_COMMIT"}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
        if not commit:
            return None
        dirty = (
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=5
            ).stdout.strip()
            != ""
        )
        return {"commit": commit, "dirty": dirty, "source": "git", "cwd": os.getcwd()}
    except (OSError, subprocess.SubprocessError):
        return None


def provenance() -> dict:
    """Fields every result file starts with: when, which Helios (``helios_build``),
    the working directory's checkout (``cwd_git``, labelled: it is the caller's
    project), and the host. ``git`` keeps the old field for readers of older
    files: the Helios build commit."""
    build = helios_build()
    commit = build["build_commit"]
    known = commit != "unknown"
    return {
        "timestamp": now(),
        "helios_build": build,
        "git": {
            "commit": commit.removesuffix("+dirty") if known else None,
            "dirty": commit.endswith("+dirty") if known else None,
            "source": "helios build",
        },
        "cwd_git": _cwd_git(),
        "host": {
            "hostname": platform.node(),
            "os": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
    }
