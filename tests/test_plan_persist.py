"""A plan's persistent runs (plan_persist.c, matmul_gemv_persist.comp): consecutive
one-row products and decode attentions in one dispatch, a grid barrier between them. On lavapipe a run's
workgroups are threads: HELIOS_PLAN_PERSISTENT_GRID sets how many (the default there
is none, the device reporting no SMs). Each run must give what the products give apart
(HELIOS_DISABLE_PLAN_PERSISTENT=1) bit for bit, since its members compute each column as
the matrix-vector kernel does."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import helios


def _rand(shape, seed, dtype=np.float16):
    return (np.random.default_rng(seed).standard_normal(shape) * 0.5).astype(dtype)


def _uploads(dev, dtype: str):
    """The element type, and uploads of a weight (n x k, scaled by 1/sqrt(k)) and an fp32 vector."""
    dt = helios.bfloat16 if dtype == "bfloat16" else np.float16

    def w(n, k, s):
        return dev.upload(_rand((n, k), s, dt) * (1.0 / np.sqrt(k)), dtype=dtype)

    def vec(n, s):
        return dev.upload(_rand(n, s, np.float32), dtype="float32")

    return dt, w, vec


def _layer(dev, dtype: str, d: int, seed: int, replays: int = 2, plan_out=None):
    """A decode layer's products between two attentions: the projection, the norm and
    the up product (gelu), the down product, the next norm and QKV. Replayed with fresh
    inputs; returns each replay's outputs as bits, and the plan's counts (the plan
    appended to plan_out where given)."""
    dt, w, vec = _uploads(dev, dtype)
    bits = np.uint16
    a = dev.upload(_rand((1, d), seed, dt), dtype=dtype)
    x = dev.upload(_rand((1, d), seed + 1, np.float32), dtype="float32")
    with dev.plan() as p:
        proj = p.matmul(a, w(d, d, seed + 2), trans_b=True, bias=vec(d, seed + 3))
        h, x2 = p.layernorm(x, vec(d, seed + 4), vec(d, seed + 5), residual=proj, dtype=dtype)
        up = p.matmul(h, w(4 * d, d, seed + 6), trans_b=True, bias=vec(4 * d, seed + 7), activation="gelu")
        down = p.matmul(up, w(d, 4 * d, seed + 8), trans_b=True, bias=vec(d, seed + 9))
        h2, x3 = p.layernorm(x2, vec(d, seed + 10), vec(d, seed + 11), residual=down, dtype=dtype)
        qkv = p.matmul(h2, w(3 * d, d, seed + 12), trans_b=True, bias=vec(3 * d, seed + 13))
    if plan_out is not None:
        plan_out.append(p)
    outs = []
    for i in range(replays):
        a.copy_(_rand((1, d), seed + 20 + i, dt))
        x.copy_(_rand((1, d), seed + 30 + i, np.float32))
        p.replay()
        outs.append([t.numpy().view(np.uint32 if t.dtype == "float32" else bits).copy()
                     for t in (proj, h, x2, up, down, h2, x3, qkv)])  # fmt: skip
    return outs, (*p.counts, p.grid_barriers)


def _device_with(monkeypatch, **env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return helios.Device()


@pytest.fixture(scope="module")
def apart_device():
    """A Device whose plans run each product in its own dispatch (the switch is read
    when the Device opens, and unset again for the tests' own devices)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HELIOS_DISABLE_PLAN_PERSISTENT", "1")
        dev = helios.Device()
    with dev:
        yield dev


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("grid,d", [(1, 64), (2, 64), (2, 512), (2, 136)])
def test_a_persistent_run_is_the_products_apart_bit_for_bit(apart_device, monkeypatch, dtype, grid, d):
    """Four products and their two norms as one dispatch: every output of two replays
    equals the products' apart bit for bit, grids of one and two workgroups stepping over
    the columns (d=512: K of 2048 in the down product, the first weight words in flight
    across each barrier; d=136: rows of 17 words), with three dispatches and three
    barriers fewer. lavapipe runs a workgroup a thread, so a grid needs as many cores."""
    if grid > (os.cpu_count() or 1):
        pytest.skip(f"a grid of {grid} needs {grid} lavapipe threads; this machine has {os.cpu_count()} cores")
    apart, counts_apart = _layer(apart_device, dtype, d, 70)
    with _device_with(monkeypatch, HELIOS_PLAN_PERSISTENT_GRID=str(grid)) as dev:
        run, counts_run = _layer(dev, dtype, d, 70)
    names = ("proj", "h", "stream", "up", "down", "h2", "stream2", "qkv")
    for i, (ra, rr) in enumerate(zip(apart, run)):
        for name, ta, tr in zip(names, ra, rr):
            np.testing.assert_array_equal(tr, ta, err_msg=f"replay {i}: {name}")
    ops_a, disp_a, bar_a, grid_a = counts_apart
    ops_r, disp_r, bar_r, grid_r = counts_run
    assert ops_a == ops_r == 6 and (disp_a, disp_r) == (4, 1) and bar_r == bar_a - 3, (counts_apart, counts_run)
    assert (grid_a, grid_r) == (0, 3), (counts_apart, counts_run)  # the run's four members wait three times


def _attention_layer(dev, dtype: str, heads: int, hd: int, positions, kv_heads: int = 0, plan_out=None):
    """QKV, the attention over a cache of 3 splits and 5 rows and the projection, replayed
    at `positions` with fresh inputs: the outputs and caches (bits) after each, the
    plan's counts and the dispatches each replay ran (kv_heads: heads by default; the
    plan appended to plan_out where given)."""
    dt = helios.bfloat16 if dtype == "bfloat16" else np.float16
    kv = kv_heads or heads
    d, rows = heads * hd, 3 * 64 + 5
    kc = dev.upload(_rand((rows, kv * hd), 1, dt), dtype=dtype)
    vc = dev.upload(_rand((rows, kv * hd), 2, dt), dtype=dtype)
    a = dev.upload(_rand((1, d), 3, dt), dtype=dtype)
    wq = dev.upload(_rand((d + 2 * kv * hd, d), 4, dt) * 0.1, dtype=dtype)
    wo = dev.upload(_rand((d, d), 5, dt) * 0.1, dtype=dtype)
    with dev.plan(params=2) as p:
        qkv = p.matmul(a, wq, trans_b=True)
        att = p.attention_decode(qkv, kc, vc, heads=heads, kv_heads=kv, position=1)
        out = p.matmul(att, wo, trans_b=True)
    if plan_out is not None:
        plan_out.append(p)
    got, dispatches = [], []
    for i, pos in enumerate(positions):
        a.copy_(_rand((1, d), 10 + i, dt))
        before = dev.telemetry()["dispatches"]
        p.replay(params={1: pos})
        dispatches.append(dev.telemetry()["dispatches"] - before)
        got.append([t.numpy().view(np.uint16).copy() for t in (qkv, att, out, kc, vc)])
    return got, p.counts, dispatches


@pytest.mark.parametrize("dtype,heads,hd", [("float16", 3, 32), ("bfloat16", 2, 64), ("float16", 1, 128)])
def test_an_attention_in_a_run_is_the_attention_apart_bit_for_bit(monkeypatch, dtype, heads, hd):
    """A product, the decode attention and a product as one run: over positions in the
    first, second and last split, and again at one (the arrival counts zeroed before each
    replay), the outputs and both caches equal the ops' apart bit for bit. Both devices
    size the attention's splits for the same grid."""
    positions = [3 * 64 + 4, 0, 64, 2 * 64 + 1, 2 * 64 + 1, 3 * 64 + 4]
    grid = min(2, os.cpu_count() or 1)
    monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", str(grid))
    with _device_with(monkeypatch, HELIOS_DISABLE_PLAN_PERSISTENT="1") as dev:
        apart, counts_apart, _ = _attention_layer(dev, dtype, heads, hd, positions)
    monkeypatch.delenv("HELIOS_DISABLE_PLAN_PERSISTENT")
    with helios.Device() as dev:
        run, counts_run, _ = _attention_layer(dev, dtype, heads, hd, positions)
    for i, (ra, rr) in enumerate(zip(apart, run)):
        for name, ta, tr in zip(("qkv", "attention", "projection", "k cache", "v cache"), ra, rr):
            np.testing.assert_array_equal(tr, ta, err_msg=f"replay {i} at {positions[i]}: {name}")
    assert (counts_apart[1], counts_run[1]) == (3, 1), (counts_apart, counts_run)


@pytest.mark.parametrize("dtype,heads,kv_heads,hd", [("float16", 4, 2, 32), ("bfloat16", 3, 1, 64)])
def test_a_grouped_query_attention_in_a_run_is_the_attention_apart_bit_for_bit(monkeypatch, dtype, heads, kv_heads, hd):
    """QKV, a grouped-query attention (query heads sharing each KV head) and the
    projection as one run with a grid barrier before and after the attention: the ops'
    outputs and caches apart, bit for bit, at positions in the first and later splits."""
    positions = [3 * 64 + 4, 0, 64, 2 * 64 + 1, 3 * 64 + 4]
    monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", str(min(2, os.cpu_count() or 1)))
    with _device_with(monkeypatch, HELIOS_DISABLE_PLAN_PERSISTENT="1") as dev:
        apart, _, _ = _attention_layer(dev, dtype, heads, hd, positions, kv_heads)
    monkeypatch.delenv("HELIOS_DISABLE_PLAN_PERSISTENT")
    plans: list = []
    with helios.Device() as dev:
        run, counts, _ = _attention_layer(dev, dtype, heads, hd, positions, kv_heads, plans)
        assert (counts[1], plans[0].grid_barriers) == (1, 2), (counts, plans[0].grid_barriers)
    for i, (ra, rr) in enumerate(zip(apart, run)):
        for name, ta, tr in zip(("qkv", "attention", "projection", "k cache", "v cache"), ra, rr):
            np.testing.assert_array_equal(tr, ta, err_msg=f"replay {i}: {name}")


def test_a_traced_run_stamps_each_member_and_no_workgroup_passes_a_barrier_early(apart_device, monkeypatch):
    """HELIOS_PLAN_TRACE=1: the layer's four products as one traced run. The trace has
    each member's N and K, every workgroup's stamps in order (before its wait, past it,
    done), and no workgroup past a grid barrier before every workgroup was done with
    the member before: the barrier's promise, read from the device clock. The outputs
    equal the products' apart bit for bit; without the switch, plan.trace() says how to
    get one."""
    d = 64
    apart, _ = _layer(apart_device, "float16", d, 7)
    monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", str(min(2, os.cpu_count() or 1)))
    plans: list = []
    with _device_with(monkeypatch, HELIOS_PLAN_TRACE="1") as dev:
        run, _ = _layer(dev, "float16", d, 7, plan_out=plans)
        members = plans[0].trace()
        rows = helios.plan_trace.summarize(members)
    for i, (ra, rr) in enumerate(zip(apart, run)):
        for k, (ta, tr) in enumerate(zip(ra, rr)):
            np.testing.assert_array_equal(tr, ta, err_msg=f"replay {i}, output {k}")
    assert [(t.run, t.member, t.kind, t.n, t.k) for t in members] == [
        (0, m, "product", n, k) for m, (n, k) in enumerate([(d, d), (4 * d, d), (d, 4 * d), (3 * d, d)])
    ]
    for t in members:
        assert (t.before <= t.go).all() and (t.go <= t.done).all(), t
        # every workgroup has columns here (N >= 64 over its subgroups): A staged, then its first column
        assert (t.go <= t.inputs).all() and (t.inputs <= t.first).all() and (t.first <= t.done).all(), t
    for a, b in zip(members, members[1:]):
        assert b.go.min() >= a.done.max(), f"member {b.member} went {a.done.max() - b.go.min()} ns early"
    assert [r["kind"] for r in rows] == ["64x64", "256x64", "64x256", "192x64"]
    assert all(r["span_us"] >= 0 and r["release_us"] >= 0 for r in rows), rows
    with _device_with(monkeypatch, HELIOS_PLAN_TRACE="0") as dev:
        _layer(dev, "float16", d, 7, replays=1, plan_out=plans)
        with pytest.raises(ValueError, match="HELIOS_PLAN_TRACE=1"):
            plans[1].trace()


@pytest.mark.parametrize(
    "dtype,hd,positions", [("float16", 128, [63, 64, 130, 5, 191]), ("bfloat16", 64, [63, 64, 191, 5, 196])]
)
def test_an_attention_s_splits_grow_before_the_twin_takes_over(monkeypatch, dtype, hd, positions):
    """A grid of one workgroup and one head: the attention's splits hold 64 keys up to
    position 63, then the position's keys in one split (65 at 64), at most what 6 passes
    of the workgroup hold (decode_attention.glsl's att_split_keys): 96 keys at head
    dimension 128, 192 at 64. So at the last two positions its 2 splits are within two
    passes of the grid and a replay stays the run's one dispatch (3 splits of 64, or of
    96 at 64, would take the twin's three). Each replay equals the ops apart on a device
    whose splits are sized for the same grid, bit for bit."""
    monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", "1")
    with _device_with(monkeypatch, HELIOS_DISABLE_PLAN_PERSISTENT="1") as dev:
        apart, _, _ = _attention_layer(dev, dtype, 1, hd, positions)
    monkeypatch.delenv("HELIOS_DISABLE_PLAN_PERSISTENT")
    with helios.Device() as dev:
        run, _, dispatches = _attention_layer(dev, dtype, 1, hd, positions)
    assert dispatches == [1] * len(positions), dispatches
    for i, (ra, rr) in enumerate(zip(apart, run)):
        for name, ta, tr in zip(("qkv", "attention", "projection", "k cache", "v cache"), ra, rr):
            np.testing.assert_array_equal(tr, ta, err_msg=f"replay {i} at {positions[i]}: {name}")


def test_the_long_context_twin_carries_the_words_its_other_wrote(monkeypatch):
    """Past two passes of the grid over an attention's splits a replay takes the plan's
    twin (the attention a dispatch of its own): the token the top-1 wrote in one replay
    is the one the embedding reads in the next, whichever of the two ran each; every
    output and word equals the ops' apart."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("a grid of 2 needs 2 lavapipe threads; this machine has 1 core")
    heads, hd = 3, 32
    d = heads * hd
    rng = np.random.default_rng(3)
    tok = rng.standard_normal((50, d)).astype(np.float32)
    pos_t = rng.standard_normal((300, d)).astype(np.float32)

    def run(dev):
        T, P = dev.upload(tok, dtype="float32"), dev.upload(pos_t, dtype="float32")
        kc, vc = dev.upload(_rand((300, d), 1)), dev.upload(_rand((300, d), 2))
        a = dev.upload(_rand((1, d), 3))
        wq, wo, wl = (dev.upload(_rand((n, d), 70 + i) * 0.2) for i, n in enumerate((3 * d, d, 50)))
        with dev.plan(params=2) as p:
            x = p.embed(T, P, token=0, position=1)
            att = p.attention_decode(p.matmul(a, wq, trans_b=True), kc, vc, heads=heads, position=1)
            logits = p.matmul(p.matmul(att, wo, trans_b=True), wl, trans_b=True, out_dtype="float32")
            p.top1(logits, into=0)
        got = []
        p.set_params([7, 0])
        for position in (1, 260, 2, 261):  # runs, twin, runs, twin (grid 2, three heads: splits of 256)
            p.set_params({1: position})
            before = dev.telemetry()["dispatches"]
            p.replay()
            got.append((x.numpy().copy(), logits.numpy().copy(), p.params(), dev.telemetry()["dispatches"] - before))
        return got

    monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", "2")  # the splits' size, runs or not
    with _device_with(monkeypatch, HELIOS_DISABLE_PLAN_PERSISTENT="1") as dev:
        apart = run(dev)
    monkeypatch.delenv("HELIOS_DISABLE_PLAN_PERSISTENT")
    with helios.Device() as dev:
        runs = run(dev)
    for i, ((xa, la, wa, _), (xr, lr, wr, _)) in enumerate(zip(apart, runs)):
        np.testing.assert_array_equal(xr, xa, err_msg=f"replay {i}: the embedding of the word the last top-1 wrote")
        np.testing.assert_array_equal(lr, la, err_msg=f"replay {i}: logits")
        assert wr == wa, (i, wr, wa)
    assert len({w[0] for _, _, w, _ in apart}) > 1  # the token word changed along the way
    ran = [n for *_, n in runs]
    assert ran[0] == ran[2] < ran[1] == ran[3], f"dispatches a replay: {ran} (runs, twin, runs, twin)"


def test_a_run_stops_where_a_product_cannot_join(monkeypatch):
    """A product with fp32 output (another kernel), B as K x N, or weights an earlier
    member wrote (read before the barrier) does not join the run before it; two rows
    make no run. The products after it form their own."""
    d = 64
    with _device_with(monkeypatch, HELIOS_PLAN_PERSISTENT_GRID="1") as dev:
        a = dev.upload(_rand((1, d), 1))
        w0, w1, w2 = (dev.upload(_rand((d, d), 2 + i) * 0.1) for i in range(3))
        big = dev.upload(_rand((d * d, d), 9) * 0.1)
        written = dev.empty((1, d * d), "float16")
        cases = {  # the product after a . w0, and the plan's dispatches
            "fp32 output": (lambda p, x: p.matmul(x, w1, trans_b=True, out_dtype="float32"), 3),
            "B as K x N": (lambda p, x: p.matmul(x, w1), 3),
            "B written by a member": (lambda p, x: p.matmul(a, written.reshape(d, d), trans_b=True), 2),
        }
        for name, (breaker, dispatches) in cases.items():
            with dev.plan() as p:
                x = p.matmul(a, big if name == "B written by a member" else w0, trans_b=True,
                             out=written if name == "B written by a member" else None)  # fmt: skip
                breaker(p, x)
                y = p.matmul(a, w2, trans_b=True)
                p.matmul(y, w2, trans_b=True)
            assert p.counts[1] == dispatches, (name, p.counts)
        two = dev.upload(_rand((2, d), 3))
        with dev.plan() as p:
            p.matmul(p.matmul(two, w0, trans_b=True), w1, trans_b=True)
        assert p.counts[1] == 2, p.counts


def test_a_chain_longer_than_a_run_holds_takes_two_runs(apart_device, monkeypatch):
    """PERSIST_MEMBERS + 3 one-row products in a chain: a run of PERSIST_MEMBERS, then
    one of the other 3 (two dispatches, a grid barrier between each run's members; the
    trace names each member's run, run_shape counts both and their grid); the last output
    equals the products apart bit for bit."""
    d, n = 64, helios._helios.PERSIST_MEMBERS + 3

    def chain(dev):
        a = dev.upload(_rand((1, d), 1))
        ws = [dev.upload(_rand((d, d), 10 + i) * (1.0 / np.sqrt(d))) for i in range(n)]
        with dev.plan() as p:
            x = a
            for w in ws:
                x = p.matmul(x, w, trans_b=True)
        p.replay()
        runs = [t.run for t in p.trace()] if p.grid_barriers else []
        return x.numpy().view(np.uint16).copy(), p.counts[1], runs, p.run_shape

    want, apart_dispatches, _, apart_shape = chain(apart_device)
    grid = str(min(2, os.cpu_count() or 1))
    with _device_with(monkeypatch, HELIOS_PLAN_PERSISTENT_GRID=grid, HELIOS_PLAN_TRACE="1") as dev:
        got, dispatches, runs, shape = chain(dev)
    assert (apart_dispatches, dispatches, apart_shape) == (n, 2, helios.RunShape(0, 0, 0))
    assert (shape.runs, shape.grid) == (2, int(grid))
    assert runs == [0] * (n - 3) + [1] * 3
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("k", [4104, 8192])
def test_a_members_a_over_several_staging_batches_is_the_products_apart(apart_device, monkeypatch, dtype, k):
    """A run's members stage A into shared memory a batch of words an invocation at a
    time (persist_stage_a): a plain copy and a SwiGLU as A (the down product reading
    [gate | up]) over K of 4104 (a second batch of two words) and 8192 (two whole
    batches) equal the products apart bit for bit."""

    def plan(dev):
        _, w, _ = _uploads(dev, dtype)
        dt = helios.bfloat16 if dtype == "bfloat16" else np.float16
        x = dev.upload(_rand((1, k), 1, dt), dtype=dtype)
        rng = np.random.default_rng(2)  # |gate|, |up| in [1/4, 1]: no product in float16's subnormals
        gu = dev.upload((rng.choice([-1.0, 1.0], 2 * k) * rng.uniform(0.25, 1.0, 2 * k)).reshape(1, -1).astype(dt),
                        dtype=dtype)  # fmt: skip
        with dev.plan() as p:
            plain = p.matmul(x, w(24, k, 3), trans_b=True)
            down = p.matmul(p.swiglu(gu), w(16, k, 4), trans_b=True)
        p.replay()
        return [t.numpy().view(np.uint16).copy() for t in (plain, down)], p.grid_barriers

    want, apart = plan(apart_device)
    with _device_with(monkeypatch, HELIOS_PLAN_PERSISTENT_GRID=str(min(2, os.cpu_count() or 1))) as dev:
        got, barriers = plan(dev)
    assert (apart, barriers) == (0, 1)
    for name, a, b in zip(("plain", "swiglu"), want, got):
        np.testing.assert_array_equal(b, a, err_msg=name)


@pytest.mark.parametrize("dtype,normed", [("float16", False), ("bfloat16", False), ("bfloat16", True)])
def test_a_gate_and_up_member_writes_the_swiglu_row_for_the_down_member(apart_device, monkeypatch, dtype, normed):
    """In a run (by default), the gate and up product whose [gate | up] the down product reads as its
    SwiGLU A writes silu(gate) up itself (FLAG_PERSIST_GLU), its columns in pairs: the
    down product and [gate | up] equal the products apart bit for bit, the SwiGLU's row
    equals the SwiGLU op's own (unfused) bit for bit; with
    HELIOS_DISABLE_PLAN_SWIGLU_IN_RUN=1 the row is left as it was. K of 1024 (the first
    weight words ahead), 136 pairs (a last turn of the grid's subgroups part full);
    normed: the gate and up product heads an RMSNorm with its residual, as Llama's."""
    d, hidden = 1024, 136
    dt = helios.bfloat16 if dtype == "bfloat16" else np.float16
    sentinel = np.full((1, hidden), 7.0, dt)

    def plan(dev):
        _, w, vec = _uploads(dev, dtype)
        a = dev.upload(_rand((1, d), 1, dt), dtype=dtype)
        row = dev.upload(sentinel, dtype=dtype)
        with dev.plan() as p:
            if normed:
                x, gamma = dev.upload(_rand((1, d), 4, np.float32), dtype="float32"), vec(d, 5)
                a, _ = p.rmsnorm(x, gamma, residual=dev.upload(_rand((1, d), 6, dt), dtype=dtype), dtype=dtype)
            gu = p.matmul(a, w(2 * hidden, d, 2), trans_b=True)
            down = p.matmul(p.swiglu(gu, out=row), w(d, hidden, 3), trans_b=True)
        p.replay()
        return [t.numpy().view(np.uint16).copy() for t in (down, gu, row)], p.grid_barriers

    (down0, gu0, _), _ = plan(apart_device)
    grid = str(min(2, os.cpu_count() or 1))
    env = {"HELIOS_DISABLE_PLAN_PERSISTENT": "1", "HELIOS_DISABLE_PLAN_SWIGLU_FUSION": "1"}
    with _device_with(monkeypatch, **env) as dev:
        (_, _, row0), _ = plan(dev)
    monkeypatch.delenv("HELIOS_DISABLE_PLAN_PERSISTENT")
    monkeypatch.delenv("HELIOS_DISABLE_PLAN_SWIGLU_FUSION")
    for in_run in (True, False):  # the default, then the kill switch
        with _device_with(monkeypatch, HELIOS_PLAN_PERSISTENT_GRID=grid,
                          **({} if in_run else {"HELIOS_DISABLE_PLAN_SWIGLU_IN_RUN": "1"})) as dev:  # fmt: skip
            (down, gu, row), barriers = plan(dev)
        assert barriers == 1
        np.testing.assert_array_equal(down, down0, err_msg=f"down, in_run={in_run}")
        np.testing.assert_array_equal(gu, gu0, err_msg=f"[gate | up], in_run={in_run}")
        np.testing.assert_array_equal(row, row0 if in_run else sentinel.view(np.uint16), err_msg=f"row, {in_run=}")


def test_no_runs_where_the_device_reports_no_sms(device, monkeypatch):
    """A device that reports no SMs (lavapipe) has no runs unless
    HELIOS_PLAN_PERSISTENT_GRID asks: a grid too large to be resident would stall."""
    monkeypatch.delenv("HELIOS_PLAN_PERSISTENT_GRID", raising=False)
    with helios.Device() as dev:
        if dev.info.get("sm_count"):
            pytest.skip(f"{dev.info['name']} reports {dev.info['sm_count']} SMs: runs are on by default there")
        _, counts = _layer(dev, "float16", 64, 5, replays=1)
    assert counts[1] == 4, counts


@pytest.mark.parametrize(
    "layer", ["_layer(dev, 'float16', 64, 5, replays=1)", "_attention_layer(dev, 'float16', 2, 32, [70])"]
)
def test_a_grid_that_cannot_be_resident_fails_the_replay_and_the_device_goes_on(layer):
    """One lavapipe thread and a grid of three: the grid barrier (in a layer of products,
    or before an attention) gives up, the replay raises naming the switches, and the same
    device then replays a plan of one product (no run) right."""
    code = (
        "import numpy as np, helios\n"
        "from tests.test_plan_persist import _layer, _attention_layer\n"
        "dev = helios.Device()\n"
        "print('DEVICE', dev.info['name'], dev.info.get('sm_count'))\n"
        "try:\n"
        f"    {layer}\n"
        "    print('REPLAYED')\n"
        "except helios.HeliosError as e:\n"
        "    print('RAISED', e)\n"
        "a, w = np.ones((1, 64), np.float16), np.full((32, 64), 0.5, np.float16)\n"
        "with dev.plan() as p:\n"
        "    y = p.matmul(dev.upload(a), dev.upload(w), trans_b=True)\n"
        "p.replay()\n"
        "print('AFTER', p.counts, float(y.numpy().astype(np.float64).sum()))\n"
        "dev.close()\n"
    )
    env = dict(os.environ, LP_NUM_THREADS="1", HELIOS_PLAN_PERSISTENT_GRID="3", HELIOS_TEST_UNBOUNDED_GRID="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    if "llvmpipe" not in out:
        pytest.skip("not lavapipe: its one thread is what makes the grid too large to be resident")
    assert "RAISED" in r.stdout and "HELIOS_DISABLE_PLAN_PERSISTENT" in r.stdout, out
    assert "AFTER (1, 1, 1) 1024.0" in r.stdout, out


def test_a_grid_larger_than_the_device_holds_is_refused_when_it_opens(monkeypatch):
    """A grid past what the device holds resident would stall every replay until its barrier
    gives up: refused when the Device opens, naming the switch and the bound (lavapipe: a
    workgroup a thread, LP_NUM_THREADS or the cores; a GPU: two an SM)."""
    monkeypatch.setenv("LP_NUM_THREADS", "2")
    monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", "1024")
    with pytest.raises(ValueError, match=r"HELIOS_PLAN_PERSISTENT_GRID=1024: '.*' holds at most \d+ workgroups"):
        helios.Device()
    monkeypatch.setenv("HELIOS_TEST_UNBOUNDED_GRID", "1")  # the tests' way past the bound
    helios.Device().close()


@pytest.mark.parametrize(
    "name,value",
    [("HELIOS_PLAN_PERSISTENT_GRID", "two"), ("HELIOS_PLAN_PERSISTENT_GRID", "-1"),
     ("HELIOS_PLAN_PERSISTENT_GRID", "99999"), ("HELIOS_DISABLE_PLAN_PERSISTENT", "maybe"),
     ("HELIOS_DISABLE_PLAN_SWIGLU_IN_RUN", "on?")],
)  # fmt: skip
def test_the_switches_are_read_strictly(monkeypatch, name, value):
    """A grid that is not a workgroup count (0..1024), or a flag that is not a yes or a
    no, is refused naming the switch when the Device opens."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        helios.Device()


@pytest.mark.parametrize(
    "registers,grid",
    [(0, 264), (93, 264), (118, 264), (128, 264), (129, 132), (256, 132), (257, 0)],
)
def test_a_run_holds_the_workgroups_its_registers_leave_resident(registers, grid):
    """Two workgroups of 256 an SM up to 128 registers a thread, one up to 256, none past
    (an NVIDIA SM's 65,536, given out 8 a thread at a time): at 129 the H200's grid of
    two an SM was not resident and every replay's barrier gave up (results/h200-splits/).
    Registers unknown (0): the device's grid."""
    from helios._helios import testing

    assert testing.resident_grid(264, 132, registers) == grid
    assert testing.resident_grid(100, 132, registers) == min(100, grid) if registers else 100
    assert testing.resident_grid(264, 0, registers) == 264  # no SM count: nothing to cap by


def test_registers_are_counted_in_steps_of_8():
    """85 registers are given out as 88: two workgroups an SM (three at 85 would fit)."""
    from helios._helios import testing

    assert testing.resident_grid(1000, 132, 85) == 264
    assert testing.resident_grid(1000, 132, 80) == 396
