"""Captures (helios.Capture, csrc/core/runtime/capture.c): ordered operations recorded once
and replayed; a replay equals the same operations run one by one, reads whatever the
Tensors hold then, holds every Tensor it binds, and refuses what it cannot replay."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import helios


def _f16(device, rng, shape):
    return device.upload(rng.standard_normal(shape).astype(np.float16))


def _layer(device, x, w1, w2, h, y):
    """A product with a GELU epilogue, then a product: two ops, the second depending on the first."""
    device.matmul(x, w1, out=h, activation="gelu")
    device.matmul(h, w2, out=y)


def test_a_replay_is_the_ops_run_one_by_one(device):
    rng = np.random.default_rng(0)
    x, w1, w2 = _f16(device, rng, (33, 40)), _f16(device, rng, (40, 72)), _f16(device, rng, (72, 24))
    h, y = device.empty((33, 72)), device.empty((33, 24))
    _layer(device, x, w1, w2, h, y)
    want = y.numpy().copy()
    y2 = device.empty((33, 24))
    with device.capture() as step:
        _layer(device, x, w1, w2, h, y2)
    assert step.counts[0] == 2 and step.counts[1] >= 2
    run = step.replay()
    assert run.wall_ms >= run.host_ms >= 0.0
    np.testing.assert_array_equal(y2.numpy(), want)
    # new contents, the same recording: the replay reads them
    x2 = rng.standard_normal((33, 40)).astype(np.float16)
    x.copy_(x2)
    step.replay()
    _layer(device, x, w1, w2, h, y)
    np.testing.assert_array_equal(y2.numpy(), y.numpy())


def test_nothing_runs_while_recording(device):
    rng = np.random.default_rng(1)
    a, b = _f16(device, rng, (16, 16)), _f16(device, rng, (16, 16))
    c = device.upload(np.zeros((16, 16), np.float16))
    with device.capture() as step:
        device.matmul(a, b, out=c)
    np.testing.assert_array_equal(c.numpy(), 0)  # recorded, not run
    step.replay()
    assert np.abs(c.numpy()).max() > 0


def test_a_capture_holds_the_tensors_it_binds(device):
    rng = np.random.default_rng(2)
    a, b = _f16(device, rng, (8, 24)), _f16(device, rng, (24, 16))
    want = (a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)).astype(np.float16)
    c = device.empty((8, 16))
    with device.capture() as step:
        device.matmul(a, b, out=c)
    del a, b
    gc.collect()
    step.replay()
    res = helios.check_close(c.numpy().astype(np.float64)[None], want.astype(np.float64)[None])
    assert res.passed, res.line()


def test_what_a_capture_refuses(device):
    rng = np.random.default_rng(3)
    a, b = _f16(device, rng, (8, 8)), _f16(device, rng, (8, 8))
    with pytest.raises(ValueError, match="host data"):
        with device.capture():
            device.matmul(a, rng.standard_normal((8, 8)).astype(np.float16))
    with pytest.raises(ValueError, match="no operations"):
        with device.capture():
            pass
    with pytest.raises(ValueError, match="already recording"):
        with device.capture():
            with device.capture():
                pass
    with pytest.raises(ValueError, match="nothing recorded"):
        helios.Capture(device).replay()
    # after each refusal the device runs and records as before
    c = device.empty((8, 8))
    with device.capture() as step:
        device.matmul(a, b, out=c)
    step.replay()
    assert step.alive
    step.close()
    with pytest.raises(ValueError, match="closed"):
        step.replay()


def test_a_capture_after_its_device_closed():
    dev = helios.Device()
    rng = np.random.default_rng(4)
    a, b = _f16(dev, rng, (8, 8)), _f16(dev, rng, (8, 8))
    c = dev.empty((8, 8))
    with dev.capture() as step:
        dev.matmul(a, b, out=c)
    dev.close()
    assert not step.alive
    with pytest.raises(helios.DeviceClosedError):
        step.replay()
