"""Replayable plans (helios.Plan, csrc/core/plan/plan.c): products recorded once and
replayed as one submission give exactly what the same products give one call at
a time, read the Tensors' contents at each replay, put a barrier only where a
product depends on an earlier one, time themselves, and refuse what they cannot
serve before anything is submitted."""

from __future__ import annotations

import numpy as np
import pytest

import helios


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float16)


@pytest.fixture
def stack(device):
    """A two-layer MLP at a decode's batch (4 tokens): x, weights (out, in) and biases."""
    x = device.upload(_rand((4, 64), 0))
    w1 = device.upload(_rand((96, 64), 1))  # (out, in): read transposed, as torch's linear
    w2 = device.upload(_rand((64, 96), 2))
    b1 = np.linspace(-1, 1, 96).astype(np.float32)
    return x, w1, w2, b1


def _record(device, x, w1, w2, b1):
    with device.plan() as p:
        h = p.matmul(x, w1, trans_b=True, bias=b1, activation="gelu")
        y = p.matmul(h, w2, trans_b=True)
    return p, y


def _one_at_a_time(device, x, w1, w2, b1):
    h = device.matmul(x, w1, trans_b=True, bias=b1, activation="gelu")
    return device.matmul(h, w2, trans_b=True).numpy()


def test_a_replay_gives_what_the_products_give_one_call_at_a_time(device, stack):
    p, y = _record(device, *stack)
    run = p.replay()
    assert np.array_equal(y.numpy(), _one_at_a_time(device, *stack))  # the same kernels: the same bits
    assert run.wall_ms >= run.host_ms > 0 and run.gpu_ms >= 0


def test_each_replay_reads_the_tensors_contents_then(device, stack):
    """What changes from token to token is the data, never the recording."""
    x = stack[0]
    p, y = _record(device, *stack)
    p.replay()
    first = y.numpy()
    x.copy_(_rand((4, 64), 7))
    p.replay()
    assert not np.array_equal(y.numpy(), first)
    assert np.array_equal(y.numpy(), _one_at_a_time(device, *stack))


def test_a_barrier_only_where_a_product_depends_on_an_earlier_one(device, stack):
    x, w1, w2, b1 = stack
    with device.plan() as p:
        h = p.matmul(x, w1, trans_b=True)  # writes h
        g = p.matmul(x, w1, trans_b=True)  # independent of h: no barrier
        p.matmul(h, w2, trans_b=True)  # reads h: a barrier
        p.matmul(g, w2, trans_b=True)  # g was written before that barrier: none
    ops, dispatches, barriers = p.counts
    assert ops == 4 and dispatches >= 4
    assert barriers == 2  # the one before the plan (earlier submissions' writes) and the one before h's reader
    p.replay()
    assert np.array_equal(g.numpy(), h.numpy())


def test_a_plan_matches_the_chain_of_the_same_products(device, stack):
    x, w1, w2, b1 = stack
    p, y = _record(device, *stack)
    with device.chain() as ch:
        h2 = ch.matmul(x, w1, trans_b=True, bias=b1, activation="gelu")
        y2 = ch.matmul(h2, w2, trans_b=True)
    p.replay()
    assert np.array_equal(y.numpy(), y2.numpy())


def test_timed_replays(device, stack):
    p, _ = _record(device, *stack)
    t = p.time(iters=3, warmup=1)
    assert t.ops == 2 and len(t.runs) == 3 and t.median("wall_ms") > 0


# ---- what a plan refuses, before anything is submitted ---------------------------------------------------


def test_host_arrays_are_refused_at_recording(device, stack):
    with pytest.raises(TypeError, match="helios.Tensor"):
        with device.plan() as p:
            p.matmul(_rand((4, 64), 0), stack[1], trans_b=True)


def test_an_empty_plan_is_refused(device):
    with pytest.raises(ValueError, match="no operations"):
        with device.plan():
            pass


def test_replay_before_recording_and_products_after_it_are_refused(device, stack):
    x, w1, w2, b1 = stack
    p = device.plan()
    p.matmul(x, w1, trans_b=True)
    with pytest.raises(ValueError, match="not recorded yet"):
        p.replay()
    p.record()
    with pytest.raises(ValueError, match="recorded already"):
        p.matmul(x, w1, trans_b=True)


def test_a_tensor_of_another_device_is_refused(device, stack):
    with helios.Device() as other:  # another Device object: its Tensors are its own
        w = other.upload(_rand((96, 64), 1))
        with pytest.raises(ValueError, match="another [Dd]evice"):
            with device.plan() as p:
                p.matmul(stack[0], w, trans_b=True)


def test_replay_after_the_device_closed_is_refused():
    dev = helios.Device()
    x = dev.upload(_rand((4, 8), 0))
    with dev.plan() as p:
        p.matmul(x, x, trans_b=True)
    dev.close()
    with pytest.raises(helios.DeviceClosedError, match="closed"):
        p.replay()


def test_replay_after_close_is_refused(device, stack):
    p, _ = _record(device, *stack)
    p.close()
    p.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        p.replay()


# ---- faults: a failed recording or replay names the call, leaks nothing, leaves the device working ------

FAULTS = {"buffer": "vkCreateBuffer", "alloc": "vkAllocateMemory", "submit": "vkQueueSubmit"}


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_a_failed_recording_or_replay_leaves_the_device_working(monkeypatch, kind):
    """HELIOS_FAULT=KIND:N (csrc/core/runtime/fault.c) fails the Nth call of a kind: walked over a
    plan's recording and two replays, each failure is the documented exception naming
    the call, no buffer is left without its memory, and the same device then computes
    a product right (the walk ends once N passes the last call)."""
    from helios import _helios

    a, b = (np.arange(n, dtype=np.float16).reshape(s) % 7 for n, s in ((48 * 40, (48, 40)), (32 * 40, (32, 40))))
    want = a.astype(np.float32) @ b.astype(np.float32).T
    failures = 0
    for n in range(1, 30):
        monkeypatch.setenv("HELIOS_FAULT", f"{kind}:{n}")
        with helios.Device() as dev:
            try:
                ta, tb = dev.upload(a), dev.upload(b)
                with dev.plan() as p:
                    c = p.matmul(ta, tb, trans_b=True, out_dtype="float32")
                p.replay()
                p.replay()
                got = c.numpy()
            except helios.HeliosError as e:
                failures += 1
                assert FAULTS[kind] in str(e) and "VK_ERROR" in str(e), str(e)
                t = dev.telemetry()
                assert t["live_buffers"] == t["live_memory"], t
                monkeypatch.delenv("HELIOS_FAULT")
                np.testing.assert_array_equal(dev.matmul(a, b, trans_b=True, out_dtype="float32"), want)
                continue
            finally:
                seen = _helios._fault_count(kind)
            assert seen < n, f"HELIOS_FAULT={kind}:{n} was reached ({seen} calls) but nothing failed"
            np.testing.assert_array_equal(got, want)
            break
    else:
        pytest.fail(f"more than 29 {kind} calls in a plan's recording and replays")
    assert failures >= 1
