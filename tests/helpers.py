"""What test modules share: the suite's one Device, the variants a per-variant test
runs, seeded inputs and the checks several files make. conftest.py holds the pytest
fixtures and hooks; a test module imports from here (`from helpers import ...`)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import variant_classes

import helios

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def device_variants() -> list[str]:
    """The matmul variants a per-variant test runs: one per structural class and every
    small one by default, every listed variant with --full (tests/variant_classes.py)."""
    return variant_classes.matmul_variants(_DEV.variants()) if _DEV is not None else []


def cpu_default_run() -> bool:
    """A CPU device (lavapipe) without --full: where each new pipeline is seconds to minutes of JIT."""
    return _DEV is not None and _DEV.info["device_type"] == "cpu" and os.environ.get("HELIOS_TEST_FULL") != "1"


def head_dims_under_test(dims: tuple[int, ...]) -> tuple[int, ...]:
    """The attention head dims a test runs: on a CPU device's default run those up to 64
    (each d is its own JIT compile there, ~35 s forward and ~180 s backward at d=128; d is a
    specialization constant of the same code: tests/variant_classes.py), all with --full and
    on a GPU."""
    return tuple(d for d in dims if d <= 64) if cpu_default_run() else dims


def attention_test_variants(d: int, backward: bool = False) -> list[str]:
    """As device_variants, for attention variants at head dim d."""
    if _DEV is None:
        return []
    return variant_classes.attention_variants(_DEV.attention_variants(d, backward=backward))


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


def persistent_runs(dev: helios.Device) -> bool:
    """Whether dev's plans run consecutive one-row products as one persistent dispatch
    (on where the device reports its SMs, or HELIOS_PLAN_PERSISTENT_GRID asks): two
    chained products then record one dispatch."""
    a, w = dev.upload(rand((1, 64), 1)), dev.upload(rand((64, 64), 2))
    with dev.plan() as p:
        p.matmul(p.matmul(a, w, trans_b=True), w, trans_b=True)
    return p.counts[1] == 1


def load_module(name: str, path: Path) -> Any:
    """A file of the tree that is not a package module (a table of shaders/, a generator of
    cmake/) imported as `name`, with its folder on the path while it loads."""
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(path.parent))
    return mod


GEN_KERNELS = Path(TOP) / "cmake" / "gen_kernels.py"


def generate(shader_dir: Path, out: Path, glslc: str = "") -> subprocess.CompletedProcess:
    """cmake/gen_kernels.py run on shader_dir's table into out, as the build runs it
    (with glslc: its compiler features probed)."""
    args = [sys.executable, str(GEN_KERNELS), str(shader_dir), str(out)] + ([glslc] if glslc else [])
    return subprocess.run(args, capture_output=True, text=True)
