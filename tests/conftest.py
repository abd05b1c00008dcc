"""Shared fixtures: one Device per session; variants the device lists."""

from __future__ import annotations

import itertools
import os
import tempfile

import numpy as np
import pytest

# The suite never reads or writes the user's tune cache: a tuned pick there would
# change what variant=None runs. Tests that exercise the cache set their own path.
os.environ["HELIOS_TUNE_CACHE"] = os.path.join(tempfile.mkdtemp(prefix="helios-test-"), "tune.json")

import variant_classes  # noqa: E402

import helios  # noqa: E402

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


@pytest.fixture(scope="session")
def device() -> helios.Device:
    if _DEV is None:
        pytest.skip(f"no Vulkan device: {_WHY}")
    return _DEV


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


def pytest_addoption(parser):
    parser.addoption(
        "--full",
        action="store_true",
        help="run every variant the device lists in the per-variant tests (make test-full; HELIOS_TEST_FULL=1)",
    )


def pytest_configure(config):
    # Before collection: the per-variant tests parametrize over device_variants() as
    # their modules are imported, in every xdist worker alike.
    if config.getoption("--full", default=False):
        os.environ["HELIOS_TEST_FULL"] = "1"


def _cache_state() -> str:
    """What the run starts from: lavapipe compiles each pipeline the first time
    (1-150 s), so a cold shader cache makes the first run several times longer."""
    mesa = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mesa_shader_cache")
    size = 0
    for base, _, files in os.walk(mesa):
        for f in files:
            try:
                size += os.path.getsize(os.path.join(base, f))
            except OSError:
                pass
    if _DEV is None or _DEV.info["device_type"] != "cpu":
        return "hardware device: pipelines compile in well under a second"
    if size < 8 << 20:
        return (
            f"COLD: Mesa's shader cache at {mesa} holds {size >> 20} MiB; lavapipe compiles every "
            "pipeline once (make test about 13 minutes on 2 cores), later runs reuse them (about 3 minutes)"
        )
    return f"warm: Mesa's shader cache at {mesa} holds {size >> 20} MiB (make test about 3 minutes on 2 cores)"


def _run_line() -> str:
    full = os.environ.get("HELIOS_TEST_FULL") == "1"
    return (
        f"helios: {'every variant (--full)' if full else 'one variant per structural class + the small ones'}; "
        + _cache_state()
    )


def pytest_report_header(config):
    return [_run_line()]


def pytest_sessionstart(session):
    """The run's line before any test, also under -q (make test), where pytest prints no
    header: whether it starts cold says what its time will be. Once, by the controller."""
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None and not hasattr(session.config, "workerinput") and session.config.option.verbose < 0:
        tr.write_line(_run_line())


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
    """`slow` tests run first (each worker of pytest -n starts on them rather than one
    worker ending the run alone on one); `gpu` tests need a hardware GPU: on a CPU
    Vulkan device (lavapipe) or none they are skipped with the reason printed;
    `long_on_cpu` tests run on a CPU device only with --full (make test-full)."""
    items.sort(key=lambda item: "slow" not in item.keywords)  # stable: the rest keep their order
    full = os.environ.get("HELIOS_TEST_FULL") == "1"
    if _DEV is not None and _DEV.info["device_type"] == "cpu" and not full:
        later = pytest.mark.skip(
            reason="long_on_cpu: minutes end to end on a CPU device (builds, A/A rounds): "
            "make test-full (pytest --full) runs it here; a GPU runs it always"
        )
        for item in items:
            if "long_on_cpu" in item.keywords:
                item.add_marker(later)
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
