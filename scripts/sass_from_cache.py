#!/usr/bin/env python3
"""Look for GPU machine code inside driver cache files and disassemble it (#22).

No profiler sees Vulkan dispatches on the leased H100, so what NVIDIA's
compiler made of a kernel is otherwise invisible. Its Vulkan pipeline cache
(Helios's file under HELIOS_PIPELINE_CACHE, or the driver's own under
~/.cache/nvidia/GLCache) may hold the compiled binaries. This script scans the
given files (directories: every file under them) for ELF images and for
compressed streams (zlib, zstd, lz4 frames; zlib and zstd ones are opened and
scanned in turn, zstd through the `zstandard` package), writes every ELF it finds to
OUT/<file>-<offset>.elf (and the code of every NVIDIA shader container, the
"NVDA" blobs inside the driver 580 cache's zstd frames, to OUT/<blob>.code) and, where `nvdisasm` or `cuobjdump` is on PATH (the
CUDA toolkit), their disassembly beside it. It prints what it found per file,
so an empty result is a finding too (the cache holds no plain ELF).

    python3 scripts/sass_from_cache.py --out /tmp/sass ~/.cache/helios/pipelines
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

ELF_MAGIC = b"\x7fELF"
STREAM_MAGIC = {b"\x28\xb5\x2f\xfd": "zstd", b"\x04\x22\x4d\x18": "lz4", b"\x78\x9c": "zlib", b"\x78\xda": "zlib"}


def entropy(data: bytes) -> float:
    """Bits per byte: ~8 for compressed or encrypted data, lower for code and tables."""
    if not data:
        return 0.0
    counts = Counter(data)
    return -sum(c / len(data) * math.log2(c / len(data)) for c in counts.values())


def elf_size(data: bytes, at: int) -> int | None:
    """The image's size from its 64-bit little-endian header (section headers last), or None."""
    if data[at + 4 : at + 6] != b"\x02\x01" or at + 64 > len(data):
        return None
    (e_shoff,) = struct.unpack_from("<Q", data, at + 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, at + 0x3A)
    size = e_shoff + e_shentsize * e_shnum
    return size if 64 <= size <= len(data) - at else None


def elf_machine(data: bytes, at: int) -> int:
    return struct.unpack_from("<H", data, at + 0x12)[0]  # 190: EM_CUDA


def unzstd(data: bytes) -> bytes | None:
    """The first zstd frame of data, through the zstandard package (pip install
    zstandard), else None (the frames are listed, not opened)."""
    try:
        import zstandard
    except ImportError:
        return None
    try:
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    except zstandard.ZstdError:
        return None


def disassemble(elf: Path) -> str:
    for tool in (["nvdisasm", "-c", "-hex"], ["cuobjdump", "-sass"]):
        if shutil.which(tool[0]):
            r = subprocess.run([*tool, str(elf)], capture_output=True, text=True, timeout=120)
            if r.returncode == 0 and r.stdout.strip():
                return r.stdout
    return ""


SASS_OPS = ("HMMA", "LDSM", "LDS", "STS", "LDG", "STG", "BAR", "SHFL", "MUFU", "LDL", "STL", "ISETP")


def nvda_code(data: bytes) -> bytes | None:
    """The instruction stream of one NVIDIA compiled-shader container ("NVDA" magic,
    the zstd frames of its Vulkan pipeline cache): its header's section table names
    the code's size (word 19) and offset (word 20; the stream starts 8 bytes in).
    Read off the H100's driver 580 caches; None where the layout does not fit."""
    if not data.startswith(b"NVDA") or len(data) < 96:
        return None
    size, off = struct.unpack_from("<2I", data, 76)
    start = off + 8
    if size == 0 or size % 16 or start + size > len(data):
        return None
    return data[start : start + size]


def sass_summary(text: str) -> str:
    """How many of each instruction class worth reading first a disassembly holds."""
    ops = Counter(m.group(1).split(".")[0] for m in re.finditer(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", text))
    return " ".join(f"{k}:{ops[k]}" for k in SASS_OPS if ops[k])


def scan(path: Path, out: Path, found: list[str], arch: str = "SM90") -> None:
    data = path.read_bytes()
    print(f"{path}: {len(data)} bytes, entropy {entropy(data):.2f} bits/byte")
    code = nvda_code(data)
    if code is not None:
        raw = out / f"{path.name}.code"
        raw.write_bytes(code)
        print(f"  NVIDIA container: {len(code)} bytes of code")
        if shutil.which("nvdisasm"):
            r = subprocess.run(["nvdisasm", "-b", arch, str(raw)], capture_output=True, text=True, timeout=120)
            if r.returncode == 0 and r.stdout.strip():
                raw.with_suffix(".sass").write_text(r.stdout)
                print(f"    {raw.with_suffix('.sass').name}: {sass_summary(r.stdout)}")
                found.append(str(raw))
        return
    at = data.find(ELF_MAGIC)
    while at >= 0:
        size = elf_size(data, at)
        machine = elf_machine(data, at) if at + 0x14 <= len(data) else -1
        print(f"  ELF at {at}: machine {machine}, size {size}")
        if size:
            elf = out / f"{path.name}-{at}.elf"
            elf.write_bytes(data[at : at + size])
            text = disassemble(elf)
            if text:
                elf.with_suffix(".sass").write_text(text)
                print(f"    disassembled: {elf.with_suffix('.sass')} ({len(text.splitlines())} lines)")
            found.append(str(elf))
        at = data.find(ELF_MAGIC, at + 4)
    for magic, kind in STREAM_MAGIC.items():
        hits: list[int] = []
        i = data.find(magic)
        while i >= 0 and len(hits) < 20:
            hits.append(i)
            i = data.find(magic, i + 1)
        if not hits:
            continue
        print(f"  {kind} magic at {hits}{' ...' if len(hits) == 20 else ''}")
        if kind == "zstd":
            for i in hits:
                inner = unzstd(data[i:])
                if inner and len(inner) > 64:
                    blob = out / f"{path.name}-{i}.zstd-out"
                    blob.write_bytes(inner)
                    print(f"    zstd frame at {i}: {len(inner)} bytes -> {blob}")
                    scan(blob, out, found, arch)
        if kind == "zlib":
            for i in hits:
                try:
                    inner = zlib.decompressobj().decompress(data[i:])
                except zlib.error:
                    continue
                if len(inner) > 64:
                    blob = out / f"{path.name}-{i}.zlib-out"
                    blob.write_bytes(inner)
                    print(f"    inflated {len(inner)} bytes -> {blob}")
                    scan(blob, out, found, arch)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", type=Path, help="cache files, or directories to walk")
    ap.add_argument("--out", type=Path, required=True, help="where ELF images and their disassembly go")
    ap.add_argument("--arch", default="SM90", help="nvdisasm's --binary architecture for raw code (default SM90)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    found: list[str] = []
    for p in args.paths:
        if not p.exists():
            print(f"{p}: no such path")
            continue
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        if not files:
            print(f"{p}: no files")
        for f in files:
            scan(f, args.out, found, args.arch)
    print(f"{len(found)} image(s) or code stream(s) written under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
