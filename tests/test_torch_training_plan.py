"""helios.torch.training_plan on CUDA: the suite's GPT and its AdamW bound in memory
torch and Helios share, a step as one capture against torch's own eager step (the
suite's gate), the model's state visible to torch between steps, refusals."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="helios.torch needs torch")
if not torch.cuda.is_available():
    pytest.skip("training_plan binds CUDA tensors: this machine has no CUDA", allow_module_level=True)

from helios.harness.workloads.train import adapters  # noqa: E402
from helios.harness.workloads.train.config import GATE_GRAD_RTOL, GATE_LOSS_RTOL, TrainConfig  # noqa: E402
from helios.harness.workloads.train.model import GPT  # noqa: E402
from helios.torch import training_plan  # noqa: E402

CFG = TrainConfig(layers=2, d_model=128, heads=2, seq=64, batch=2, vocab=96)


def _pair():
    torch.manual_seed(0)
    ref = GPT(CFG).cuda()
    mine = GPT(CFG).cuda()
    mine.load_state_dict(ref.state_dict())
    return ref, mine


def _opt(m):
    return torch.optim.AdamW(m.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)


def test_a_plan_step_is_torchs_step():
    ref, mine = _pair()
    ro, mo = _opt(ref), _opt(mine)
    x = torch.randint(0, CFG.vocab, (CFG.batch, CFG.seq), device="cuda")
    y = torch.randint(0, CFG.vocab, (CFG.batch, CFG.seq), device="cuda")
    plan = training_plan(mine, mo, x, y)
    for step in range(3):
        loss_ref = ref(x, y, adapters.TorchOps())
        loss_ref.backward()
        grads = {n: p.grad.clone() for n, p in ref.named_parameters()}
        norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        ro.step()
        ro.zero_grad()
        loss = plan(x, y)
        assert abs(float(loss) - float(loss_ref)) <= GATE_LOSS_RTOL * abs(float(loss_ref)), step
        assert abs(float(plan.grad_norm()) - float(norm)) <= 0.02 * float(norm), step
        if step == 0:
            for n, p in mine.named_parameters():  # torch sees the plan's gradients in .grad
                rel = float((p.grad - grads[n]).norm() / (grads[n].norm() + 1e-12))
                assert rel <= GATE_GRAD_RTOL, f"{n}: {rel:.3g}"
    # the model torch holds is the trained one: state_dict and evaluation see it, no copies
    sd = mine.state_dict()
    assert sd["tok.weight"].data_ptr() == mine.tok.weight.data_ptr()
    moved = (mine.tok.weight - ref.tok.weight).norm() / (ref.tok.weight.norm())
    assert float(moved) < 0.02
    assert mo.state[mine.tok.weight]["exp_avg"].abs().sum() > 0


def test_what_a_training_plan_refuses():
    _, mine = _pair()
    x = torch.randint(0, CFG.vocab, (CFG.batch, CFG.seq), device="cuda")
    with pytest.raises(ValueError, match="torch.optim.AdamW"):
        training_plan(mine, torch.optim.SGD(mine.parameters(), lr=0.1), x, x)
    with pytest.raises(ValueError, match="amsgrad"):
        training_plan(mine, torch.optim.AdamW(mine.parameters(), amsgrad=True), x, x)
    with pytest.raises(ValueError, match="not the training suite's GPT"):
        training_plan(torch.nn.Linear(4, 4).cuda(), _opt(mine), x, x)
    with pytest.raises(TypeError, match="CUDA tensor"):
        training_plan(mine, _opt(mine), x.cpu(), x.cpu())
    plan = training_plan(mine, _opt(mine), x, x)
    with pytest.raises(ValueError, match="as recorded"):
        plan(x[:, :-1], x[:, :-1])
    mine.lnf.weight.data = mine.lnf.weight.data.clone()
    with pytest.raises(RuntimeError, match="lnf.weight"):
        plan(x, x)


def test_averaged_gradients_run_as_two_halves_around_one_all_reduce(tmp_path):
    """One rank of torch.distributed (NCCL): the halves and the all-reduce between them
    run, and a one-rank average is the rank's own step."""
    import torch.distributed as dist

    dist.init_process_group("nccl", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        ref, mine = _pair()
        x = torch.randint(0, CFG.vocab, (CFG.batch, CFG.seq), device="cuda")
        y = torch.randint(0, CFG.vocab, (CFG.batch, CFG.seq), device="cuda")
        alone = training_plan(ref, _opt(ref), x, y)
        averaged = training_plan(mine, _opt(mine), x, y, average_gradients=True)
        assert averaged.step.halves is not None
        for _ in range(2):
            a, b = float(alone(x, y)), float(averaged(x, y))
            assert a == b
        assert averaged.gpu_ms() > 0.0
        assert torch.equal(ref.tok.weight, mine.tok.weight)
    finally:
        dist.destroy_process_group()
