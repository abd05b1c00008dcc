"""The kernel families are declared once (shaders/families.py) and generated into
CMake rows, C and GLSL (cmake/gen_kernels.py): these tests hold the generator to
its promises and the variant grammar to the strings it always accepted."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import GEN_KERNELS, generate, load_module

import helios
from helios import _helios

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen")
    r = generate(ROOT / "shaders", out)
    assert r.returncode == 0, r.stderr
    return out


def test_every_permutation_is_a_cmake_row_an_enum_value_and_an_embedded_shader(generated):
    rows = re.findall(r'"([a-z0-9_]+)\|([a-z0-9_./]+)\|([^"]*)"', (generated / "kernels.cmake").read_text())
    header = (generated / "hl_kernels.h").read_text()
    source = (generated / "kernels.c").read_text()
    enum = re.findall(r"^\s+HL_SHADER_([A-Z0-9_]+),$", header, re.M)
    assert [name.upper() for name, _, _ in rows] == enum
    for name, src, _defines in rows:
        assert (ROOT / "shaders" / src).exists()
        assert f'#include "{name}.inc"' in source
    # one name per axis value; the skipped combinations are not built
    names = {name for name, _, _ in rows}
    assert {
        "matmul_coop_accf16_outf16_inf16",
        "matmul_coop_accf32_outbf16_inbf16",
        "matmul_coop_accf32_outf32_inbf16",
        "matmul_coop2_accf32_outf32",
        "matmul_scalar_outf16_inf16",
        "matmul_scalar_outbf16_inbf16",
        "matmul_splitk_reduce_outbf16",
        "attention_coop_inf16_p_regs0",
        "attention_coop_inf16_p_regs1",
        "attention_coop_inbf16_p_regs0",
        "attention_coop_inbf16_p_regs1",
        "attention_scalar_inbf16",
    } <= names
    for never in (
        "matmul_coop_accf16_outf32_inbf16",
        "matmul_coop_accf32_outbf16_inf16",
        "matmul_coop2_accf32_outbf16",
    ):
        assert never not in names and f"HL_SHADER_{never.upper()}," not in header
    assert ("matmul_coop_accf16_outf32_inf16", "matmul/matmul_coop.comp", "-DACC_F16") in rows


def _fake_glslc(tmp_path, rejects: str):
    """A glslc that rejects any source naming the extension `rejects` and accepts the rest
    (the feature probes read only its exit status)."""
    fake = tmp_path / "glslc"
    fake.write_text(
        "#!/bin/sh\nfor a; do f=$a; done\n"
        f'if grep -q {rejects} "$f"; then echo "extension not supported: {rejects}" >&2; exit 1; fi\nexit 0\n'
    )
    fake.chmod(0o755)
    return fake


def _generate_without(tmp_path, feature: str) -> tuple[str, str, str]:
    """kernels.cmake, hl_kernels.h and kernels.c generated with a glslc lacking `feature`."""
    out = tmp_path / "gen"
    r = generate(ROOT / "shaders", out, str(_fake_glslc(tmp_path, feature)))
    assert r.returncode == 0, r.stderr
    cmake, header, source = ((out / name).read_text() for name in ("kernels.cmake", "hl_kernels.h", "kernels.c"))
    return cmake, header, source


def test_a_glslc_without_bfloat16_builds_everything_else(tmp_path):
    """Where the compiler rejects the GL_EXT_bfloat16 probe, the bf16 cooperative
    permutations are left out of the CMake rows but keep their enum value, with no
    code and the missing feature named (the pipeline lookup's message); a permutation
    that needs two features names only the one missing."""
    cmake, header, source = _generate_without(tmp_path, "GL_EXT_bfloat16")
    assert 'set(HELIOS_GLSLC_MISSING "GL_EXT_bfloat16")' in cmake
    assert "matmul_coop_accf32_outbf16_inbf16|" not in cmake and "attention_coop_inbf16_p_regs0|" not in cmake
    assert "attention_coop_inbf16_p_regs1|" not in cmake and "attention_coop_inf16_p_regs1|" in cmake
    assert "matmul_scalar_outbf16_inbf16|" in cmake and "matmul_coop_accf32_outf16_inf16|" in cmake
    assert "#define HL_BUILT_GL_EXT_BFLOAT16 0" in header and "HL_SHADER_ATTENTION_COOP_INBF16_P_REGS0," in header
    assert "#define HL_BUILT_GL_NV_COOPERATIVE_MATRIX2 1" in header
    assert '{"attention_coop_inbf16_p_regs0", NULL, 0, "GL_EXT_bfloat16"}' in source
    assert '{"attention_coop_inbf16_p_regs1", NULL, 0, "GL_EXT_bfloat16"}' in source


def test_a_glslc_without_coopmat_conversions_builds_p_through_shared_memory(tmp_path):
    """Where the compiler rejects GL_NV_cooperative_matrix2, the attention forward's
    P-in-registers permutations are left out (HL_BUILT_... 0: the host never asks for
    them) and the ones that hand P through shared memory are built."""
    cmake, header, source = _generate_without(tmp_path, "GL_NV_cooperative_matrix2")
    assert 'set(HELIOS_GLSLC_MISSING "GL_NV_cooperative_matrix2")' in cmake
    assert "attention_coop_inf16_p_regs1|" not in cmake and "attention_coop_inbf16_p_regs1|" not in cmake
    assert "attention_coop_inf16_p_regs0|" in cmake and "attention_coop_inbf16_p_regs0|" in cmake
    assert "#define HL_BUILT_GL_NV_COOPERATIVE_MATRIX2 0" in header
    assert '{"attention_coop_inf16_p_regs1", NULL, 0, "GL_NV_cooperative_matrix2"}' in source


def test_glsl_and_c_take_constant_ids_from_one_place(generated):
    header = (generated / "hl_kernels.h").read_text()
    for glsl in generated.glob("spec_*.glsl"):
        family = glsl.stem.removeprefix("spec_").upper()
        text = glsl.read_text()
        for cid, name in re.findall(r"constant_id = (\d+)\) const \w+ (\w+)", text):
            assert f"#define HL_SPEC_{family}_{name} {cid}\n" in header, (glsl.name, name)
    # no shader declares a constant id or a binding number by hand any more
    for src in (ROOT / "shaders").rglob("*.comp"):
        text = src.read_text()
        assert not re.search(r"constant_id\s*=\s*\d", text), src.name
        assert not re.search(r"local_size_x_id\s*=\s*\d", text), src.name
        assert not re.search(r"binding\s*=\s*\d", text), src.name


def _broken_table(tmp_path: Path, old: str, new: str) -> Path:
    d = tmp_path / "shaders"
    shutil.copytree(ROOT / "shaders", d, ignore=shutil.ignore_patterns("__pycache__"))
    table = next(t for t in (d / "families.py", d / "variants.py") if old in t.read_text())  # the table, its grammars
    table.write_text(table.read_text().replace(old, new, 1))
    return d


@pytest.mark.parametrize(
    "old,new,message",
    [
        ('Num("stages=", "stages"', 'Num("stages=", "stagez"', "unknown field 'stagez'"),
        (
            '"attention",\n        axes=(IN_AXIS_COOP, P_AXIS)',
            '"attn",\n        axes=(IN_AXIS_COOP, P_AXIS)',
            "unknown binding set",
        ),
        ("skip=MIXED_16,", 'skip=((("in", "HL_F8"),),),', "skips unknown axis value in=HL_F8"),
        ('Spec("TN", "uint", "16", "v->tn"),', 'Spec("TM", "uint", "16", "v->tn"),', "names a constant twice"),
        (
            'Spec("ITERS", "uint", "1024", "e->iters"),',
            'Spec("ITERS", "uint", "1024", "e->iter"),',
            "reads e->iter, not in SPEC_ENV",
        ),
        (
            '(("iters",), "loop trip counts (the roof kernel)"),',
            '(("iters", "spare"), ""),',
            "declares spare, which no constant reads",
        ),
    ],
)
def test_a_table_mistake_fails_the_build_with_a_reason(tmp_path, old, new, message):
    r = generate(_broken_table(tmp_path, old, new), tmp_path / "out")
    assert r.returncode != 0
    assert message in (r.stderr + r.stdout)


def _gen_module():
    return load_module("gen_kernels", GEN_KERNELS)


def test_the_digest_is_over_spirv_and_the_table(tmp_path):
    """KERNELS_DIGEST (the tune cache's key) hashes the compiled SPIR-V and the generated
    C table, by name: it moves when any of them changes and with nothing else."""
    gen = _gen_module()
    files = []
    for name, body in (("hl_kernels.h", b"table"), ("kernels.c", b"c"), ("a.inc", b"1,2"), ("b.inc", b"3,4")):
        (tmp_path / name).write_bytes(body)
        files.append(tmp_path / name)
    d = gen.digest(files)
    assert len(d) == 12 and d == gen.digest(list(reversed(files)))
    (tmp_path / "b.inc").write_bytes(b"3,5")
    assert gen.digest(files) != d
    gen.write_digest(tmp_path / "kernels_digest.c", tmp_path, files[2:])
    assert f'hl_kernels_digest[] = "{gen.digest(files)}"' in (tmp_path / "kernels_digest.c").read_text()


def test_this_build_digest_is_its_spirv():
    """Each build directory's digest is the one its SPIR-V and table give, and the extension
    imported here carries one of them (a development build from this checkout)."""
    dirs = [Path(_helios.__file__).resolve().parent / "generated"] + sorted((ROOT / "build").glob("*/generated"))
    built = {}
    gen = _gen_module()
    for d in dirs:
        if not (d / "kernels_digest.c").exists():
            continue
        m = re.search(r'hl_kernels_digest\[\] = "([0-9a-f]+)"', (d / "kernels_digest.c").read_text())
        assert m, d
        assert m.group(1) == gen.digest([d / "hl_kernels.h", d / "kernels.c", *sorted(d.glob("*.inc"))]), d
        built[m.group(1)] = d
    if not built:
        pytest.skip(f"no build directory here ({[str(d) for d in dirs]}): an installed wheel")
    assert _helios.KERNELS_DIGEST in built, (_helios.KERNELS_DIGEST, built)


def test_a_comment_edit_keeps_the_spirv(tmp_path):
    """What the SPIR-V digest rests on: glslc's output does not change with a comment."""
    glslc = shutil.which("glslc")
    if glslc is None:
        pytest.skip("glslc is not installed here (tools/dev has it)")
    out = tmp_path / "gen"
    assert generate(ROOT / "shaders", out).returncode == 0
    src = tmp_path / "shaders"
    shutil.copytree(ROOT / "shaders", src)
    edited = src / "matmul" / "matmul_splitk_reduce.comp"
    edited.write_text("// a comment that changes nothing\n" + edited.read_text().replace("\n", "\n// and another\n", 3))

    def compile_(shader_dir):
        spv = tmp_path / f"{shader_dir.name}.spv"
        r = subprocess.run(
            [
                glslc,
                "--target-env=vulkan1.3",
                "-O",
                "-I",
                str(out),
                "-o",
                str(spv),
                str(shader_dir / "matmul" / "matmul_splitk_reduce.comp"),
            ],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
        return spv.read_bytes()

    assert compile_(ROOT / "shaders") == compile_(src)


# ---- the grammar: the strings the hand-written parser took, read the same way ----

CANONICAL = [
    "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:splitk=1:raster=8",
    "coop:16x16x16:tile128x128x64:sg4x4:acc=f16:load=direct:stages=1:splitk=4:raster=1",
    "coop2:tile128x128x32:wg256:acc=f32:raster=8",
    "scalar:tile64x64x16:acc=f32",
    "coop:16x16x16:tile128x128x64:sg4x4:acc=f32:load=shared:stages=2:splitk=1:raster=8:store=direct",
]


@pytest.mark.parametrize("s", CANONICAL)
def test_canonical_strings_round_trip(s):
    assert _helios.canonical_variant(s) == s
    assert _helios.format_variant(_helios.variant_fields(s)) == s


def test_the_store_knob_is_left_out_of_strings_while_staged():
    v = "coop:16x16x16:tile128x128x64:sg4x4:acc=f32:load=shared:stages=2:splitk=1:raster=8"
    assert _helios.variant_fields(v)["store"] == "staged"
    assert _helios.canonical_variant(v + ":store=staged") == v
    assert _helios.format_variant(_helios.variant_fields(v) | {"store": "direct"}) == v + ":store=direct"
    with pytest.raises(ValueError, match="expected e.g."):
        _helios.canonical_variant(v + ":store=fast")


def test_direct_store_products_are_correct(device):
    """store=direct (coopMatStore of interior tiles) against float64: plain products
    take it; epilogue, batched and split-K products keep their own paths."""
    import numpy as np

    from helios.check import check_close

    listed = [v for v in device.variants() if _helios.variant_fields(v)["store"] == "direct"]
    if not listed:
        pytest.skip("no coop variant on this device (store= is a coop knob)")
    v = listed[0]
    rng = np.random.default_rng(5)
    for m, n, k in [(64, 64, 64), (130, 72, 48), (256, 128, 96)]:
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        want = a.astype(np.float64) @ b.astype(np.float64)
        for out in ("float32", "float16"):
            assert check_close(device.matmul(a, b, variant=v, out_dtype=out), want).passed
        bias = rng.standard_normal(n).astype(np.float32)
        got = device.matmul(a, b, variant=v, out_dtype="float32", bias=bias, activation="relu")
        assert check_close(got, np.maximum(want + bias, 0)).passed


def test_older_strings_take_the_absent_values():
    old = "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2"
    assert _helios.canonical_variant(old) == old + ":splitk=1:raster=1"
    assert _helios.canonical_variant(old + ":raster=8") == old + ":splitk=1:raster=8"


@pytest.mark.parametrize(
    "bad",
    [
        "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared",  # stages missing
        "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:raster=8:splitk=1",  # order
        "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=fast:stages=2",
        "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:splitk=1:raster=8:x=1",
        "coop::tile128x128x32",
        "coop2:tile128x128x32:wg256:acc=f32",
        "scalar:tile64x64:acc=f32",
        "coop:0x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2",
        "coop:16x8x16:tile128x128x32:sg4x8:acc=bf8:load=shared:stages=2",
        "nope",
        "",
    ],
)
def test_malformed_strings_say_what_is_expected(bad):
    with pytest.raises(ValueError, match="expected e.g."):
        _helios.canonical_variant(bad)


def test_attention_variants_round_trip(device):
    listed = device.attention_variants(64)
    assert "fa-scalar" in listed
    # the engine reads back what it formatted (one coop variant: each compiles a pipeline)
    for s in {listed[0], "fa-scalar"}:
        assert isinstance(device.attention_kernel_stats(64, s), dict)


@pytest.mark.parametrize("s", ["fa-coop:128x16x16:sg4:wq1:bc32", "fa-coop:16x16x16:sg4:wq9:bc32", "fa-coop:16x16"])
def test_attention_strings_past_the_parse_limits_are_malformed(device, s):
    import numpy as np

    q = np.zeros((1, 1, 16, 64), np.float16)
    with pytest.raises(ValueError, match="malformed attention variant"):
        helios.attention(q, q, q, variant=s, device=device)


def test_format_variant_fills_defaults_and_names_bad_fields():
    v = _helios.format_variant(dict(path="coop", tm=16, tn=16, tk=16, bm=128, bn=128, bk=64, sg_m=4, sg_n=4))
    assert v == "coop:16x16x16:tile128x128x64:sg4x4:acc=f32:load=shared:stages=2:splitk=1:raster=8"
    with pytest.raises(ValueError, match="needs field 'tm'"):
        _helios.format_variant({"path": "coop"})
    with pytest.raises(ValueError, match="threads=256 is not part of a 'coop' variant"):
        _helios.format_variant(_helios.variant_fields(v) | {"threads": 256})
    with pytest.raises(ValueError, match="load='fast'"):
        _helios.format_variant(_helios.variant_fields(v) | {"load": "fast"})
    with pytest.raises(ValueError, match="unknown variant field 'tiles'"):
        _helios.format_variant(_helios.variant_fields(v) | {"tiles": 2})
    with pytest.raises(ValueError, match="path 'coop3'"):
        _helios.format_variant({"path": "coop3"})
    with pytest.raises(TypeError, match="int or a str"):
        _helios.format_variant(_helios.variant_fields(v) | {"stages": 2.0})
    with pytest.raises(TypeError, match="dict"):
        _helios.format_variant("coop")


def test_fields_a_path_fixes_are_reported():
    f = _helios.variant_fields("coop2:tile128x128x32:wg256:acc=f32:raster=8")
    assert (f["stages"], f["splitk"], f["threads"]) == (1, 1, 256)
    assert _helios.variant_fields("scalar:tile64x64x16:acc=f32")["raster"] == 1


def test_range_rules_come_from_the_table(device):
    default = _helios.variant_fields(device.default_variant())
    if default["path"] != "coop":
        pytest.skip(
            f"the range rules are checked after the coop path's device rules; this device runs {default['path']}"
        )
    with pytest.raises(helios.UnsupportedError, match="stages must be 1..2"):
        device.check_variant(_helios.format_variant(default | {"stages": 3}))
    with pytest.raises(helios.UnsupportedError, match="splitk must be 1..16"):
        device.check_variant(_helios.format_variant(default | {"splitk": 17}))


def test_attention_variant_fields_are_the_parsed_variant():
    f = _helios.attention_variant_fields("fa-coop:16x8x16:sg4:wq2:bc32")
    assert f == {"path": "fa-coop", "tm": 16, "tn": 8, "tk": 16, "bc": 32, "nsg": 4, "wq": 2, "dq_bc": 0}
    # the backward's dQ key tile: a trailing item, left out of the canonical string when 0
    g = _helios.attention_variant_fields("fa-coop:16x16x16:sg8:wq1:bc32:dq64")
    assert g == {"path": "fa-coop", "tm": 16, "tn": 16, "tk": 16, "bc": 32, "nsg": 8, "wq": 1, "dq_bc": 64}
    for bad in ("fa-coop:16x16x16:sg8:wq1:bc32:dq0", "fa-coop:16x16x16:sg8:wq1:bc32:dq64:dq64"):
        with pytest.raises(ValueError, match="malformed attention variant"):
            _helios.attention_variant_fields(bad)
    assert _helios.attention_variant_fields("fa-scalar")["path"] == "fa-scalar"
    with pytest.raises(ValueError, match="malformed attention variant"):
        _helios.attention_variant_fields("coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2")


def test_each_shader_folder_says_what_its_files_are():
    """shaders/ by family (uVkCompute's way): a folder a family, a short README naming
    each of its files; no shader left at the top, where the tables are."""
    top = ROOT / "shaders"
    assert not [p.name for p in top.glob("*.comp")] + [p.name for p in top.glob("*.glsl")]
    folders = sorted({p.parent for p in top.rglob("*") if p.suffix in (".comp", ".glsl")})
    assert len(folders) >= 8
    for folder in folders:
        readme = folder / "README.md"
        assert readme.exists(), f"{folder.name}/ has no README.md"
        text = readme.read_text()
        missing = [p.name for p in folder.iterdir() if p.suffix in (".comp", ".glsl") and p.stem not in text]
        assert not missing, f"{folder.name}/README.md does not name {missing}"
    listed = (top / "README.md").read_text()
    assert all(f"`{f.name}/`" in listed for f in folders), "shaders/README.md's table misses a folder"
