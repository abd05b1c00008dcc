"""pytest-benchmark suites: shapes x implementations, timed on the GPU.

    pytest benchmarks --benchmark-json=out.json [--helios-sizes=quick|full|MxNxK,...] [--helios-flush-l2]

quick (lavapipe-sized) is the default on a CPU Vulkan device, full (canonical +
4096^3) on a hardware GPU. Compare runs with `pytest-benchmark compare`."""

from __future__ import annotations

import numpy as np
import pytest

import helios
from helios.harness.protocol.gpustate import gpu_state, ramp_clocks, select_gpu
from helios.harness.protocol.shapes import parse_shapes

QUICK = "64x64x64,127x129x65"
FULL = "canonical,4096x4096x4096"


def pytest_addoption(parser):
    g = parser.getgroup("helios")
    g.addoption(
        "--helios-sizes",
        default=None,
        help=f"shape set: quick ({QUICK}), full ({FULL}) or MxNxK,...; default by device type",
    )
    g.addoption(
        "--helios-flush-l2",
        action="store_true",
        help="cold L2: overwrite 256 MiB before each round, outside the timed region",
    )


_DEV = None


def device():
    global _DEV
    if _DEV is None:
        _DEV = helios.Device()
    return _DEV


def pytest_generate_tests(metafunc):
    if "shape" in metafunc.fixturenames:
        spec = metafunc.config.getoption("--helios-sizes")
        if spec is None:
            try:
                spec = FULL if device().info["device_type"] != "cpu" else QUICK
            except helios.NoDeviceError:
                spec = QUICK
        spec = {"quick": QUICK, "full": FULL}.get(spec, spec)
        shapes = parse_shapes(spec)
        metafunc.parametrize("shape", shapes, ids=["x".join(map(str, s)) for s in shapes])


@pytest.fixture(scope="session")
def dev():
    try:
        d = device()
    except helios.NoDeviceError as e:
        pytest.skip(f"no Vulkan device: {e}")
    select_gpu(d.info["uuid"])  # GPU state of the GPU Helios runs on
    return d


@pytest.fixture
def flush_bytes(request, dev):
    if not request.config.getoption("--helios-flush-l2"):
        return 0
    return min(256 << 20, dev.info["max_storage_buffer_range"] // 4 * 4)


@pytest.hookimpl
def pytest_benchmark_update_machine_info(config, machine_info):
    try:
        info = device().info
        machine_info["helios_device"] = {
            k: info[k]
            for k in (
                "name",
                "device_type",
                "driver_name",
                "driver_info",
                "driver_version",
                "api_version",
                "subgroup_size",
            )
        }
        machine_info["helios_default_variant"] = device().default_variant()
    except helios.NoDeviceError as e:
        machine_info["helios_device"] = f"none: {e}"
    try:
        import torch

        machine_info["torch"] = {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        }
    except ImportError:
        machine_info["torch"] = None
    machine_info["gpu_state"] = gpu_state()


def inputs(shape):
    m, n, k = shape
    return helios.matmul_timing.random_inputs(m, n, k, seed=m + 3 * n + 7 * k)


def rounds(dev) -> tuple[int, int]:
    """(rounds, minimum warm-up launches): fewer on a CPU device."""
    return (5, 2) if dev.info["device_type"] == "cpu" else (100, 20)


WARMUP_MS = 200.0  # plus at least this much GPU work (helios.matmul_timing.warmup_launches)

_RAMP_INPUTS: list = []


def clocks_up(dev) -> dict:
    """Bring NVIDIA clocks up before a measurement (see helios.harness.protocol.gpustate.ramp_clocks);
    one NVML read when they already are. A no-op without an NVIDIA GPU."""

    def work():
        if not _RAMP_INPUTS:
            _RAMP_INPUTS.extend(helios.matmul_timing.random_inputs(2048, 2048, 2048, seed=5))
        dev.time_matmul(2048, 2048, 2048, iters=100, warmup=0, inputs=tuple(_RAMP_INPUTS))

    return ramp_clocks(work)


def tflops(shape, ms: float) -> float:
    m, n, k = shape
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12


def np_check(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> dict:
    """Sampled float64 check (64 rows, every column) + every element finite."""
    rows = np.arange(0, a.shape[0], max(1, a.shape[0] // 64))[:64]
    r = helios.check_close(out[rows], helios.reference_matmul(a[rows], b))
    return {
        "fails": r.fails,
        "checked": r.total,
        "max_abs_err": r.max_abs_err,
        "nonfinite": int((~np.isfinite(out)).sum()),
        "passed": r.passed and bool(np.isfinite(out).all()),
    }
