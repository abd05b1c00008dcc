#!/usr/bin/env python3
"""Disassemble the SASS NVIDIA's Vulkan driver keeps in a pipeline cache (#22).

No profiler sees Vulkan dispatches on the leased H100, and the driver returns no
internal representation (HELIOS_PIPELINE_IR), but its VkPipelineCache data
(Helios's file under HELIOS_PIPELINE_CACHE) is a run of zstd frames, one per
pipeline, each an "NVDA" container whose code section is raw SM90 SASS
(driver 580; the code's size equals the pipeline's "Binary Size" statistic).
For every frame this writes the code to OUT/<file>-<frame>.code and, where
`nvdisasm` is on PATH (CUDA toolkit; also on PyPI as nvidia-cuda-nvdisasm), its
disassembly to OUT/<file>-<frame>.sass, and prints one instruction-mix line
(HMMA, LDSM, LDG, spills...). A file that is itself one container (a frame
opened elsewhere) is read as one. The layout is helios.machine_code's (which
bench rows use for their machine-code digest); frames need `zstandard` before
Python 3.14. Files are named by frame number within their cache file.

    python3 tools/kernel/sass_from_cache.py --out /tmp/sass ~/.cache/helios/pipelines
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from helios.machine_code import nvda_code, zstd_decompressor, zstd_frames  # the format is the product's to read

SASS_OPS = ("HMMA", "LDSM", "LDS", "STS", "LDG", "STG", "BAR", "SHFL", "MUFU", "LDL", "STL", "ISETP")


def sass_summary(text: str) -> str:
    """How many of each instruction class worth reading first a disassembly holds."""
    ops = Counter(m.group(1).split(".")[0] for m in re.finditer(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", text))
    return " ".join(f"{k}:{ops[k]}" for k in SASS_OPS if ops[k])


def write_code(code: bytes, stem: Path, arch: str) -> str:
    """stem.code and, with nvdisasm, stem.sass; the line printed for it, which names the
    code by a hash (the same kernel compiled twice, or by two trees, prints the same one)."""
    # stem names end in "-<offset>" after a ".bin": add the suffix, never replace one
    # (with_suffix would map every frame of a file to the same name).
    code_path, sass_path = stem.with_name(stem.name + ".code"), stem.with_name(stem.name + ".sass")
    code_path.write_bytes(code)
    line = f"{stem.name}: {len(code)} bytes of code, sha256 {hashlib.sha256(code).hexdigest()[:16]}"
    if shutil.which("nvdisasm"):
        r = subprocess.run(["nvdisasm", "-b", arch, str(code_path)], capture_output=True, text=True, timeout=120)
        if r.returncode == 0 and r.stdout.strip():
            sass_path.write_text(r.stdout)
            return f"{line}: {sass_summary(r.stdout)}"
        return f"{line} (nvdisasm failed: {r.stderr.strip()[:200]})"
    return f"{line} (no nvdisasm on PATH: not disassembled)"


def scan(path: Path, out: Path, arch: str) -> int:
    """The containers found in one file, each written and summarised."""
    data = path.read_bytes()
    code = nvda_code(data)
    if code is not None:
        print(write_code(code, out / path.name, arch))
        return 1
    frames = zstd_frames(data, zstd_decompressor())
    found = 0
    for at, blob in enumerate(frames):
        code = nvda_code(blob)
        if code is None:
            print(f"{path.name}-{at}: a zstd frame of {len(blob)} bytes, not a shader container")
            continue
        print(write_code(code, out / f"{path.name}-{at}", arch))
        found += 1
    if not frames:
        print(f"{path}: {len(data)} bytes, no zstd frame and not a shader container")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", type=Path, help="cache files, or directories to walk")
    ap.add_argument("--out", type=Path, required=True, help="where the code and its disassembly go")
    ap.add_argument("--arch", default="SM90", help="nvdisasm's --binary architecture (default SM90: H100, H200)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    found = 0
    for p in args.paths:
        if not p.exists():
            print(f"{p}: no such path")
            continue
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        if not files:
            print(f"{p}: no files")
        for f in files:
            found += scan(f, args.out, args.arch)
    print(f"{found} shader container(s) written under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
