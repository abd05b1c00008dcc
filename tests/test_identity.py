"""Device identity: the Vulkan device's UUID, LUID and PCI address in
Device.info, and references / GPU state chosen by that UUID, never by index: a
CUDA reference on another GPU is refused (exit 2 from helios bench), numpy is
not a CUDA reference and stays allowed."""

from __future__ import annotations

import re
import sys
import types

import pytest

import helios
from helios.cli import main
from helios.harness.protocol import gpustate
from helios.harness.workloads.references import DeviceMismatch, NumpyReference, TorchReference, make_reference

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_info_carries_identity(device):
    info = device.info
    assert UUID_RE.match(info["uuid"]), info["uuid"]
    assert UUID_RE.match(info["driver_uuid"]), info["driver_uuid"]
    assert info["luid"] is None or re.match(r"^[0-9a-f]{16}$", info["luid"])
    assert info["pci_bus_id"] is None or re.match(r"^[0-9a-f]{8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", info["pci_bus_id"])
    with helios.Device() as again:  # stable across opens
        assert again.info["uuid"] == info["uuid"]


def test_uuid_spellings():
    u = "0123abcd-4567-89ab-cdef-0123456789ab"
    assert gpustate.nvml_uuid(u) == "GPU-" + u
    assert gpustate.nvml_uuid("GPU-" + u.upper()) == "GPU-" + u
    assert gpustate.bare_uuid("GPU-" + u) == gpustate.bare_uuid(u) == u.replace("-", "")


def test_select_gpu_by_uuid_reads_nothing_without_that_gpu():
    prev = gpustate.select_gpu("00000000-0000-0000-0000-000000000000")
    try:
        assert gpustate.selected_gpu() == "GPU-00000000-0000-0000-0000-000000000000"
        assert gpustate.gpu_state() is None  # no such NVIDIA GPU: nothing, not GPU 0's state
    finally:
        gpustate.select_gpu(prev)


def fake_torch(uuids: list[str]) -> types.ModuleType:
    """A torch whose CUDA sees GPUs with these UUIDs (no real CUDA needed)."""
    t = types.ModuleType("torch")
    selected: list[int] = []
    props = [types.SimpleNamespace(uuid=u, name=f"fake {i}") for i, u in enumerate(uuids)]
    t.cuda = types.SimpleNamespace(
        is_available=lambda: bool(uuids),
        device_count=lambda: len(uuids),
        current_device=lambda: 0,
        get_device_properties=lambda i: props[i],
        set_device=selected.append,
        get_device_name=lambda i=0: props[i].name,
    )
    t.backends = types.SimpleNamespace(
        cuda=types.SimpleNamespace(matmul=types.SimpleNamespace()), cudnn=types.SimpleNamespace()
    )
    t.selected = selected
    t.__version__ = "fake"
    t.version = types.SimpleNamespace(cuda="0.0")
    return t


def test_torch_reference_follows_the_uuid(monkeypatch, device):
    mine = device.info["uuid"]
    other = "11111111-2222-3333-4444-555555555555"
    t = fake_torch([other, mine])
    monkeypatch.setitem(sys.modules, "torch", t)
    ref = TorchReference(mine)
    assert ref.index == 1 and t.selected == [1]
    assert ref.metadata()["gpu_uuid"] == mine and ref.metadata()["cuda_index"] == 1


def no_cublas(monkeypatch):
    """Where the cuBLASLt module was built, it runs on the real GPU 0: take it away so
    that the fake torch is the only CUDA here."""
    import helios.harness.workloads.references as ref

    def unavailable(uuid=None):
        raise ImportError("taken away by the test")

    monkeypatch.setattr(ref, "CublasReference", unavailable)


@pytest.mark.parametrize("kind", ["torch", "auto"])
def test_cuda_on_other_gpus_is_refused(monkeypatch, device, kind):
    no_cublas(monkeypatch)
    monkeypatch.setitem(sys.modules, "torch", fake_torch(["11111111-2222-3333-4444-555555555555"]))
    with pytest.raises(DeviceMismatch, match=r"no CUDA device matches the Vulkan device \(UUID " + device.info["uuid"]):
        make_reference(kind, device.info["uuid"])
    assert isinstance(make_reference("numpy", device.info["uuid"]), NumpyReference)


def test_bench_exits_2_on_a_mismatch(monkeypatch, device, capsys):
    no_cublas(monkeypatch)
    monkeypatch.setitem(sys.modules, "torch", fake_torch(["11111111-2222-3333-4444-555555555555"]))
    assert main(["bench", "--shapes=16x16x16", "--iters=2", "--warmup=0", "--check-shape=16x16x16"]) == 2
    err = capsys.readouterr().err
    assert "no CUDA device matches" in err and device.info["uuid"] in err


def test_bench_records_the_uuid(device, tmp_path):
    out = tmp_path / "b.json"
    assert (
        main(
            [
                "bench",
                "--shapes=16x16x16",
                "--iters=2",
                "--warmup=0",
                "--check-shape=16x16x16",
                "--ref=numpy",
                f"--out={out}",
            ]
        )
        == 0
    )
    import json

    res = json.loads(out.read_text())
    assert res["helios"]["uuid"] == device.info["uuid"]
    assert "pci_bus_id" in res["helios"]


def test_missing_vulkan_loader_names_the_package():
    """The loader is opened at run time: without one, `import helios` works,
    device_count() is 0 (as torch.cuda.device_count() without a driver), and
    opening a Device raises NoDeviceError saying what to install (helios info: exit 2)."""
    import os
    import subprocess

    env = dict(os.environ, HELIOS_VULKAN_LOADER="/nonexistent/libvulkan.so.1")
    code = (
        "import helios\n"
        "print('count', helios.device_count())\n"
        "try:\n"
        "    helios.Device()\n"
        "except helios.NoDeviceError as e:\n"
        "    print('NoDeviceError', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "count 0" in r.stdout
    assert r.stdout.count("NoDeviceError") == 1 and "apt install libvulkan1" in r.stdout
    r = subprocess.run([sys.executable, "-m", "helios", "info"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "libvulkan1" in r.stderr
