"""CUDA interop: exportable Tensors handed to torch (DLPack) with no copy.

Without a CUDA driver (lavapipe in CI) the exportable memory still works as a
Tensor and every export fails with a BufferError naming what is missing; with
one (the H100) the round trip is checked by writes on both sides."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import helios


def _exportable(device) -> None:
    if not device.info.get("external_memory_fd"):
        pytest.skip(f"{device.info['name']} does not offer VK_KHR_external_memory_fd (exportable memory)")


def _cuda_torch(device):
    """torch with CUDA on the GPU Helios runs on, else skip (saying why)."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch.cuda is not available here (no CUDA driver or GPU)")
    _exportable(device)
    return torch


def test_exportable_tensors_work_as_tensors(device):
    _exportable(device)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((48, 40)).astype(np.float16)
    b = rng.standard_normal((40, 24)).astype(np.float16)
    ta = device.upload(a, exportable=True)
    out = device.empty((48, 24), "float32", exportable=True)
    assert ta.exportable and out.exportable and not device.upload(a).exportable
    device.matmul(ta, b, out=out)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out.numpy(), want, atol=1e-2, rtol=1e-2)
    assert not ta[1:3].exportable  # a slice shares its owner's memory: exported as a host copy
    np.testing.assert_array_equal(np.from_dlpack(ta[1:3]), a[1:3])


def test_views_that_are_not_packed_are_refused_before_any_driver_call(device):
    _exportable(device)
    t = device.empty((8, 16), exportable=True)
    with pytest.raises(BufferError, match="whole, packed Tensor"):
        t.T.__dlpack__()
    with pytest.raises(BufferError, match="copy=True"):
        t.__dlpack__(copy=True)


def test_without_the_cuda_driver_exports_say_what_is_missing(device):
    """A separate process: the driver library is opened once per process."""
    _exportable(device)
    code = (
        "import helios\n"
        "d = helios.Device()\n"
        "t = d.empty((4, 8), exportable=True)\n"
        "for f in (t.__dlpack_device__, t.__dlpack__):\n"
        "    try:\n"
        "        f()\n"
        "    except BufferError as e:\n"
        "        print('BufferError:', e)\n"
        "print(d.matmul(t.numpy(), t.numpy().T).shape)\n"  # Helios itself works on
    )
    env = dict(os.environ, HELIOS_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 3 and lines[2] == "(4, 4)"
    for line in lines[:2]:
        assert line.startswith("BufferError: CUDA interop needs the NVIDIA driver's CUDA library")
        assert "/nonexistent/libcuda.so.1" in line


def test_zero_copy_round_trip_with_torch(device):
    torch = _cuda_torch(device)
    x = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    t = device.upload(x, dtype="float32", exportable=True)
    kind, ordinal = t.__dlpack_device__()
    assert kind == 2 and torch.cuda.get_device_properties(ordinal).uuid is not None
    view = torch.from_dlpack(t)
    assert view.is_cuda and view.dtype == torch.float32 and tuple(view.shape) == (64, 32)
    assert torch.equal(view.cpu(), torch.from_numpy(x))  # Helios wrote, torch reads
    view.mul_(2)  # torch writes; its stream finishes before Helios reads
    torch.cuda.current_stream().synchronize()
    np.testing.assert_array_equal(t.numpy(), 2 * x)
    again = torch.from_dlpack(t)
    assert again.data_ptr() == view.data_ptr()  # the same memory, mapped once
    # a Helios product into an exported tensor: torch sees the result, no copy
    a = np.ones((64, 16), np.float16)
    b = np.full((16, 32), 0.5, np.float16)
    device.matmul(a, b, out=t)
    assert torch.all(view == 8.0)


@pytest.mark.timing  # reads the GPU's free memory: other processes on it would move it
def test_close_waits_for_exports_and_nothing_leaks(device):
    torch = _cuda_torch(device)
    with helios.Device() as d:
        t = d.empty((256, 256), "float32", exportable=True)
        held = torch.from_dlpack(t)
        with pytest.raises(BufferError, match="still held by a consumer"):
            d.close()
        assert d.telemetry()["live_exports"] == 1
        del held
        gc.collect()
        assert d.telemetry()["live_exports"] == 0
    assert d.closed

    # 1000 export/import cycles: CUDA memory, live Vulkan objects and exports come back.
    # Free memory is read after 100 cycles: the CUDA driver sets up its import
    # machinery once (92 MiB on the H100 with driver 580), which is not a leak; a leak
    # grows with the cycles that follow (each import is at least a 2 MiB allocation).
    def cycles(d: helios.Device, n: int) -> int:
        """n export/import cycles, then CUDA's free memory."""
        for _ in range(n):
            t = d.empty((64, 64), exportable=True)
            v = torch.from_dlpack(t)
            v.fill_(1)
            del v, t
        gc.collect()
        torch.cuda.synchronize()
        return torch.cuda.mem_get_info()[0]

    with helios.Device() as d:
        objects0 = d.telemetry()["live_memory"]
        free0 = cycles(d, 100)
        free1 = cycles(d, 1000)
        tel = d.telemetry()
        assert (tel["live_exports"], tel["cuda_imports"], tel["live_memory"]) == (0, 0, objects0)
        assert abs(free1 - free0) < 64 << 20


def _capsule_name(cap) -> str:
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype, get.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(cap).decode()


def test_a_consumer_that_asks_gets_a_versioned_capsule(device):
    """DLPack 1.0: `__dlpack__(max_version=(1, 0))` gets DLManagedTensorVersioned where the
    producer can give it (the host copy through NumPy >= 2.1); without max_version the
    unversioned capsule every consumer takes. Either way NumPy reads it back."""
    t = device.upload(np.arange(6, dtype=np.float16).reshape(2, 3))
    assert _capsule_name(t.__dlpack__()) == "dltensor"
    cap = t.__dlpack__(max_version=(1, 0))
    numpy_versioned = tuple(int(x) for x in np.__version__.split(".")[:2]) >= (2, 1)
    assert _capsule_name(cap) == ("dltensor_versioned" if numpy_versioned else "dltensor")
    np.testing.assert_array_equal(np.from_dlpack(t), t.numpy())


def test_from_dlpack_takes_a_producer_that_offers_only_versioned_capsules(device):
    """A producer that refuses the unversioned protocol (max_version None) is read through
    NumPy's negotiation of DLPack 1.0."""
    if tuple(int(x) for x in np.__version__.split(".")[:2]) < (2, 1):
        pytest.skip(f"NumPy {np.__version__} asks for no versioned capsule (2.1 does)")
    base = np.arange(8, dtype=np.float32).reshape(2, 4)

    class VersionedOnly:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            if max_version is None or tuple(max_version) < (1, 0):
                raise BufferError("this producer offers DLPack 1.0 capsules only")
            return base.__dlpack__(max_version=max_version)

    t = helios.from_dlpack(VersionedOnly(), device=device)
    np.testing.assert_array_equal(t.numpy(), base.astype(np.float16))


def test_an_exportable_tensor_exports_a_versioned_capsule_to_cuda(device):
    torch = _cuda_torch(device)
    t = device.upload(np.arange(12, dtype=np.float16).reshape(3, 4), exportable=True)
    cap = t.__dlpack__(max_version=(1, 0))
    assert _capsule_name(cap) == "dltensor_versioned"
    x = torch.utils.dlpack.from_dlpack(cap)
    assert x.is_cuda and torch.equal(x.cpu(), torch.arange(12, dtype=torch.float16).reshape(3, 4))
    assert _capsule_name(cap) == "used_dltensor_versioned"
    del x
    gc.collect()
