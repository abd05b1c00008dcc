"""AdamW as a plan's step (optim.comp): replayed steps against float64 and, where torch
is installed, against torch.optim.AdamW itself; its step count and learning rate come
from parameter words, so the recording never changes; bad input refused."""

from __future__ import annotations

import numpy as np
import pytest

import helios


def _adamw_ref(p, m, v, g, t, lr, b1, b2, eps, wd):
    p = p * (1 - lr * wd)
    m = m + (1 - b1) * (g - m)
    v = b2 * v + (1 - b2) * g * g
    p = p - lr / (1 - b1**t) * m / (np.sqrt(v) / np.sqrt(1 - b2**t) + eps)
    return p, m, v


@pytest.mark.parametrize("n,copy", [(1, None), (1000, "bfloat16"), (70000, "float16")])
def test_replayed_adamw_steps_against_float64(device, n, copy):
    rng = np.random.default_rng(n)
    p0 = rng.standard_normal(n).astype(np.float32)
    up = lambda a: device.upload(np.ascontiguousarray(a, np.float32), dtype=np.float32)  # noqa: E731
    p, m, v, g = up(p0), up(np.zeros(n)), up(np.zeros(n)), up(np.zeros(n))
    c = device.empty((n,), copy) if copy else None
    with device.plan(params=2) as plan:
        plan.adamw(p, m, v, g, step=0, lr=1, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, copy=c)
    rp, rm, rv = p0.astype(np.float64), np.zeros(n), np.zeros(n)
    for t, lr in ((1, 1e-3), (2, 3e-3), (3, 2e-3), (4, 1e-4)):
        gt = rng.standard_normal(n).astype(np.float32)
        g.copy_(gt)
        plan.replay(params=[t, plan.lr_word(lr)])
        rp, rm, rv = _adamw_ref(rp, rm, rv, gt.astype(np.float64), t, lr, 0.9, 0.95, 1e-8, 0.1)
        for name, got, want in (("p", p, rp), ("m", m, rm), ("v", v, rv)):
            res = helios.check_close(got.numpy().astype(np.float64)[None], want[None], rtol=1e-5, atol=1e-7)
            assert res.passed, f"step {t}, {name}: {res.line()}"
        if c is not None:  # the copy is p rounded once
            want16 = p.numpy().astype(helios.bfloat16 if copy == "bfloat16" else np.float16)
            np.testing.assert_array_equal(c.numpy().view(np.uint16), want16.view(np.uint16))
    assert plan.counts[:2] == (1, 1)


def test_adamw_is_torchs(device):
    torch = pytest.importorskip("torch", reason="the second oracle is torch.optim.AdamW")
    n = 4096
    rng = np.random.default_rng(7)
    p0 = rng.standard_normal(n).astype(np.float32)
    tp = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = torch.optim.AdamW([tp], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, foreach=False)
    up = lambda a: device.upload(np.ascontiguousarray(a, np.float32), dtype=np.float32)  # noqa: E731
    p, m, v, g = up(p0), up(np.zeros(n)), up(np.zeros(n)), up(np.zeros(n))
    with device.plan(params=2) as plan:
        plan.adamw(p, m, v, g, step=0, lr=1)
    for t in range(1, 6):
        gt = rng.standard_normal(n).astype(np.float32)
        tp.grad = torch.from_numpy(gt.copy())
        opt.step()
        g.copy_(gt)
        plan.replay(params=[t, plan.lr_word(1e-3)])
        np.testing.assert_allclose(
            p.numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"step {t}"
        )  # fp32 orders


def test_adamw_refuses_bad_input_before_recording(device):
    f = device.upload(np.zeros(8, np.float32), dtype=np.float32)
    other = device.upload(np.zeros(9, np.float32), dtype=np.float32)
    p = device.plan(params=2)
    cases = [
        (
            lambda: p.adamw(f, f, f, other, step=0, lr=1),
            TypeError,
            "g must be a packed float32 helios.Tensor of p's size",
        ),
        (lambda: p.adamw(f, f, f, f, step=0, lr=1, betas=(1.0, 0.9)), ValueError, r"betas in \[0, 1\)"),
        (lambda: p.adamw(f, f, f, f, step=0, lr=5), ValueError, "adamw's lr"),
        (lambda: p.adamw(f, f, f, f, step=0, lr=1, copy=f), TypeError, "copy must be a packed float16 or bfloat16"),
    ]
    for call, exc, says in cases:
        with pytest.raises(exc, match=says):
            call()
    assert not p._ops
    with pytest.raises(ValueError, match=r"plan op 0 \(adamw\): p, m, v, g and copy must not overlap"):
        device._plan([dict(kind="adamw", p=f, m=f, v=other, g=other, copy=None, n=8, step_slot=0, lr_slot=1,
                           beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.0, dtype="float16")], 2)  # fmt: skip
