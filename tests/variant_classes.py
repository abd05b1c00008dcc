"""Which variants the default test run exercises: each structure once, plus every small one.

A CPU Vulkan driver (lavapipe) compiles a pipeline in 1-150 s, growing with the
fragments a subgroup holds (measured on the 2-core dev machine, caches off: 2
fragments 2.3 s, 4 fragments 4 s, 12 fragments 14.7 s, 16 fragments 39-147 s).
Running every listed variant made a cold `make test` 46-90 minutes. The default run
instead covers every *structural class* once — a class is a combination of the
variant fields that select different code in a shader (the table below says why
each field is or is not structure) — with its cheapest member, and also runs every
variant whose pipeline is small. `make test-full` (`pytest --full`, or
HELIOS_TEST_FULL=1) runs every variant the device lists; on a GPU, where a compile
takes well under a second, it is the run to make.

`tests/test_variant_classes.py` fails when a variant field or a permutation axis
of the kernel table (shaders/families.py) appears that this table does not place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import helios

# ---- matmul variants -------------------------------------------------------------
# field -> (its class value, or None for "not structure", and why).
Fields = dict[str, Any]
MATMUL_FIELDS: dict[str, tuple[Callable[[Fields], Any] | None, str]] = {
    "path": (lambda f: f["path"], "scalar, coop, coop2 and gemv are different shaders"),
    "tm": (lambda f: (f["tm"], f["tn"], f["tk"]), "the coop shape is the cooperative-matrix type itself"),
    "tn": (lambda f: (f["tm"], f["tn"], f["tk"]), "part of the coop shape"),
    "tk": (lambda f: (f["tm"], f["tn"], f["tk"]), "part of the coop shape"),
    "sg_m": (
        lambda f: (f["sg_m"] > 1, f["sg_n"] > 1),
        "subgroup tiling: fragments along M only, N only or both take different index paths; "
        "the counts themselves are loop bounds (specialization constants)",
    ),
    "sg_n": (lambda f: (f["sg_m"] > 1, f["sg_n"] > 1), "part of the subgroup tiling"),
    "bm": (
        None,
        "tile sizes, powers of two or not, are constants of the same code: a tile's edge "
        "that does not align is the tail path every test's odd shapes take",
    ),
    "bn": (None, "as bm"),
    "bk": (None, "the slab depth: a constant (loop bound) of the same code"),
    "acc": (lambda f: f["acc"], "the accumulator type selects a different permutation (ACC_F16)"),
    "load": (lambda f: f["load"], "load=direct skips the shared-memory staging: other code"),
    "stages": (lambda f: f["stages"], "one or two shared buffers: other code"),
    "splitk": (lambda f: f["splitk"] > 1, "split-K adds the partial-product pass and the reduce kernel"),
    "raster": (None, "the workgroup order: index arithmetic of the same code"),
    "threads": (None, "coop2's and gemv's workgroup size: a constant"),
    "store": (lambda f: f["store"], "store=direct writes fragments straight to memory: other code"),
}

# ---- attention variants ----------------------------------------------------------
ATTENTION_FIELDS: dict[str, tuple[Callable[[Fields], Any] | None, str]] = {
    "path": (lambda f: f["path"], "fa-coop and fa-scalar are different shaders"),
    "tm": (lambda f: (f["tm"], f["tn"], f["tk"]), "the coop shape"),
    "tn": (lambda f: (f["tm"], f["tn"], f["tk"]), "part of the coop shape"),
    "tk": (lambda f: (f["tm"], f["tn"], f["tk"]), "part of the coop shape"),
    "nsg": (None, "subgroups per workgroup: a constant"),
    "wq": (None, "row tiles per subgroup: a loop bound"),
    "bc": (None, "keys per tile: a loop bound"),
    "dq_bc": (lambda f: f["dq_bc"] > 0, "the backward's dQ kernel with its own key tile: other code"),
}

# Permutation axes of the kernel table (families.py `axes`): how the default run covers each.
PERMUTATION_AXES: dict[str, str] = {
    "acc": "a variant field (acc), a class above",
    "out": "every per-variant matmul test runs float32 and float16 outputs; bfloat16 in test_bf16.py",
    "in": "float16 in every class; bfloat16 inputs in test_bf16.py (coop where the device offers it)",
    "p_regs": "the attention forward and backward default variants where the device converts in registers "
    "(test_attention.py, test_attention_backward.py kill-switch tests)",
    "trace": "0 in every persistent run; 1 (HELIOS_PLAN_TRACE=1) in test_plan_persist.py's traced run and "
    "test_probes.py's trace probe, float16 and bfloat16",
}

# "Small": its pipelines compile in a few seconds on lavapipe. Each variant a per-variant
# test runs is several pipelines there (output types, op forms, causal or not, a test each),
# so the bound is what keeps a cold `make test` within 20 minutes with the root built:
# at 4 fragments (23 of 27 matmul variants, 13 forward and 9 backward attention ones at
# d=16) the whole cold run took 21 minutes on 2 cores (2026-11-28).
MATMUL_SMALL_FRAGMENTS = 2  # fragments a subgroup holds (sg_m * sg_n): 2 took 2.3 s
ATTENTION_SMALL_ROWS_X_KEYS = 32  # wq * bc (row tiles x keys per tile): 64 took <= 2 s at d=16


def _matmul_cost(f: Fields) -> int:
    if f["path"] != "coop":
        return 1
    return int(f["sg_m"] * f["sg_n"]) * int(f["splitk"])


def _attention_cost(f: Fields) -> int:
    if f["path"] != "fa-coop":
        return 1
    return int(f["wq"] * f["bc"])


def _attention_fields(v: str) -> Fields:
    if v == "fa-scalar":
        return {"path": "fa-scalar"}
    f = dict(helios._helios.attention_variant_fields(v))
    f["path"] = "fa-coop"
    f.setdefault("dq_bc", 0)
    return f


def _class_key(f: Fields, table: dict[str, tuple[Callable[[Fields], Any] | None, str]]) -> tuple:
    key = []
    for name, (cls, _) in table.items():
        if cls is not None and name in f:
            key.append((name, cls(f)))
    return tuple(key)


def _select(variants: Iterable[str], fields: Callable[[str], Fields], table, cost, small: int) -> list[str]:
    chosen: dict[tuple, tuple[int, str]] = {}
    keep: list[str] = []
    for v in variants:
        f = fields(v)
        c = cost(f)
        key = _class_key(f, table)
        if key not in chosen or c < chosen[key][0]:
            chosen[key] = (c, v)
        if c <= small:
            keep.append(v)
    reps = {v for _, v in chosen.values()}
    return [v for v in dict.fromkeys([*keep, *reps])]


def full_run() -> bool:
    import os

    return os.environ.get("HELIOS_TEST_FULL") == "1"


def matmul_variants(variants: list[str]) -> list[str]:
    """The matmul variants a test over 'every variant' runs: all of them in a full run,
    else one per structural class (the cheapest) and every small one, in listed order."""
    if full_run():
        return list(variants)
    picked = set(_select(variants, helios.variant_fields, MATMUL_FIELDS, _matmul_cost, MATMUL_SMALL_FRAGMENTS))
    return [v for v in variants if v in picked]


def attention_variants(variants: list[str]) -> list[str]:
    """As matmul_variants, for attention (forward or backward) variants."""
    if full_run():
        return list(variants)
    picked = set(_select(variants, _attention_fields, ATTENTION_FIELDS, _attention_cost, ATTENTION_SMALL_ROWS_X_KEYS))
    return [v for v in variants if v in picked]


def matmul_classes(variants: list[str]) -> dict[tuple, str]:
    """Each structural class among `variants` -> the variant that covers it (for the docs and tests)."""
    out: dict[tuple, tuple[int, str]] = {}
    for v in variants:
        f = helios.variant_fields(v)
        key, c = _class_key(f, MATMUL_FIELDS), _matmul_cost(f)
        if key not in out or c < out[key][0]:
            out[key] = (c, v)
    return {k: v for k, (_, v) in out.items()}
