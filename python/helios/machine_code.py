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


def zstd_decompressor() -> Callable[[bytes], bytes]:
    """A function that decompresses the first zstd frame of its bytes (trailing bytes
    ignored): Python 3.14's compression.zstd, else the zstandard package."""
    if sys.version_info >= (3, 14):
        from compression import zstd  # type: ignore[import-not-found]

        def first_frame(data: bytes) -> bytes:
            return zstd.ZstdDecompressor().decompress(data)

        return first_frame
    zstandard = require("zstandard", "reading NVIDIA machine code from the pipeline cache")
    return lambda data: zstandard.ZstdDecompressor().decompressobj().decompress(data)


def zstd_frames(data: bytes, decompress: Callable[[bytes], bytes]) -> list[bytes]:
    """The contents of every zstd frame in data that opens (the magic's bytes can
    also occur inside another frame's compressed data: those do not open)."""
    frames = []
    at = data.find(ZSTD_MAGIC)
    while at >= 0:
        try:
            frames.append(decompress(data[at:]))
        except Exception:  # noqa: BLE001 - zstd's errors differ by implementation: not a frame here
            pass
        at = data.find(ZSTD_MAGIC, at + 1)
    return frames


def identify(cache_data: bytes) -> dict[str, Any]:
    """{"digest": 16 hex of SHA-256 over the code, "bytes": its size, "containers":
    how many} for a pipeline cache's data, or {"status": why there is none}."""
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
