"""The plan operations are declared once (shaders/ops.py) and generated into the core's
structs, kinds and argument schema (cmake/gen_ops.py): the binding parses every op by
that schema, Python sees it as _helios.PLAN_OPS, and helios.Plan's dicts carry exactly
its arguments."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import load_module

from helios import _helios

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def table() -> Any:
    return load_module("helios_ops_t", ROOT / "shaders" / "ops.py")


def recorded_ops(dev: Any) -> dict[str, dict]:
    """One op dict of each kind as helios.Plan records it (not compiled)."""
    f32 = np.float32
    p = dev.plan(params=2)
    x = dev.upload(np.ones((1, 16), f32), dtype=f32)
    g, b = dev.upload(np.ones(16, f32), dtype=f32), dev.upload(np.zeros(16, f32), dtype=f32)
    h, _ = p.layernorm(x, g, b, dtype="float16")
    p.rmsnorm(x, g, dtype="float16")
    p.matmul(h, dev.upload(np.ones((16, 8), f32)))
    p.embed(dev.upload(np.ones((5, 16), f32), dtype=f32), dev.upload(np.ones((4, 16), f32), dtype=f32))
    qkv = dev.upload(np.ones((1, 48), f32))
    p.attention_decode(qkv, dev.empty((4, 16), qkv.dtype), dev.empty((4, 16), qkv.dtype), heads=2)
    p.rope(qkv, dev.upload(np.ones((4, 8), f32), dtype=f32), heads=2)
    p.swiglu(qkv)
    w = dev.upload(np.ones(8, f32), dtype=f32)
    p.adamw(w, dev.upload(np.zeros(8, f32), dtype=f32), dev.upload(np.zeros(8, f32), dtype=f32),
            dev.upload(np.zeros(8, f32), dtype=f32), step=0, lr=1)  # fmt: skip
    p.top1(dev.upload(np.ones((1, 8), f32), dtype=f32))
    return {op["kind"]: op for op in p._ops if "kind" in op}


def test_the_binding_sees_the_table(table):
    want = {o.name: tuple((a.name, a.type, a.optional) for a in o.args) for o in table.PLAN_OPS}
    assert _helios.PLAN_OPS == want
    assert [o.name for o in table.PLAN_OPS if o.product] == ["matmul"]


def test_every_plan_method_records_exactly_its_ops_arguments(device):
    ops = recorded_ops(device)
    assert set(ops) == set(_helios.PLAN_OPS) - {"matmul"}
    for kind, op in ops.items():
        assert set(op) - {"kind"} == {key for key, _, _ in _helios.PLAN_OPS[kind]}, kind


def test_a_dict_the_plan_method_did_not_make_is_refused_naming_the_argument(device):
    """For every op and every argument it needs, by the table: left out, a TypeError
    naming it; and the dict as recorded compiles."""
    ops = recorded_ops(device)
    for kind, op in ops.items():
        device._plan([op], 2).close()
        for key, _, optional in _helios.PLAN_OPS[kind]:
            if optional:
                continue
            bad = {k: v for k, v in op.items() if k != key}
            with pytest.raises(TypeError, match=rf"\b{key}\b"):
                device._plan([bad], 2)
    names = list(_helios.PLAN_OPS)
    with pytest.raises(ValueError, match=f"expected {', '.join(names[:-1])} or {names[-1]}"):
        device._plan([{"kind": "groupnorm"}], 2)


def test_plan_refuses_to_record_what_the_table_does_not_declare(device):
    p = device.plan(params=1)
    with pytest.raises(TypeError, match=r"plan.top1: the op table \(_helios.PLAN_OPS\) has no \['extra'\]"):
        p._add("top1", "top1", x=None, n=1, slot=0, extra=1)
    with pytest.raises(TypeError, match=r"needs \['slot'\]"):
        p._add("top1", "top1", x=None, n=1)


def test_the_generator_refuses_a_table_it_could_not_honour(table):
    gen = load_module("gen_ops_t", ROOT / "cmake" / "gen_ops.py")
    gen.check_ops(table)
    embed = next(o for o in table.PLAN_OPS if o.name == "embed")
    bad_tables = {
        "two operations share a kind": (dataclasses.replace(embed, name="embed2", member="e2", step="s2"),),
        "argument d is optional but not a tensor": (
            dataclasses.replace(embed, args=tuple(dataclasses.replace(a, optional=a.name == "d") for a in embed.args)),
        ),
        "an argument is named twice": (dataclasses.replace(embed, args=embed.args + embed.args[:1]),),
    }
    for says, change in bad_tables.items():
        ops = tuple(o for o in table.PLAN_OPS if o.name != "embed" or says == "two operations share a kind") + change
        with pytest.raises(SystemExit, match=says):
            gen.check_ops(type("T", (), {"PLAN_OPS": ops}))
