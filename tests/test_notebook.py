"""notebooks/explore.ipynb executes headless (small shapes) and matches its generator."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ASAN_DRAW_SKIP

ROOT = os.path.join(os.path.dirname(__file__), "..")
NB = os.path.join(ROOT, "notebooks", "explore.ipynb")


def test_committed_cells_match_the_generator():
    nbformat = pytest.importorskip("nbformat", reason="nbformat not installed (the notebook extra)")
    from tools import make_notebook as gen  # noqa: E402

    committed = nbformat.read(NB, as_version=4)
    assert [c.source for c in committed.cells] == [c.source for c in gen.build().cells], (
        "notebooks/explore.ipynb differs from tools/make_notebook.py: regenerate and re-run it"
    )


@ASAN_DRAW_SKIP
@pytest.mark.long_on_cpu  # half a minute on lavapipe: make test-full and CI's end-to-end stage run it there
def test_notebook_executes_headless(device, tmp_path):
    pytest.importorskip("nbclient", reason="nbclient not installed (the notebook extra)")
    pytest.importorskip("ipykernel", reason="ipykernel not installed (the notebook extra)")
    nbformat = pytest.importorskip("nbformat")
    out = tmp_path / "run.ipynb"
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # the kernel draws inline
    env["HELIOS_NOTEBOOK_QUICK"] = "1"
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "run_notebook.py"), NB, "--out", str(out), "--timeout", "600"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    nb = nbformat.read(str(out), as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 3


def test_running_the_notebook_leaves_the_committed_one_alone():
    """tools/run_notebook.py used to write the outputs into the committed notebook unless
    --out was given: by default it now writes build/notebooks/<name>."""
    pytest.importorskip("nbformat", reason="nbformat not installed (the notebook extra)")
    pytest.importorskip("nbclient", reason="nbclient not installed (the notebook extra)")
    from tools.run_notebook import target

    assert target(NB, None, False) == os.path.join("build", "notebooks", "explore.ipynb")
    assert target(NB, None, True) == NB and target(NB, "x.ipynb", False) == "x.ipynb"


def test_the_benchmark_store_is_ignored():
    """The README's --benchmark-save advice makes .benchmarks/ in the checkout: git ignores it."""
    r = subprocess.run(["git", "check-ignore", "-q", ".benchmarks/x.json"], cwd=ROOT)
    if r.returncode == 128:
        pytest.skip("not a git checkout")
    assert r.returncode == 0
