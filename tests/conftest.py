"""Shared fixtures: one Device per session; variants the device lists."""

from __future__ import annotations

import importlib.util
import itertools
import os
import tempfile
from types import ModuleType

import numpy as np
import pytest

# The suite never reads or writes the user's tune cache: a tuned pick there would
# change what variant=None runs. Tests that exercise the cache set their own path.
os.environ["HELIOS_TUNE_CACHE"] = os.path.join(tempfile.mkdtemp(prefix="helios-test-"), "tune.json")

import helios  # noqa: E402

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")


def load_script(name: str) -> ModuleType:
    """scripts/NAME.py as a module (scripts are not a package), for testing its functions."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(SCRIPTS, f"{name}.py"))
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# `make asan` preloads libasan into Python. matplotlib's ft2font (C++, not
# instrumented) then aborts in ASan's __cxa_throw interceptor (CheckFailed):
# tests that draw skip there, saying so; Helios's own C still runs sanitized.
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")
ASAN_DRAW_SKIP = pytest.mark.skipif(
    UNDER_ASAN,
    reason="under the ASan preload, matplotlib's ft2font aborts in ASan's __cxa_throw "
    "interceptor (not Helios code); drawing is tested in the normal run",
)


def _open_device():
    try:
        return helios.Device(), None
    except helios.NoDeviceError as e:  # no Vulkan driver: say so, never pass silently
        return None, str(e)


_DEV, _WHY = _open_device()


@pytest.fixture(scope="session")
def device() -> helios.Device:
    if _DEV is None:
        pytest.skip(f"no Vulkan device: {_WHY}")
    return _DEV


def device_variants() -> list[str]:
    return _DEV.variants() if _DEV is not None else []


def rand(shape, seed, dtype=np.float16):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32).astype(dtype)


def small_ints(shape, seed):
    """Integers in [-2, 2]: every product and partial sum (|sum| < 2048) is exact in fp16."""
    return np.random.default_rng(seed).integers(-2, 3, size=shape).astype(np.float16)


def assert_layouts_exact(dev: helios.Device, variant: str, shapes) -> None:
    """`variant`'s products over every layout (A and B stored transposed or not)
    on small integers, equal to the float64 product element for element."""
    for (m, n, k), ta, tb in itertools.product(shapes, (False, True), (False, True)):
        a, b = small_ints((m, k), m + k), small_ints((k, n), n + 1)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        aa = np.ascontiguousarray(a.T) if ta else a
        bb = np.ascontiguousarray(b.T) if tb else b
        got = dev.matmul(aa, bb, trans_a=ta, trans_b=tb, out_dtype="float32", variant=variant)
        np.testing.assert_array_equal(got, ref, err_msg=f"{variant} {m}x{n}x{k} trans_a={ta} trans_b={tb}")


def is_hardware(dev: helios.Device) -> bool:
    return dev.info["device_type"] != "cpu"


def pytest_collection_modifyitems(config, items):
    """`gpu` tests need a hardware GPU; on a CPU Vulkan device (lavapipe) or none
    they are skipped with the reason printed."""
    if _DEV is None:
        why = f"gpu: no Vulkan device ({_WHY})"
    elif _DEV.info["device_type"] == "cpu":
        why = f"gpu: needs a hardware GPU; this device is {_DEV.info['name']} (CPU)"
    else:
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=why))


# Figures tests measure (leak rates, A/A verdicts) are printed at the end of every
# run, also without -s, so CI logs carry them.
MEASURED: list[str] = []


@pytest.fixture
def report():
    return MEASURED.append


def pytest_terminal_summary(terminalreporter):
    if MEASURED:
        terminalreporter.section("Helios measurements")
        for line in MEASURED:
            terminalreporter.write_line(line)
