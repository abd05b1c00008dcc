"""The machine code a kernel compiled to, read out of the driver's pipeline cache.

``Device.kernel_stats(..., machine_code=True)`` (and ``attention_kernel_stats``)
compile the kernel again into a VkPipelineCache of its own and return that cache's
bytes as ``pipeline_cache_data``. The bytes start with Vulkan's cache header
(header size, version, vendor ID, device ID, cache UUID); what follows is the
driver's own. This module reads the one format known so far:

* NVIDIA (vendor 0x10de; driver 580 on the H100): zstd frames, one per compiled
  stage, each an "NVDA" container whose section table gives the code's size (word
  19) and offset (word 20; the code starts 8 bytes after it); the code is the
  SASS the GPU runs (its size equals the "Binary Size" statistic).

Its digest (SHA-256 of the code) names the machine code: two builds whose SPIR-V
differs but compile to the same code share it, which `helios compare` reads as
the same kernel. Elsewhere (lavapipe, another vendor, a layout that does not fit)
the answer says why there is none.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from typing import Any, Callable, Optional

from .optional import require

NVIDIA = 0x10DE
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
HEADER_MIN = 32  # VkPipelineCacheHeaderVersionOne


def nvda_code(container: bytes) -> Optional[bytes]:
    """The instruction stream of one NVIDIA compiled-shader container, or None where
    the layout does not fit (not a container, a size or offset out of range)."""
    if not container.startswith(b"NVDA") or len(container) < 96:
        return None
    size, off = struct.unpack_from("<2I", container, 76)
    start = off + 8
    if size == 0 or size % 16 or start + size > len(container):
        return None
    return container[start : start + size]


# A compiled pipeline's code is a few hundred KB (the H100's default GEMM: 177 KB): a
# frame that inflates past this is not one, and is never inflated further.
MAX_FRAME_BYTES = 64 << 20
# Real caches hold one frame per compiled stage; bytes with more candidate magics
# than this are not a pipeline cache, and trying each would take long.
MAX_FRAME_TRIES = 4096


def zstd_decompressor() -> Callable[[memoryview, int], Optional[bytes]]:
    """A function (data, limit) -> the first zstd frame of data inflated (trailing
    bytes ignored), or None when it inflates past limit bytes; it raises where data
    does not open as a frame. Python 3.14's compression.zstd, else zstandard."""
    if sys.version_info >= (3, 14):
        from compression import zstd  # type: ignore[import-not-found]

        def first_frame(data: memoryview, limit: int) -> Optional[bytes]:
            out = zstd.ZstdDecompressor().decompress(data, max_length=limit + 1)
            return None if len(out) > limit else out

        return first_frame
    zstandard = require("zstandard", "reading NVIDIA machine code from the pipeline cache")

    def first_frame_zstandard(data: memoryview, limit: int) -> Optional[bytes]:
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=False)
        out = reader.read(limit + 1)  # bounded: never more than limit + 1 bytes in memory
        return None if len(out) > limit else out

    return first_frame_zstandard


def zstd_frames(data: bytes, decompress: Callable[[memoryview, int], Optional[bytes]]) -> list[bytes]:
    """The contents of every zstd frame in data that opens within MAX_FRAME_BYTES (the
    magic's bytes can also occur inside another frame's compressed data: those do not
    open). Each try reads the bytes in place (no copy); at most MAX_FRAME_TRIES tries."""
    frames = []
    view = memoryview(data)
    at = data.find(ZSTD_MAGIC)
    tries = 0
    while at >= 0 and tries < MAX_FRAME_TRIES:
        tries += 1
        try:
            out = decompress(view[at:], MAX_FRAME_BYTES)
            if out:
                frames.append(out)
        except Exception:  # noqa: BLE001 - zstd's errors differ by implementation: not a frame here
            pass
        at = data.find(ZSTD_MAGIC, at + 1)
    return frames


def identify(cache_data: bytes) -> dict[str, Any]:
    """{"digest": 16 hex of SHA-256 over the code, "bytes": its size, "containers":
    how many} for a pipeline cache's data (bytes, bytearray or memoryview), or
    {"status": why there is none}."""
    if not isinstance(cache_data, (bytes, bytearray, memoryview)):
        raise TypeError(f"machine code is read from bytes, got {type(cache_data).__name__}")
    cache_data = bytes(cache_data)
    if len(cache_data) < HEADER_MIN:
        return {"status": f"the driver's pipeline cache held {len(cache_data)} bytes: no code"}
    header_size, _, vendor = struct.unpack_from("<3I", cache_data, 0)
    body = cache_data[max(header_size, HEADER_MIN) :]
    if not body:
        return {"status": f"the driver (vendor 0x{vendor:04x}) keeps no compiled code in a pipeline cache"}
    if vendor != NVIDIA:
        return {"status": f"the pipeline cache format of vendor 0x{vendor:04x} is not one Helios reads"}
    try:
        decompress = zstd_decompressor()
    except ImportError as e:
        return {"status": str(e)}
    codes = [c for c in (nvda_code(f) for f in zstd_frames(body, decompress)) if c is not None]
    if not codes:
        return {"status": "no NVIDIA shader container in the pipeline cache (a driver whose layout differs)"}
    h = hashlib.sha256()
    for c in codes:
        h.update(c)
    return {"digest": h.hexdigest()[:16], "bytes": sum(map(len, codes)), "containers": len(codes)}
