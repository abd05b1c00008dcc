"""The host/shader contracts are declared once (shaders/layouts.py) and generated into
C and GLSL (cmake/gen_layouts.py): every kernel the build embeds is read back from its
SPIR-V and its push block held to the table, word by word."""

from __future__ import annotations

import dataclasses
import re
import struct
from pathlib import Path
from typing import Any, Optional

import pytest
from helpers import load_module

from helios import _helios

ROOT = Path(__file__).resolve().parent.parent
SHADERS = ROOT / "shaders"

# SPIR-V opcodes and enums the reader needs (the SPIR-V specification, 3.x)
OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_STRUCT, OP_TYPE_POINTER = 21, 22, 30, 32
OP_VARIABLE, OP_MEMBER_DECORATE = 59, 72
STORAGE_PUSH_CONSTANT, DECORATION_OFFSET = 9, 35


@pytest.fixture(scope="module")
def tables() -> tuple[Any, Any]:
    """(shaders/families.py, shaders/layouts.py) as modules."""
    families = load_module("helios_families_t", SHADERS / "families.py")
    layouts = load_module("helios_layouts_t", SHADERS / "layouts.py")
    return families, layouts


def push_block(spirv: bytes) -> Optional[list[tuple[str, int]]]:
    """The push-constant block of a SPIR-V module as (type, byte offset) per member,
    type one of uint, int, float; None where the module declares none."""
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv)
    assert words[0] == 0x07230203, "not SPIR-V"
    types: dict[int, str] = {}
    structs: dict[int, list[int]] = {}
    pointers: dict[int, tuple[int, int]] = {}
    offsets: dict[tuple[int, int], int] = {}
    block = None
    i = 5
    while i < len(words):
        count, op = words[i] >> 16, words[i] & 0xFFFF
        args = words[i + 1 : i + count]
        if op == OP_TYPE_INT and args[1] == 32:
            types[args[0]] = "int" if args[2] else "uint"
        elif op == OP_TYPE_FLOAT and args[1] == 32:
            types[args[0]] = "float"
        elif op == OP_TYPE_STRUCT:
            structs[args[0]] = list(args[1:])
        elif op == OP_TYPE_POINTER:
            pointers[args[0]] = (args[1], args[2])
        elif op == OP_MEMBER_DECORATE and args[2] == DECORATION_OFFSET:
            offsets[(args[0], args[1])] = args[3]
        elif op == OP_VARIABLE and args[2] == STORAGE_PUSH_CONSTANT:
            block = pointers[args[0]][1]
        i += count
    if block is None:
        return None
    return [(types.get(t, f"id{t}"), offsets[(block, m)]) for m, t in enumerate(structs[block])]


def family_of(kernel: str, names: list[str]) -> str:
    """The family a permutation belongs to: the longest family name it starts with."""
    return max((n for n in names if kernel == n or kernel.startswith(n + "_")), key=len)


def expected_block(layouts: Any, block: str, source: str) -> list[tuple[str, int]]:
    """The table's words for `block` as a shader of `source` compiles them: a word
    under `only` where the source defines it."""
    push = next(p for p in layouts.PUSH_LAYOUTS if p.name == block)
    text = (SHADERS / source).read_text()
    words = [w for w in push.words if w.only is None or re.search(rf"^#define {w.only}\b", text, re.M)]
    return [(w.type, 4 * i) for i, w in enumerate(words)]


def mismatches(tables: tuple[Any, Any], kernels: dict[str, Optional[bytes]]) -> dict[str, str]:
    families, layouts = tables
    names = [f.name for f in families.FAMILIES]
    sources = {f.name: f.source for f in families.FAMILIES}
    bad = {}
    for kernel, spirv in kernels.items():
        if spirv is None:  # not built here (a compiler feature the build's glslc lacks)
            continue
        fam = family_of(kernel, names)
        got = push_block(spirv)
        block = layouts.FAMILY_PUSH.get(fam)
        want = expected_block(layouts, block, sources[fam]) if block else None
        if got != want:
            bad[kernel] = f"push block {got}, table ({block}) {want}"
    return bad


def test_every_kernels_push_block_is_the_tables(tables):
    kernels = _helios.testing.kernels()
    built = {k for k, v in kernels.items() if v is not None}
    assert len(built) >= 40, sorted(built)  # every family has a permutation in any build
    assert not mismatches(tables, kernels)
    pushes = {family_of(k, [f.name for f in tables[0].FAMILIES]) for k in built}
    assert pushes >= set(tables[1].FAMILY_PUSH), "a family the table names has no kernel to check"


class Table:
    """A stand-in for layouts.py with some entries replaced."""

    def __init__(self, base: Any, **entries: Any) -> None:
        for k in ("PUSH_LAYOUTS", "FAMILY_PUSH", "PERSIST_ROW", "CONSTS"):
            setattr(self, k, entries.get(k, getattr(base, k)))


def with_block(layouts: Any, name: str, **fields: Any) -> tuple:
    return tuple(dataclasses.replace(p, **fields) if p.name == name else p for p in layouts.PUSH_LAYOUTS)


def test_a_shader_that_leaves_the_table_is_named(tables):
    """It must be able to fail: the same kernels against a table with a word's type
    changed, one word fewer, and a family given another block."""
    families, layouts = tables
    kernels = _helios.testing.kernels()
    words = next(p for p in layouts.PUSH_LAYOUTS if p.name == "matmul").words
    as_float = (dataclasses.replace(words[0], type="float"),) + words[1:]  # M as a float
    no_beta = words[:-2] + words[-1:]
    changed = [
        mismatches((families, Table(layouts, PUSH_LAYOUTS=with_block(layouts, "matmul", words=w))), kernels)
        for w in (as_float, no_beta)
    ]
    moved = Table(layouts, FAMILY_PUSH={**layouts.FAMILY_PUSH, "layernorm": "activation"})
    changed.append(mismatches((families, moved), kernels))
    assert all(changed), changed
    assert all(k.startswith("matmul") for k in changed[0]) and any(k.startswith("matmul_gemv_ln") for k in changed[1])
    assert set(changed[2]) == {k for k, v in kernels.items() if v is not None and k.startswith("layernorm")}


def test_shaders_declare_no_push_block_of_their_own():
    """Every block comes from a generated push_<block>.glsl."""
    own = [p.name for p in SHADERS.iterdir() if p.suffix in (".comp", ".glsl") and "push_constant" in p.read_text()]
    assert not own, own


def test_the_generator_refuses_a_view_that_reads_a_word_as_another_type(tables):
    gen = load_module("gen_layouts_t", ROOT / "cmake" / "gen_layouts.py")
    families, layouts = tables
    names = {f.name for f in families.FAMILIES}
    decode = next(p for p in layouts.PUSH_LAYOUTS if p.name == "decode")
    view = decode.views[1]
    scale_as_uint = dataclasses.replace(view, words=view.words[:5] + (dataclasses.replace(view.words[5], type="uint"),))
    bad = Table(layouts, PUSH_LAYOUTS=with_block(layouts, "decode", views=(scale_as_uint,)))
    with pytest.raises(SystemExit, match=r"push decode view attention: word 5 \(scale, uint\) does not match"):
        gen.check_layouts(bad, names)
    with pytest.raises(SystemExit, match="FAMILY_PUSH gives layernorm the block 'norm'"):
        gen.check_layouts(Table(layouts, FAMILY_PUSH={**layouts.FAMILY_PUSH, "layernorm": "norm"}), names)
    gen.check_layouts(layouts, names)  # the real table passes
