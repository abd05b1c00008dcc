"""The kernel's machine code as its identity (helios.machine_code): the
engine hands back a pipeline cache holding one kernel; the reader finds the code
in NVIDIA's layout and says why not elsewhere."""

from __future__ import annotations

import struct

import pytest

from helios import machine_code as mc

NO_ZSTD = "zstandard (helios-vulkan[machine-code]) is not installed here"


def header(vendor: int) -> bytes:
    """VkPipelineCacheHeaderVersionOne: size, version, vendor, device, UUID."""
    return struct.pack("<4I", 32, 1, vendor, 0x2330) + bytes(16)


def container(code: bytes, extra: bytes = b"") -> bytes:
    """An NVDA container whose section table (words 19, 20) points at code."""
    head = bytearray(b"NVDA" + bytes(92))
    off = len(head) + len(extra) - 8
    struct.pack_into("<2I", head, 76, len(code), off)
    return bytes(head) + extra + code


def cache(vendor: int, *containers: bytes) -> bytes:
    c = pytest.importorskip("zstandard", reason=NO_ZSTD).ZstdCompressor()
    return header(vendor) + b"".join(c.compress(x) for x in containers)


def test_nvidia_code_is_found_and_named_by_its_digest():
    code = bytes(range(256)) * 4
    a = mc.identify(cache(mc.NVIDIA, container(code, b"spirv-hash-1")))
    b = mc.identify(cache(mc.NVIDIA, container(code, b"another-key-22")))
    assert a["bytes"] == 1024 and a["containers"] == 1
    assert a["digest"] == b["digest"]  # the same code under other metadata: the same kernel
    other = mc.identify(cache(mc.NVIDIA, container(code[:-16] + bytes(16))))
    assert other["digest"] != a["digest"]
    two = mc.identify(cache(mc.NVIDIA, container(code), container(code[:512])))
    assert two["containers"] == 2 and two["bytes"] == 1536


@pytest.mark.parametrize(
    "data,why",
    [
        (b"", "held 0 bytes"),
        (header(0x10005), "keeps no compiled code"),
        (header(0x1002) + b"\x01" * 64, "vendor 0x1002 is not one Helios reads"),
        (header(mc.NVIDIA) + b"\x28\xb5\x2f\xfd" + b"garbage" * 8, "no NVIDIA shader container"),
    ],
)
def test_no_code_says_why(data, why):
    if "container" in why:
        pytest.importorskip("zstandard", reason=NO_ZSTD)
    r = mc.identify(data)
    assert "digest" not in r and why in r["status"]


def test_a_container_whose_table_points_outside_is_refused():
    bad = bytearray(container(bytes(64)))
    struct.pack_into("<2I", bad, 76, 64, 10**6)
    assert mc.nvda_code(bytes(bad)) is None and mc.nvda_code(b"NVDA") is None


def test_the_engine_returns_one_kernels_pipeline_cache(device):
    """kernel_stats(machine_code=True): the kernel compiled into a cache of its own,
    whose header names this device's vendor; the row's identity carries the reader's
    answer (lavapipe keeps no code in a pipeline cache: the reason)."""
    from helios.harness.results.rows import kernel_identity

    s = device.kernel_stats(machine_code=True)
    data = s["pipeline_cache_data"]
    size, version, vendor = struct.unpack_from("<3I", data, 0)
    assert size >= 32 and version == 1 and vendor == device.info["vendor_id"]
    ident = kernel_identity(lambda: device.kernel_stats(machine_code=True))
    assert ident["code_digest"] == s["code_digest"] and set(ident["machine_code"]) & {"digest", "status"}
    bwd = device.attention_kernel_stats(64, backward=True, machine_code=True)
    assert all(isinstance(bwd[k]["pipeline_cache_data"], bytes) for k in ("dq", "dkdv"))
    assert "pipeline_cache_data" not in device.kernel_stats()
