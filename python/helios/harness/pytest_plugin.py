"""Helios's pytest plugin, loaded by pytest wherever Helios is installed (the
``pytest11`` entry point ``helios``): what a user's own suite needs to test
code that runs on Helios. Fixtures and markers::

  helios_device          one Device for the session (skipped, with the reason, without one)
  helios_cuda_reference  the CUDA reference on the same GPU (torch.cuda, else the cuBLASLt
                         module), matched by UUID; skipped, saying why, where there is none
  helios_assert_close    helios.assert_close: the gate |h - ref| <= atol + rtol*|ref|, NaN/Inf fail

  helios_gpu   the test needs a hardware GPU (skipped on a CPU Vulkan device such as lavapipe)
  helios_cuda  the test needs a CUDA reference on Helios's GPU
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pytest

import helios

MARKERS = {
    "helios_gpu": "needs a hardware GPU (skipped, with the reason, on a CPU Vulkan device or without one)",
    "helios_cuda": "needs a CUDA reference on the GPU Helios runs on (torch.cuda or the cuBLASLt module)",
}


def pytest_configure(config: Any) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


def _device_info() -> tuple[Optional[dict], str]:
    """The default device's identity, or None and why there is none."""
    try:
        with helios.Device() as dev:
            return dict(dev.info), ""
    except helios.HeliosError as e:
        return None, f"no Vulkan device ({e})"


def _cuda_reason(info: Optional[dict], why: str) -> str:
    """'' when a CUDA reference runs on the device's GPU, else the reason it does not."""
    if info is None:
        return why
    from .workloads.references import make_reference

    try:
        ref = make_reference("auto", info["uuid"])
    except RuntimeError as e:
        return str(e)
    return "" if ref.is_cuda else "no CUDA reference here (neither torch.cuda nor the cuBLASLt module)"


def pytest_runtest_setup(item: Any) -> None:
    gpu, cuda = item.get_closest_marker("helios_gpu"), item.get_closest_marker("helios_cuda")
    if not gpu and not cuda:
        return
    info, why = _device_info()
    if gpu:
        if info is None:
            pytest.skip(f"helios_gpu: {why}")
        if info["device_type"] == "cpu":
            pytest.skip(f"helios_gpu: needs a hardware GPU; this device is {info['name']} (CPU)")
    if cuda:
        reason = _cuda_reason(info, why)
        if reason:
            pytest.skip(f"helios_cuda: {reason}")


@pytest.fixture(scope="session")
def helios_device() -> Iterator[helios.Device]:
    """One helios.Device (the default device: HELIOS_DEVICE, else the best GPU) for the
    whole session, closed at its end; the test is skipped, saying why, without one."""
    try:
        dev = helios.Device()
    except helios.NoDeviceError as e:
        pytest.skip(f"no Vulkan device: {e}")
    yield dev
    dev.close()


@pytest.fixture(scope="session")
def helios_cuda_reference(helios_device: helios.Device) -> Any:
    """The CUDA reference on the GPU helios_device runs on (torch.cuda, else the cuBLASLt
    module; matched by UUID, never by index): ``.matmul(a, b)`` and its metadata. The
    test is skipped, saying why, where there is none (lavapipe, no torch.cuda)."""
    from .workloads.references import make_reference

    try:
        ref = make_reference("auto", helios_device.info["uuid"])
    except RuntimeError as e:
        pytest.skip(f"no CUDA reference on {helios_device.info['name']}: {e}")
    if not ref.is_cuda:
        pytest.skip(f"no CUDA reference on {helios_device.info['name']} (neither torch.cuda nor cuBLASLt)")
    return ref


@pytest.fixture
def helios_assert_close() -> Any:
    """helios.assert_close(result, ref, atol=, rtol=): the gate every Helios number passes,
    |result - ref| <= atol + rtol * |ref| elementwise, NaN or Inf failing; raises
    AssertionError naming the worst element."""
    return helios.assert_close
