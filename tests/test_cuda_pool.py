"""torch -> Helios with no copy: CUDA memory from Helios's pool (the virtual-memory
API, exported as fds Vulkan imports) read in place by Helios ops. Without CUDA
(CI on lavapipe) the refusals and their messages run; the rest says why it skips."""

from __future__ import annotations

import os

import numpy as np
import pytest

import helios
from helios import _helios


def test_without_cuda_every_entry_point_says_what_is_missing(device, monkeypatch):
    monkeypatch.setenv("HELIOS_CUDA_DRIVER", "/nonexistent/libcuda.so.1")
    assert _helios.cuda_pool_lookup(1 << 40, 16) is None
    if os.path.exists("/dev/nvidiactl"):
        pytest.skip("a CUDA driver is loaded in this process already (the override applies before first use)")
    with pytest.raises(helios.UnsupportedError, match="CUDA library"):
        _helios._cuda_pool_alloc(1 << 20, 0)
    assert _helios.cuda_pool_usage() == (0, 0)
    with pytest.raises(BufferError, match="host memory is always copied"):
        helios.from_dlpack(np.ones(4, np.float32), copy=False)


torch = pytest.importorskip("torch", reason="torch is not installed")
ht = pytest.importorskip("helios.torch", reason="helios.torch needs torch")
from helios.torch._staging import imported  # noqa: E402  (after the skip: needs torch)
from helios.torch._state import cuda_ordinal  # noqa: E402


def test_memory_pool_refuses_clearly_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("torch.cuda is available here: the pool is tested below")
    with pytest.raises(helios.UnsupportedError, match="torch.cuda is not available"):
        ht.memory_pool()


@pytest.fixture()
def cuda(device):
    if not torch.cuda.is_available():
        pytest.skip("torch.cuda is not available here (no CUDA driver or GPU)")
    if not device.info.get("external_memory_fd"):
        pytest.skip("the Vulkan device offers no external memory (VK_KHR_external_memory_fd)")
    return torch.device("cuda")


def test_pool_tensors_are_read_in_place_and_writes_show_on_both_sides(cuda):
    with ht.memory_pool():
        x = torch.arange(256 * 128, device=cuda, dtype=torch.float32).reshape(256, 128).half()
    before = torch.cuda.memory_allocated()
    h = ht.to_helios(x, copy=False)
    assert torch.cuda.memory_allocated() == before  # nothing allocated: the same memory
    assert h.shape == (256, 128) and h.dtype == np.float16
    np.testing.assert_array_equal(h.numpy(), x.cpu().numpy())
    x.add_(1)  # torch writes; Helios reads the new values
    torch.cuda.synchronize()
    np.testing.assert_array_equal(h.numpy(), x.cpu().numpy())
    h._write(0, np.full(256 * 128, 7.0, np.float16))  # Helios writes; torch reads them
    assert bool((x == 7).all())
    # an operand of products, read in place
    with ht.memory_pool():
        w = torch.randn(128, 64, device=cuda).half()
    hw = ht.to_helios(w, copy=False)
    dev = ht.device_for(x)
    got = dev.matmul(h, hw, out_dtype="float32")
    np.testing.assert_allclose(got, 7.0 * w.float().sum(0).cpu().numpy()[None, :].repeat(256, 0), rtol=2e-3, atol=2e-2)


def test_outside_the_pool_is_one_copy_or_a_clear_refusal(cuda):
    x = torch.randn(64, 32, device=cuda).half()
    with pytest.raises(BufferError, match="not in helios.torch.memory_pool"):
        ht.to_helios(x, copy=False)
    h = helios.from_dlpack(x)  # one device-to-device copy
    np.testing.assert_array_equal(h.numpy(), x.cpu().numpy())
    with ht.memory_pool():
        big = torch.randn(64, 33, device=cuda).half()
    with pytest.raises(BufferError):  # a view at an offset the device cannot bind
        ht.to_helios(big.view(-1)[1:], copy=False)


def test_ops_take_pool_weights_without_staging_copies(cuda):
    g = torch.Generator(device="cuda").manual_seed(5)
    with ht.memory_pool():
        w = (torch.randn(96, 64, device=cuda, generator=g) / 8).to(torch.bfloat16)
    x = torch.randn(40, 64, device=cuda, generator=g).to(torch.bfloat16)
    dev = ht.device_for(x)
    assert imported(dev, w) is not None and imported(dev, x) is None
    y = ht.linear(x, w)
    want = x.double() @ w.double().T
    assert (y.double() - want).abs().max().item() <= 2e-2 * want.abs().max().item()


def test_a_thousand_segments_leave_nothing_behind(cuda, device):
    """Pool segments allocated, imported into Vulkan and released 1000 times: the
    pool, the live Vulkan objects and the process's file descriptors return to
    where they were."""
    ordinal = cuda_ordinal(torch.empty(1, device=cuda))
    dev = ht.device_for(torch.empty(1, device=cuda))
    fds = len(os.listdir("/proc/self/fd"))
    usage = _helios.cuda_pool_usage()
    tel = dev.telemetry()
    for _ in range(1000):
        ptr = _helios._cuda_pool_alloc(1 << 20, ordinal)
        seg = _helios.cuda_pool_lookup(ptr, 16)
        t = helios.Tensor(dev, 1, cuda_segment=seg[0])
        del t
        _helios._cuda_pool_free(ptr)
    assert _helios.cuda_pool_usage() == usage
    after = dev.telemetry()
    assert (after["live_buffers"], after["live_memory"]) == (tel["live_buffers"], tel["live_memory"])
    assert len(os.listdir("/proc/self/fd")) == fds
    with pytest.raises(ValueError, match="was freed"):
        helios.Tensor(dev, 1, cuda_segment=seg[0])


def test_reused_operand_views_follow_torch_writes_and_reallocations(cuda):
    g = torch.Generator(device="cuda").manual_seed(9)
    with ht.memory_pool():
        w = (torch.randn(64, 48, device=cuda, generator=g) / 8).half()
    x = torch.randn(30, 48, device=cuda, generator=g).half()
    y1 = ht.linear(x, w).double()
    w.mul_(2)  # the same memory, new values: the reused view must read them
    y2 = ht.linear(x, w).double()
    assert torch.allclose(y2, 2 * y1, rtol=2e-3, atol=2e-3)
    ptr = w.data_ptr()
    del w
    with ht.memory_pool():
        w2 = (torch.randn(32, 48, device=cuda, generator=g) / 8).half()  # likely the same address, another shape
    want = x.double() @ w2.double().T
    got = ht.linear(x, w2).double()
    assert got.shape == (30, 32) and (got - want).abs().max().item() <= 2e-3 * want.abs().max().item() + 1e-3
    assert isinstance(ptr, int)


# ---- the Vulkan side of an import, where no CUDA exists: an exportable Tensor's
# memory exported as an opaque fd and imported again (the path pool segments take)


def _exportable_or_skip(device):
    if not device.info.get("external_memory_fd"):
        pytest.skip("the Vulkan device offers no external memory (VK_KHR_external_memory_fd)")


def test_an_imported_fd_shares_the_memory_both_ways(device):
    _exportable_or_skip(device)
    a = device.upload(np.arange(64, dtype=np.float32).reshape(8, 8), dtype="float32", exportable=True)
    b = a._reimport()._set_meta((8, 8), "float32", 8)
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    a.copy_(np.full((8, 8), 3.0, np.float32))  # written through one, read through the other
    np.testing.assert_array_equal(b.numpy(), np.full((8, 8), 3.0, np.float32))
    b.copy_(np.full((8, 8), -1.5, np.float32))
    np.testing.assert_array_equal(a.numpy(), np.full((8, 8), -1.5, np.float32))
    h = device.upload(np.ones((8, 8), np.float16), exportable=True)
    hb = h._reimport()._set_meta((8, 8), "float16", 8)
    np.testing.assert_array_equal(device.matmul(hb, hb, out_dtype="float32").numpy(), np.full((8, 8), 8.0))


def test_a_thousand_imports_leave_nothing_behind(device):
    _exportable_or_skip(device)
    a = device.empty((256,), "float32", exportable=True)
    tel = device.telemetry()
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(1000):
        b = a._reimport()
        del b
    after = device.telemetry()
    assert (after["live_buffers"], after["live_memory"], after["live_tensors"]) == (
        tel["live_buffers"],
        tel["live_memory"],
        tel["live_tensors"],
    )
    assert len(os.listdir("/proc/self/fd")) == fds


@pytest.mark.parametrize("kind,call", [("buffer", "vkCreateBuffer"), ("alloc", "vkAllocateMemory")])
def test_an_import_that_fails_leaks_nothing(device, monkeypatch, kind, call):
    _exportable_or_skip(device)
    a = device.empty((256,), "float32", exportable=True)
    tel = device.telemetry()
    fds = len(os.listdir("/proc/self/fd"))
    monkeypatch.setenv("HELIOS_FAULT", f"{kind}:1")
    with pytest.raises(helios.DeviceMemoryError, match=call):
        a._reimport()
    monkeypatch.delenv("HELIOS_FAULT")
    after = device.telemetry()
    assert (after["live_buffers"], after["live_memory"]) == (tel["live_buffers"], tel["live_memory"])
    assert len(os.listdir("/proc/self/fd")) == fds  # the fd closed: Vulkan never took it
    b = a._reimport()  # and the next import works
    assert b.alive
