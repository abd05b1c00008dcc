"""Shared fixtures: one Device per session; variants the device lists."""

from __future__ import annotations

import os
import tempfile

import pytest

# The suite never reads or writes the user's tune cache: a tuned pick there would
# change what variant=None runs. Tests that exercise the cache set their own path.
os.environ["HELIOS_TUNE_CACHE"] = os.path.join(tempfile.mkdtemp(prefix="helios-test-"), "tune.json")

from helpers import _DEV, _WHY, TOP, is_hardware  # noqa: E402,F401  (the suite's one Device)

import helios  # noqa: E402


@pytest.fixture(scope="session")
def device() -> helios.Device:
    if _DEV is None:
        pytest.skip(f"no Vulkan device: {_WHY}")
    return _DEV


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
