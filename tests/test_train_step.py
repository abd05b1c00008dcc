"""A training step as one capture (helios.train_step): the suite's tiny GPT trained by
replays equals the same operations run one by one bit for bit, and tracks torch's
eager step on the CPU (loss, gradients, gradient norm, AdamW after clipping) within
the training suite's gates."""

from __future__ import annotations

import numpy as np
import pytest

from helios.train_step import AdamWSettings, GPTShape, TrainingStep, upload_state

SHAPE = GPTShape(vocab=96, d=64, heads=2, layers=2, seq=32, batch=2)


def _init(seed: int = 0) -> dict:
    """torch's GPT init rule (helios.harness.workloads.train.model): matrices N(0, 0.02), biases 0,
    LayerNorm weights 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, dims in SHAPE.parameters():
        if len(dims) == 2:
            out[name] = (rng.standard_normal(dims) * 0.02).astype(np.float32)
        else:
            out[name] = (
                np.ones(dims, np.float32)
                if name.endswith("ln1.weight") or name.endswith(("ln2.weight", "lnf.weight"))
                else np.zeros(dims, np.float32)
            )
    return out


def _batches(n: int) -> np.ndarray:
    return np.random.default_rng(1).integers(0, SHAPE.vocab, (n, SHAPE.batch, SHAPE.seq + 1))


def test_replayed_steps_equal_the_ops_run_one_by_one(device):
    init, data = _init(), _batches(3)
    replayed = TrainingStep(device, SHAPE, upload_state(device, SHAPE, init))
    eager = TrainingStep(device, SHAPE, upload_state(device, SHAPE, init))
    for b in data:
        replayed.step(b[:, :-1], b[:, 1:])
        eager.step(b[:, :-1], b[:, 1:], eager=True)
        assert replayed.read_loss() == eager.read_loss()
    for name, _ in SHAPE.parameters():
        for what in ("p", "m", "v", "g"):
            a, b = getattr(replayed.state[name], what).numpy(), getattr(eager.state[name], what).numpy()
            np.testing.assert_array_equal(a, b, err_msg=f"{name}.{what}")
    ops, dispatches, barriers = replayed.capture.counts
    assert ops > 60 and dispatches >= ops and barriers < dispatches


def test_steps_track_torchs_eager_step(device):
    torch = pytest.importorskip("torch", reason="the oracle is torch's eager step on the CPU")
    from helios.harness.workloads.train import adapters
    from helios.harness.workloads.train.config import GATE_GRAD_RTOL, GATE_LOSS_RTOL, TrainConfig
    from helios.harness.workloads.train.model import GPT

    cfg = TrainConfig(layers=SHAPE.layers, d_model=SHAPE.d, heads=SHAPE.heads, seq=SHAPE.seq, batch=SHAPE.batch,
                      vocab=SHAPE.vocab)  # fmt: skip
    model = GPT(cfg)
    init = _init()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in init.items()})
    settings = AdamWSettings()
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, betas=settings.betas,
                            weight_decay=settings.weight_decay)  # fmt: skip
    step = TrainingStep(device, SHAPE, upload_state(device, SHAPE, init), settings)
    for i, b in enumerate(_batches(4)):
        x, y = b[:, :-1], b[:, 1:]
        step.step(x, y)
        loss = model(torch.from_numpy(x), torch.from_numpy(y), adapters.TorchOps())
        loss.backward()
        if i == 0:  # every gradient, before clipping, as the suite's gate measures it
            for name, p in model.named_parameters():
                want = p.grad.double().numpy()
                got = step.state[name].g.numpy().astype(np.float64)
                rel = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-12)
                assert rel <= GATE_GRAD_RTOL, f"{name}: relative difference {rel:.3g}"
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), settings.max_norm))
        opt.step()
        opt.zero_grad()
        assert abs(step.read_loss() - float(loss)) <= GATE_LOSS_RTOL * abs(float(loss)), f"step {i}"
        assert abs(step.read_norm() - norm) <= 0.02 * norm, f"step {i}: norm {step.read_norm()} vs {norm}"
    for name, p in model.named_parameters():  # what four AdamW steps moved each parameter by
        want = p.detach().double().numpy() - init[name]
        got = step.state[name].p.numpy().astype(np.float64) - init[name]
        if name.endswith("qkv.bias"):  # K's bias has a zero gradient (softmax ignores a shift): Adam steps on noise
            keep = np.r_[0 : SHAPE.d, 2 * SHAPE.d : 3 * SHAPE.d]
            got, want = got[keep], want[keep]
        rel = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert rel <= 0.1, f"{name}: the update differs by {rel:.3g} of its norm"


def test_what_a_training_step_refuses(device):
    state = upload_state(device, SHAPE, _init())
    del state.params["lnf.bias"]
    with pytest.raises(ValueError, match="lnf.bias"):
        TrainingStep(device, SHAPE, state)
    with pytest.raises(ValueError, match="multiple of heads"):
        TrainingStep(device, GPTShape(96, 64, 3, 1, 8, 1), upload_state(device, GPTShape(96, 64, 3, 1, 8, 1), {
            n: np.zeros(d, np.float32) for n, d in GPTShape(96, 64, 3, 1, 8, 1).parameters()}))  # fmt: skip
    step = TrainingStep(device, SHAPE, upload_state(device, SHAPE, _init()))
    with pytest.raises(TypeError, match="integer host data"):
        step.step(np.zeros((SHAPE.batch, SHAPE.seq)), np.zeros((SHAPE.batch, SHAPE.seq)))
    with pytest.raises(ValueError, match="shape"):
        step.step(np.zeros((SHAPE.batch, SHAPE.seq + 1), np.int64), np.zeros((SHAPE.batch, SHAPE.seq), np.int64))
    good = np.zeros((SHAPE.batch, SHAPE.seq), np.int64)
    step.step(good, good)
    before = {k: getattr(step.state.flat, k).numpy().copy() for k in ("p", "m", "v", "copy")}
    bad = np.full((SHAPE.batch, SHAPE.seq), SHAPE.vocab, np.int64)  # past the vocabulary: a NaN loss, said
    step.step(bad, good)
    assert np.isnan(step.read_loss()) and np.isnan(step.read_norm())
    for k, want in before.items():  # and nothing updated
        np.testing.assert_array_equal(getattr(step.state.flat, k).numpy().view(np.uint8), want.view(np.uint8), k)
    step.step(good, good)  # the next good batch trains on
    assert np.isfinite(step.read_loss())
    assert not np.array_equal(step.state.flat.p.numpy(), before["p"])


def test_every_op_is_of_one_kind_and_split_times_each(device):
    from helios.train_step import OP_KINDS

    step = TrainingStep(device, SHAPE, upload_state(device, SHAPE, _init()))
    total = 0
    for kind in OP_KINDS:  # each op recorded under exactly one kind
        step._only = kind
        with device.capture() as cap:
            step.record()
        assert cap.counts[0] > 0, kind
        total += cap.counts[0]
    step._only = None
    assert total == step.capture.counts[0]
    split = step.split(iters=1, warmup=0)
    assert list(split) == [*OP_KINDS, "step"]
    assert all(v >= 0.0 for v in split.values())
