"""The ordered (asynchronous) path every helios.torch op takes on a GPU shared with
CUDA, run here with the host standing in for the CUDA stream (helios._helios.testing.async_host:
the same ring of submissions over a timeline semaphore of the device alone), so
that CI covers it on lavapipe: an ordered op returns before it runs, runs only
once its wait value is signalled, signals its own when done; chains of ordered
ops, the ring wrapping, products, the attention forward with its log-sum-exp and
the backward; values out of order refused; nothing left behind."""

from __future__ import annotations

import numpy as np
import pytest

import helios
from helios._helios import testing
from helios.attention import LSE_ATOL, random_qkv, reference_attention, reference_attention_backward
from helios.check import check_close
from helios.gemm import gelu_tanh

MS = 1_000_000  # ns
# How long a test waits for work it expects to finish: a cold CPU driver (lavapipe)
# compiles each new pipeline first, up to minutes on 2 loaded cores.
DONE = 300_000 * MS


@pytest.fixture
def host_ordered():
    with helios.Device() as dev:
        if not dev.info.get("timeline_semaphore"):
            pytest.skip("this device offers no timeline semaphores: no ordered path to test")
        testing.async_host(dev)
        yield dev


def _run(dev, op):
    """op(order) submitted, then the host signals its wait value and waits for its signal."""
    w, s = dev._async_values()
    op((w, s))
    testing.host_signal(dev, w)
    testing.host_wait(dev, s, DONE)
    return s


def test_an_ordered_op_waits_for_its_signal(host_ordered):
    dev = host_ordered
    a = np.random.default_rng(0).standard_normal((40, 24)).astype(np.float16)
    b = np.random.default_rng(1).standard_normal((24, 33)).astype(np.float16)
    ta, tb, out = dev.upload(a), dev.upload(b), dev.empty((40, 33))
    w, s = dev._async_values()
    assert s > w  # the values between are a group's chunks
    dev.matmul(ta, tb, out=out, order=(w, s))  # returns at once: nothing signalled w yet
    with pytest.raises(helios.HeliosError, match=f"did not reach {s}"):
        testing.host_wait(dev, s, 50 * MS)
    testing.host_signal(dev, w)
    testing.host_wait(dev, s, DONE)
    assert check_close(out.numpy(), a.astype(np.float64) @ b.astype(np.float64))


def test_a_chain_of_ordered_ops_and_the_ring_wrapping(host_ordered):
    """Forty dependent products (more than the ring's 16 slots): each reads the last
    one's output; the host signals each wait value as the CUDA stream would."""
    dev = host_ordered
    x = np.eye(32, dtype=np.float16)
    m = (np.eye(32) * 1.0 + np.diag(np.full(31, 0.01), 1)).astype(np.float16)
    tm, cur = dev.upload(m), dev.upload(x)
    want = x.astype(np.float64)
    for _ in range(40):
        nxt = dev.empty((32, 32))
        _run(dev, lambda order, c=cur, n=nxt: dev.matmul(c, tm, out=n, order=order))
        want = want @ m.astype(np.float64)
        cur = nxt
    assert check_close(cur.numpy(), want)


def test_attention_forward_and_backward_ordered(host_ordered):
    """What ht.attention runs on a GPU: the forward writing O and its lse into
    Tensors, then the backward's two kernels into three gradient Tensors, each an
    ordered submission."""
    dev = host_ordered
    from helios.attention import run_attention, run_attention_backward

    q, k, v = random_qkv(1, 2, 37, 37, 32, 4)
    do = random_qkv(1, 2, 37, 37, 32, 5)[0]
    tq, tk, tv, tdo = (dev.upload(x) for x in (q, k, v, do))
    o, lse = dev.empty(q.shape), dev.empty(q.shape[:3], "float32")
    _run(dev, lambda order: run_attention(dev, tq, tk, tv, causal=True, out=o, order=order, lse=lse))
    grads = (dev.empty(q.shape), dev.empty(k.shape), dev.empty(v.shape))
    _run(dev, lambda order: run_attention_backward(dev, tq, tk, tv, o, tdo, lse, causal=True, order=order, grads=grads))
    assert check_close(o.numpy(), reference_attention(q, k, v, causal=True))
    want = reference_attention_backward(q, k, v, do, causal=True)
    np.testing.assert_allclose(lse.numpy(), want[3], rtol=1e-5, atol=LSE_ATOL["float16"])
    for g, w in zip(grads, want):
        assert check_close(g.numpy(), w)


def test_values_out_of_order_and_host_calls_out_of_place(host_ordered):
    dev = host_ordered
    ta, out = dev.upload(np.ones((8, 8), np.float16)), dev.empty((8, 8))
    s = _run(dev, lambda order: dev.matmul(ta, ta, out=out, order=order))
    with pytest.raises(ValueError, match="take them from hl_async_values"):
        dev.matmul(ta, ta, out=out, order=(s - 1, s))  # a pair already used
    with pytest.raises(ValueError, match="take them from hl_async_values"):
        dev.matmul(ta, ta, out=out, order=(s + 5, s + 5))  # no signal above the wait
    with pytest.raises(ValueError, match="tensors only"):
        dev.matmul(np.ones((8, 8), np.float16), ta, out=out, order=dev._async_values())
    with helios.Device() as plain:
        with pytest.raises(ValueError, match="host signals drive a host-ordered device only"):
            testing.host_signal(plain, 1)
        with pytest.raises(ValueError, match="no ordered operation"):
            testing.host_wait(plain, 1, MS)


def test_nothing_left_behind(host_ordered):
    dev = host_ordered
    ta, out = dev.upload(np.ones((16, 16), np.float16)), dev.empty((16, 16))
    _run(dev, lambda order: dev.matmul(ta, ta, out=out, order=order))
    base = dev.telemetry()
    for _ in range(30):
        _run(dev, lambda order: dev.matmul(ta, ta, out=out, order=order))
    end = dev.telemetry()
    assert (end["live_buffers"], end["live_memory"]) == (base["live_buffers"], base["live_memory"])
    assert np.all(out.numpy() == 16)


def test_the_gpu_time_of_ordered_ops_is_counted(host_ordered):
    """Each ordered submission carries a timestamp pair: telemetry adds the GPU time
    of every finished one (what a torch program spent in Helios kernels)."""
    dev = host_ordered
    if not dev.info["timestamp_valid_bits"]:
        pytest.skip("no timestamps on this device's queue")
    ta, out = dev.upload(np.ones((64, 64), np.float16)), dev.empty((64, 64))
    dev.reset_telemetry()
    for _ in range(20):  # past the ring's 16 slots: reused slots are read before their reuse
        _run(dev, lambda order: dev.matmul(ta, ta, out=out, order=order))
    t = dev.telemetry()
    assert t["async_timed"] == 20 and t["async_gpu_ms"] > 0
    w, s = dev._async_values()
    dev.matmul(ta, ta, out=out, order=(w, s))
    assert dev.telemetry()["async_timed"] == 20  # not finished: not counted yet
    testing.host_signal(dev, w)
    testing.host_wait(dev, s, DONE)
    assert dev.telemetry()["async_timed"] == 21
    dev.reset_telemetry()
    assert (dev.telemetry()["async_timed"], dev.telemetry()["async_gpu_ms"]) == (0, 0.0)


def test_a_group_is_one_submission_run_in_order(host_ordered):
    """What helios.torch submits per block: products, layout copies, an activation and
    the attention backward recorded into one command buffer (one wait, one signal);
    nothing runs before the wait value, each op sees the one before's result."""
    from helios.attention import run_attention, run_attention_backward

    dev = host_ordered
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((24, 16)) / 4).astype(np.float16)
    w = (rng.standard_normal((16, 48)) / 4).astype(np.float16)
    tx, tw = dev.upload(x), dev.upload(w)
    z, h, col = dev.empty((24, 48)), dev.empty((24, 48)), dev.empty((24, 8))
    base = dev.telemetry()["submits"]
    w0, s0 = dev._async_values()
    dev._group_begin(w0, s0)
    try:
        dev.matmul(tx, tw, out=z)
        dev.activation(z, "gelu", out=h)
        dev.copy_strided(h, col, (24, 8), (48, 1), (8, 1), 5)  # columns 5..12 of h
    finally:
        dev._group_end()
    assert dev.telemetry()["submits"] == base + 1
    with pytest.raises(helios.HeliosError, match=f"did not reach {s0}"):
        testing.host_wait(dev, s0, 50 * MS)  # recorded, submitted, waiting for the stream's signal
    testing.host_signal(dev, w0)
    testing.host_wait(dev, s0, DONE)
    zr = x.astype(np.float64) @ w.astype(np.float64)
    assert check_close(z.numpy(), zr)
    hr = gelu_tanh(z.numpy().astype(np.float64))
    np.testing.assert_allclose(h.numpy().astype(np.float64), hr, rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(col.numpy(), h.numpy()[:, 5:13])

    # the attention forward and a backward whose scratch (delta) grows inside the group
    q, k, v = random_qkv(1, 2, 19, 19, 32, 6)
    q2, k2, v2 = random_qkv(2, 4, 160, 160, 32, 7)  # 1280 rows of delta: past the first's 4 KiB scratch
    ins = [tuple(dev.upload(t) for t in qkv) for qkv in ((q, k, v), (q2, k2, v2))]
    outs = [(dev.empty(a.shape), dev.empty(a.shape[:3], "float32")) for a in (q, q2)]
    dos = [dev.upload(random_qkv(*a.shape[:3], a.shape[2], 32, 8)[0]) for a in (q, q2)]
    grads = [tuple(dev.empty(a.shape) for _ in range(3)) for a in (q, q2)]
    # the backward's scratch made (4 KiB) before the group, so that the group's second backward outgrows it
    run_attention(dev, *ins[0], causal=True, out=outs[0][0], lse=outs[0][1])
    run_attention_backward(dev, *ins[0], outs[0][0], dos[0], outs[0][1], causal=True, grads=grads[0])
    buffers = dev.telemetry()["live_buffers"]
    w1, s1 = dev._async_values()
    dev._group_begin(w1, s1)
    try:
        for (tq, tk, tv), (o, lse), tdo, gs in zip(ins, outs, dos, grads):
            run_attention(dev, tq, tk, tv, causal=True, out=o, lse=lse)
            run_attention_backward(dev, tq, tk, tv, o, tdo, lse, causal=True, grads=gs)
    finally:
        dev._group_end()
        testing.host_signal(dev, w1)  # also after a failure: nothing may wait for it at close
    testing.host_wait(dev, s1, DONE)
    # the scratch the second backward outgrew was kept until the group ran, then freed
    assert dev.telemetry()["live_buffers"] == buffers
    for (a, b, c), (o, lse), tdo, gs in zip(((q, k, v), (q2, k2, v2)), outs, dos, grads):
        assert check_close(o.numpy(), reference_attention(a, b, c, causal=True))
        want = reference_attention_backward(a, b, c, tdo.numpy(), causal=True)
        np.testing.assert_allclose(lse.numpy(), want[3], rtol=1e-5, atol=LSE_ATOL["float16"])
        for g, wnt in zip(gs, want):
            assert check_close(g.numpy(), wnt)


def test_group_misuse_is_refused_and_a_failed_op_still_signals(host_ordered):
    dev = host_ordered
    ta, out = dev.upload(np.ones((8, 8), np.float16)), dev.empty((8, 8))
    with pytest.raises(ValueError, match="no group is open"):
        dev._group_end()
    w, s = dev._async_values()
    dev._group_begin(w, s)
    try:
        with pytest.raises(ValueError, match="already open"):
            dev._group_begin(*dev._async_values())
        with pytest.raises(ValueError, match="no wait/signal values of its own"):
            dev.matmul(ta, ta, out=out, order=dev._async_values())
        with pytest.raises(ValueError, match="tensors only"):
            dev.matmul(np.ones((8, 8), np.float16), ta, out=out)
        dev.matmul(ta, ta, out=out)
        with pytest.raises(ValueError, match="tensor src holds"):
            dev.copy_strided(ta, out, (65,), (1,), (1,))
    finally:
        dev._group_end()
    testing.host_signal(dev, w)
    testing.host_wait(dev, s, DONE)  # what was recorded ran and the group signalled
    assert np.all(out.numpy() == 8)
    with pytest.raises(ValueError, match="take them from hl_async_values"):
        dev._group_begin(w, s)  # a pair already used


def test_a_long_group_goes_in_chunks_in_order(host_ordered):
    """A group longer than a chunk (8 ops) is submitted as it is recorded, each chunk
    waiting for the one before: twenty dependent products in three submissions, none
    run before the stream's signal, the last one's result as a single chain's."""
    dev = host_ordered
    m = (np.eye(32) + np.diag(np.full(31, 0.01), 1)).astype(np.float16)
    tm = dev.upload(m)
    bufs = [dev.upload(np.eye(32, dtype=np.float16))] + [dev.empty((32, 32)) for _ in range(20)]
    base = dev.telemetry()["submits"]
    w, s = dev._async_values()
    dev._group_begin(w, s)
    try:
        for i in range(20):
            dev.matmul(bufs[i], tm, out=bufs[i + 1])
    finally:
        dev._group_end()
        assert dev.telemetry()["submits"] == base + 3
        with pytest.raises(helios.HeliosError, match=f"did not reach {s}"):
            testing.host_wait(dev, s, 50 * MS)  # the first chunk waits for the stream's signal
        testing.host_signal(dev, w)
    testing.host_wait(dev, s, DONE)
    want = np.linalg.matrix_power(m.astype(np.float64), 20)
    assert check_close(bufs[-1].numpy(), want)


def test_a_chunk_goes_at_once_when_the_gpu_has_run_out_of_work(host_ordered, monkeypatch):
    """A group's chunk goes to the GPU as soon as the semaphore shows the GPU idle
    (the stream's signal reached, or the chunk before done), not only when it holds 8
    ops; HELIOS_DISABLE_IDLE_FLUSH=1 sends only full chunks. Either way the results
    are the ops' in order."""
    dev = host_ordered
    m = (np.eye(32) + np.diag(np.full(31, 0.01), 1)).astype(np.float16)
    tm = dev.upload(m)
    want = [np.linalg.matrix_power(m.astype(np.float64), i) for i in range(1, 4)]
    for fixed in ("0", "1"):
        monkeypatch.setenv("HELIOS_DISABLE_IDLE_FLUSH", fixed)
        bufs = [dev.upload(np.eye(32, dtype=np.float16))] + [dev.empty((32, 32)) for _ in range(3)]
        w, s = dev._async_values()
        testing.host_signal(dev, w)  # the stream's work is done before the group starts
        base = dev.telemetry()["submits"]
        sent = []
        dev._group_begin(w, s)
        try:
            for i in range(3):
                dev.matmul(bufs[i], tm, out=bufs[i + 1])
                sent.append(dev.telemetry()["submits"] - base)
                if fixed == "0":
                    testing.host_wait(dev, w + i + 1, DONE)  # that chunk is done: the GPU is idle again
        finally:
            dev._group_end()
        testing.host_wait(dev, s, DONE)
        assert sent == ([1, 2, 3] if fixed == "0" else [0, 0, 0])
        assert dev.telemetry()["submits"] - base == (4 if fixed == "0" else 1)  # + the group's end
        for got, ref in zip(bufs[1:], want):
            assert check_close(got.numpy(), ref)
    monkeypatch.setenv("HELIOS_DISABLE_IDLE_FLUSH", "sometimes")
    w, s = dev._async_values()
    with pytest.raises(ValueError, match="HELIOS_DISABLE_IDLE_FLUSH"):
        dev._group_begin(w, s)
    testing.host_signal(dev, s)  # the pair is spent


def test_a_group_puts_barriers_only_where_an_op_depends_on_another(host_ordered, monkeypatch):
    """Inside a group an op goes behind a barrier only when it reads memory an op since
    the last barrier wrote, or writes memory one read or wrote (read after write, write
    after read, write after write, also between two views of one tensor); independent
    ops are recorded with none between them (telemetry: barriers, overlapped; a chunk's
    first op needs none, its semaphore orders it), and every result is still right.
    Split-K products share the device's workspace: one waits for the other.
    HELIOS_DISABLE_GROUP_OVERLAP=1 puts a barrier before and after every op."""
    dev = host_ordered
    rng = np.random.default_rng(9)
    a = (rng.standard_normal((32, 32)) / 4).astype(np.float16)
    b = (rng.standard_normal((32, 32)) / 4).astype(np.float16)
    ta, tb = dev.upload(a), dev.upload(b)
    x, y, z = (dev.empty((32, 32)) for _ in range(3))
    wide = dev.empty((64, 32))
    top, bottom = wide[0:32], wide[32:64]  # two views of one buffer, disjoint

    def group(ops):
        """(barriers, overlapped) the ops cost recorded as one group (one chunk)."""
        t0 = dev.telemetry()
        w, s = dev._async_values()
        dev._group_begin(w, s)
        try:
            for op in ops:
                op()
        finally:  # also after a refusal: a later signal must not pass this group's pending one
            dev._group_end()
            testing.host_signal(dev, w)
            testing.host_wait(dev, s, DONE)
        t1 = dev.telemetry()
        return t1["barriers"] - t0["barriers"], t1["overlapped"] - t0["overlapped"]

    def mm(p, q, out):
        return lambda: dev.matmul(p, q, out=out)

    def act(src, out):
        return lambda: dev.activation(src, "relu", out=out)

    # independent: both read a and b, write different outputs (disjoint views too)
    assert group([mm(ta, tb, x), mm(tb, ta, y), act(ta, top), act(tb, bottom)]) == (0, 4)
    # read after write: the second reads what the first wrote
    assert group([mm(ta, tb, x), act(x, y)]) == (1, 1)
    # write after read: the second writes what the first read
    assert group([act(x, y), mm(ta, tb, x)]) == (1, 1)
    # write after write: both write x
    assert group([mm(ta, tb, x), mm(tb, ta, x)]) == (1, 1)
    # overlapping views of one buffer: wide read, then its bottom half written
    assert group([act(wide, dev.empty((64, 32))), act(ta, bottom)]) == (1, 1)
    # a barrier clears what came before it: z's op overlaps y's (both only read x)
    assert group([mm(ta, tb, x), act(x, y), act(x, z)]) == (1, 2)
    want = np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0)
    assert check_close(y.numpy(), want) and check_close(z.numpy(), want)
    # split-K: the second product's partial sums go where the first's are (one barrier
    # between them, besides each product's own before its reduction)
    split = [v for v in dev.variants() if v.startswith("coop:")][0].replace("splitk=1", "splitk=2")
    long_k = (rng.standard_normal((32, 512)) / 16).astype(np.float16)
    tl, tlt = dev.upload(long_k), dev.upload(np.ascontiguousarray(long_k.T))
    two = [lambda: dev.matmul(tl, tlt, out=x, variant=split), lambda: dev.matmul(tl, tlt, out=y, variant=split)]
    assert group(two) == (3, 1)
    assert dev.telemetry()["last_variant"].endswith("splitk=2:raster=8")
    want = long_k.astype(np.float64) @ long_k.T.astype(np.float64)
    assert check_close(x.numpy(), want) and check_close(y.numpy(), want)
    # a chain (its own submission, its operands untracked) is refused inside a group
    ch = dev.chain()
    ch.matmul(ta, tb, out=z)
    with pytest.raises(ValueError, match="does not run inside an open group"):
        group([mm(ta, tb, x), ch.run])

    def record_plan() -> None:
        with dev.plan() as p:
            p.matmul(ta, tb, out=z)

    with pytest.raises(ValueError, match="plan: recorded inside an open group; record it after it closes"):
        group([mm(ta, tb, x), record_plan])
    monkeypatch.setenv("HELIOS_DISABLE_GROUP_OVERLAP", "1")
    assert group([mm(ta, tb, x), mm(tb, ta, y), act(ta, top)]) == (6, 0)
    monkeypatch.setenv("HELIOS_DISABLE_GROUP_OVERLAP", "maybe")
    with pytest.raises(ValueError, match="HELIOS_DISABLE_GROUP_OVERLAP"):
        group([mm(ta, tb, x)])


def test_a_profile_times_each_op_of_a_group(host_ordered):
    """_profile_start/_profile_stop: every op of a group runs alone and writes a GPU
    timestamp when done, every submission one when it starts; read back in recording
    order once the work is done (before: refused, not hung); then overlap returns."""
    dev = host_ordered
    ta = dev.upload(np.ones((64, 64), np.float16))
    outs = [dev.empty((64, 64)) for _ in range(10)]
    with pytest.raises(ValueError, match="no profile is on"):
        dev._profile_stop()
    dev._profile_start(64)
    with pytest.raises(ValueError, match="already on"):
        dev._profile_start(64)
    w, s = dev._async_values()
    t0 = dev.telemetry()
    dev._group_begin(w, s)
    for out in outs:  # independent: they would overlap without the profile
        dev.matmul(ta, ta, out=out)
    dev._group_end()
    assert dev.telemetry()["overlapped"] == t0["overlapped"]
    with pytest.raises(ValueError, match="profile stop: ordered work is still pending"):
        dev._profile_stop()  # the group waits for its signal: nothing ran (the profile stays on)
    testing.host_signal(dev, w)
    testing.host_wait(dev, s, DONE)
    marks, dropped = dev._profile_stop()
    # ten ops in chunks of 8: two submissions
    assert [k for k, _ in marks] == ["submission"] + ["op"] * 8 + ["submission"] + ["op"] * 2
    assert dropped == 0 and marks[0][1] == 0.0
    times = [ms for k, ms in marks if k == "op"]
    assert all(b >= a for a, b in zip(times, times[1:])) and times[-1] > 0
    assert all(np.all(out.numpy() == 64) for out in outs)
    dev._profile_start(4)  # past capacity: counted as dropped
    w, s = dev._async_values()
    dev._group_begin(w, s)
    for out in outs[:5]:
        dev.matmul(ta, ta, out=out)
    dev._group_end()
    testing.host_signal(dev, w)
    testing.host_wait(dev, s, DONE)
    marks, dropped = dev._profile_stop()
    assert (len(marks), dropped) == (4, 2)
    with pytest.raises(ValueError, match="capacity must be"):
        dev._profile_start(1)
    # started only with nothing ordered pending and no group open (its pool is reset
    # in a submission of its own, which would wait behind them)
    w, s = dev._async_values()
    dev._group_begin(w, s)
    dev.matmul(ta, ta, out=outs[0])
    with pytest.raises(ValueError, match="profile start: a group is open"):
        dev._profile_start(64)
    dev._group_end()
    with pytest.raises(ValueError, match="profile start: ordered work is still pending"):
        dev._profile_start(64)
    testing.host_signal(dev, w)
    testing.host_wait(dev, s, DONE)
    dev._profile_start(64)
    assert dev._profile_stop() == ([], 0)
