"""The pytest plugin a user's suite gets with Helios installed: fixtures,
markers that skip with their reason, and the assert helper that fails."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

USER_SUITE = """
import numpy as np
import pytest

def test_device(helios_device):
    assert helios_device.info["name"]

def test_close_passes(helios_device, helios_assert_close):
    a = np.ones((8, 8), np.float16)
    helios_assert_close(helios_device.matmul(a, a), np.full((8, 8), 8.0))

def test_close_fails(helios_assert_close):
    helios_assert_close(np.full(4, np.nan, np.float16), np.ones(4))

@pytest.mark.helios_gpu
def test_gpu_only():
    pass

@pytest.mark.helios_cuda
def test_cuda_only(helios_cuda_reference):
    assert helios_cuda_reference.is_cuda
"""


def test_the_entry_point_is_registered():
    names = {ep.name: ep.value for ep in metadata.entry_points(group="pytest11")}
    assert names.get("helios") == "helios.harness.pytest_plugin"


def test_a_users_suite_gets_fixtures_markers_and_the_helper(tmp_path, device):
    (tmp_path / "test_user.py").write_text(USER_SUITE)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    out = r.stdout
    assert "test_close_fails" in out and "not close" in out, out[-3000:]
    if device.info["device_type"] == "cpu":
        assert "3 passed" not in out and "1 failed" in out and "2 passed" in out, out[-3000:]
        assert "helios_gpu: needs a hardware GPU" in out and "helios_cuda:" in out, out[-3000:]
    else:
        assert "1 failed" in out
    assert "markers" not in r.stderr.lower() or "PytestUnknownMarkWarning" not in out


def test_the_fixtures_document_themselves(tmp_path):
    """`pytest --fixtures` in a user's suite says what each Helios fixture gives (they had no
    docstrings: the listing said nothing)."""
    (tmp_path / "test_user.py").write_text("def test_x():\n    pass\n")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--fixtures", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    out = r.stdout
    for name, words in (
        ("helios_device", "for the\n    whole session"),
        ("helios_cuda_reference", "matched by UUID"),
        ("helios_assert_close", "NaN or Inf failing"),
    ):
        assert name in out, out[-3000:]
        block = out[out.index(name) :][:600]
        assert " ".join(words.split()) in " ".join(block.split()), block
