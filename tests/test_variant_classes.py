"""The rule that picks which variants the default run covers (tests/variant_classes.py):
every field and permutation axis of the kernel table is placed, every structural class
is covered by its cheapest member, and the full run takes everything."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import variant_classes as vc
from helpers import attention_test_variants, device_variants

import helios

ROOT = Path(__file__).resolve().parent.parent


def _families():
    """shaders/families.py, loaded as the build loads it (cmake/gen_kernels.py)."""
    spec = importlib.util.spec_from_file_location("gen_kernels_for_classes", ROOT / "cmake" / "gen_kernels.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen.load_table(ROOT / "shaders")


def _python_keys(struct) -> set[str]:
    return {f[3] if len(f) > 3 else f[0] for f in struct.fields}


def test_every_variant_field_is_placed():
    """A new field of a variant struct fails here until variant_classes.py says whether it
    is structure (and how it classes variants) or not, and why."""
    fam = _families()
    for struct, table in ((fam.MATMUL_VARIANT, vc.MATMUL_FIELDS), (fam.ATTENTION_VARIANT, vc.ATTENTION_FIELDS)):
        missing = _python_keys(struct) - set(table)
        assert not missing, f"{struct.c_name}: fields {sorted(missing)} are not placed in tests/variant_classes.py"
        for name, (_, why) in table.items():
            assert why.strip(), f"{name}: say why it is or is not structure"


def test_every_permutation_axis_is_covered():
    """A new permutation axis of a family (families.py `axes`) fails here until the
    default run says how it covers it."""
    fam = _families()
    axes = {a[0] for f in fam.FAMILIES for a in f.axes}
    missing = axes - set(vc.PERMUTATION_AXES)
    assert not missing, f"permutation axes {sorted(missing)} have no covering test named in variant_classes.py"


def test_a_planted_field_is_caught(monkeypatch):
    """The check above can fail: a field the table does not know."""
    fam = _families()
    planted = fam.MATMUL_VARIANT.fields + (("swizzle", "uint32_t", "a new knob"),)
    assert "swizzle" in _python_keys(type("S", (), {"fields": planted})) - set(vc.MATMUL_FIELDS)


LISTED = [
    "coop:8x8x8:tile16x32x32:sg1x2:acc=f32:load=shared:stages=1:splitk=1:raster=8",
    "coop:8x8x8:tile32x32x32:sg2x2:acc=f32:load=shared:stages=1:splitk=1:raster=8",
    "coop:8x8x8:tile64x64x32:sg4x4:acc=f32:load=shared:stages=1:splitk=1:raster=8",
    "coop:8x8x8:tile48x64x32:sg3x4:acc=f32:load=shared:stages=1:splitk=1:raster=8",
    "coop:8x8x8:tile64x64x32:sg4x4:acc=f32:load=shared:stages=2:splitk=1:raster=8",
    "coop:8x8x8:tile64x64x32:sg4x4:acc=f32:load=direct:stages=2:splitk=1:raster=8",
    "scalar:tile64x64x16:acc=f32",
]


def test_cheapest_member_per_class_and_every_small_one(monkeypatch):
    monkeypatch.delenv("HELIOS_TEST_FULL", raising=False)
    got = vc.matmul_variants(LISTED)
    # sg4x4 stages=1 shares its class with sg2x2 stages=1: the 4-fragment one covers it
    assert LISTED[2] not in got and LISTED[1] in got
    # a non-power-of-two tile is the same code with other constants: not a class of its own
    assert LISTED[3] not in got
    # classes with only large members (stages=2, direct loads) still run, once each
    assert LISTED[4] in got and LISTED[5] in got
    assert LISTED[0] in got and LISTED[6] in got  # small, and the scalar path
    classes = vc.matmul_classes(LISTED)
    assert set(classes.values()) <= set(got) and len(classes) == 5


def test_full_run_takes_every_variant(monkeypatch):
    monkeypatch.setenv("HELIOS_TEST_FULL", "1")
    assert vc.matmul_variants(LISTED) == LISTED
    att = ["fa-coop:8x8x8:sg8:wq4:bc64", "fa-scalar"]
    assert vc.attention_variants(att) == att


def test_attention_rule(monkeypatch):
    monkeypatch.delenv("HELIOS_TEST_FULL", raising=False)
    att = ["fa-coop:8x8x8:sg4:wq1:bc32", "fa-coop:8x8x8:sg8:wq4:bc64", "fa-coop:8x8x8:sg4:wq1:bc32:dq64", "fa-scalar"]
    got = vc.attention_variants(att)
    assert got == ["fa-coop:8x8x8:sg4:wq1:bc32", "fa-coop:8x8x8:sg4:wq1:bc32:dq64", "fa-scalar"]


def test_the_device_lists_are_covered(device):
    """On this device: every structural class among its variants is in what the
    per-variant tests run (the wiring of conftest's device_variants)."""
    run = set(device_variants())
    assert set(vc.matmul_classes(device.variants()).values()) <= run
    if helios.variant_fields(device.default_variant())["path"] == "coop":
        assert any(v.startswith("coop:") for v in run)
    for d, backward in ((16, False), (16, True)):
        assert attention_test_variants(d, backward) or not device.attention_variants(d, backward=backward)


def test_the_run_says_what_it_covers(pytestconfig):
    header = sys.modules["conftest"].pytest_report_header(pytestconfig)
    assert "structural class" in header[0] or "every variant" in header[0]


@pytest.mark.every_variant
def test_marker_registered(pytestconfig):
    assert any(m.startswith("every_variant:") for m in pytestconfig.getini("markers"))
