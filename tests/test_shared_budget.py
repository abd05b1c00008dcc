"""The kernels that hold the most workgroup memory fit what NVIDIA's Vulkan driver
offers a workgroup: maxComputeSharedMemorySize is 49152 bytes on the H100s Helios is
measured on (the bench results' `shared_memory_bytes`), where lavapipe, which runs the
tests, does not enforce its own limit. A kernel over it passes every test here and
fails on the GPU, so its workgroup variables are summed from its SPIR-V, specialized as
the host specializes it on such a GPU (subgroups of 32), for every head dimension its
attention takes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import GEN_KERNELS, generate, load_module

ROOT = Path(__file__).resolve().parent.parent
gen_kernels = load_module("gen_kernels", GEN_KERNELS)

NVIDIA_SHARED_BYTES = 49152
NVIDIA_SUBGROUP = 32
HEAD_DIMS = (8, 16, 32, 64, 128, 256)  # decode.c's head_dim_ok: the divisors of 256 from 8
FAMILIES = ("matmul_gemv_persist", "decode")
TOOLS = ("glslc", "spirv-opt", "spirv-dis")
MISSING = [t for t in TOOLS if shutil.which(t) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not on PATH (tools/dev has them)")


def workgroup_bytes(disassembly: str) -> dict[str, int]:
    """Each Workgroup variable's bytes in a specialized, frozen module's disassembly
    (scalars, vectors and arrays of them: what the kernels declare shared)."""
    consts: dict[str, int] = {}
    sizes: dict[str, int] = {}
    pointee: dict[str, str] = {}
    out: dict[str, int] = {}
    for line in disassembly.splitlines():
        m = re.match(r"\s*(%\S+) = (Op\w+)\s*(.*)", line)
        if not m:
            continue
        name, op, args = m.group(1), m.group(2), m.group(3).split()
        if op == "OpConstant" and len(args) == 2 and args[1].isdigit():
            consts[name] = int(args[1])
        elif op in ("OpTypeInt", "OpTypeFloat"):
            sizes[name] = int(args[0]) // 8
        elif op == "OpTypeBool":
            sizes[name] = 4
        elif op == "OpTypeVector" and args[0] in sizes:
            sizes[name] = sizes[args[0]] * int(args[1])
        elif op == "OpTypeArray" and args[0] in sizes and args[1] in consts:
            sizes[name] = sizes[args[0]] * consts[args[1]]
        elif op == "OpTypePointer" and args[0] == "Workgroup":
            pointee[name] = args[1]
        elif op == "OpVariable" and args[-1] == "Workgroup":
            assert pointee[args[0]] in sizes, f"{name}: a workgroup type this reader does not size"
            out[name.lstrip("%")] = sizes[pointee[args[0]]]
    return out


def specialized(spv: Path, values: dict[int, int], tmp: Path) -> str:
    """spv with its specialization constants set to values and folded, disassembled."""
    frozen = tmp / f"{spv.stem}-frozen.spv"
    pairs = " ".join(f"{k}:{v}" for k, v in sorted(values.items()))
    subprocess.run(["spirv-opt", f"--set-spec-const-default-value={pairs}", "--freeze-spec-const",
                    "--fold-spec-const-op-composite", str(spv), "-o", str(frozen)], check=True)  # fmt: skip
    return subprocess.run(["spirv-dis", str(frozen)], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, tuple[Path, dict[int, int], dict[str, int]]]:
    """Every permutation of FAMILIES compiled: its SPIR-V, its specialization constants'
    values (the table's defaults, subgroups of 32 as on NVIDIA; each test sets the head
    dimension) and their ids by name."""
    tmp = tmp_path_factory.mktemp("budget")
    gen = generate(ROOT / "shaders", tmp)
    assert gen.returncode == 0, gen.stderr
    table = gen_kernels.load_table(ROOT / "shaders")
    out = {}
    for fam in (f for f in table.FAMILIES if f.name in FAMILIES):
        ids = {s.name: i for i, s in enumerate(fam.spec)}
        values = {i: int(s.default.rstrip("u"), 0) for i, s in enumerate(fam.spec)}
        if "SUBGROUP" in ids:
            values[ids["SUBGROUP"]] = NVIDIA_SUBGROUP
        for name, _cvals, defines, _needs in gen_kernels.permutations(fam):
            spv = tmp / f"{name}.spv"
            cmd = ["glslc", "--target-env=vulkan1.3", "-fshader-stage=compute", f"-I{tmp}", f"-I{ROOT / 'shaders'}",
                   *defines.split(), str(ROOT / "shaders" / fam.source), "-o", str(spv)]  # fmt: skip
            r = subprocess.run(cmd, capture_output=True, text=True)
            assert r.returncode == 0, f"{name}: {r.stderr}"
            out[name] = (spv, values, ids)
    assert {n.split("_out")[0].split("_in")[0] for n in out} == set(FAMILIES), sorted(out)
    return out


@pytest.mark.parametrize("d", HEAD_DIMS)
def test_the_run_and_decode_kernels_fit_nvidia_s_workgroup_memory(compiled, tmp_path, d):
    for name, (spv, values, ids) in compiled.items():
        held = workgroup_bytes(specialized(spv, {**values, ids["D"]: d}, tmp_path))
        assert sum(held.values()) <= NVIDIA_SHARED_BYTES, (
            f"{name} at head dimension {d}: {sum(held.values())} bytes of workgroup memory, over the "
            f"{NVIDIA_SHARED_BYTES} NVIDIA's driver offers: {sorted(held.items(), key=lambda kv: -kv[1])}"
        )


def test_the_reader_sizes_what_a_kernel_declares(tmp_path):
    """A shader of known workgroup variables, one sized by a specialization constant."""
    src = tmp_path / "k.comp"
    src.write_text("#version 460\nlayout(local_size_x = 64) in;\nlayout(constant_id = 0) const uint N = 4;\n"
                   "shared uvec4 a[N * 2u];\nshared float b[100];\nshared vec2 c;\n"
                   "layout(binding = 0) buffer O { uint o[]; };\n"
                   "void main() { a[gl_LocalInvocationIndex % (N * 2u)] = uvec4(1u); b[gl_LocalInvocationIndex] = 1.0;"
                   " c = vec2(2.0); barrier(); o[0] = a[1].x + uint(b[3] + c.x); }\n")  # fmt: skip
    subprocess.run(["glslc", "--target-env=vulkan1.3", str(src), "-o", str(tmp_path / "k.spv")], check=True)
    assert workgroup_bytes(specialized(tmp_path / "k.spv", {0: 8}, tmp_path)) == {"a": 256, "b": 400, "c": 8}
