#!/usr/bin/env python3
"""Which op makes a helios.torch training run drift from torch's: gradients of the
`helios suite train` model at states reached by torch_eager training (after
--at steps each), computed with five sets of ops and compared per parameter with
an fp32 reference (products and attention in fp32 from the same bf16-rounded
inputs):

  torch_bf16     the suite's torch_eager ops
  helios         every linear and attention through helios.torch
  helios_linear  Helios linears, torch attention
  helios_attn    torch linears, Helios attention

Prints, per state: the loss of each, the overall gradient error vs fp32
(||g - g32|| / ||g32|| over all parameters) and the parameters with the largest
relative errors for helios beside torch_bf16's for the same parameter."""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from helios.harness.train import TrainConfig, build, lock_numerics, markov_stream


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--at", default="0,8,16", help="torch_eager steps before each comparison (default 0,8,16)")
    p.add_argument("--top", type=int, default=6, help="parameters listed per state (default 6)")
    args = p.parse_args()
    lock_numerics(torch)
    cfg = TrainConfig()
    bf16 = torch.bfloat16
    GPT, TorchOps, HeliosOps, _, _, _ = build(torch)

    class Fp32Ops:
        name = "fp32"

        def linear(self, x, w, b=None, act=None):
            y = F.linear(x.to(bf16).float(), w.to(bf16).float(), None if b is None else b.to(bf16).float())
            return F.gelu(y, approximate="tanh") if act else y

        def attention(self, q, k, v, causal=True):
            return F.scaled_dot_product_attention(
                q.to(bf16).float(), k.to(bf16).float(), v.to(bf16).float(), is_causal=causal
            )

    class Mixed:
        def __init__(self, lin, att, name):
            self.lin, self.att, self.name = lin, att, name

        def linear(self, *a, **k):
            return self.lin.linear(*a, **k)

        def attention(self, q, k, v, causal=True):
            return self.att.attention(q, k, v, causal=causal)

    t16, h = TorchOps(), HeliosOps()
    opsets = {
        "torch_bf16": t16,
        "helios": h,
        "helios_linear": Mixed(h, t16, "helios_linear"),
        "helios_attn": Mixed(t16, h, "helios_attn"),
    }
    steps = sorted(int(s) for s in args.at.split(","))
    data = torch.from_numpy(markov_stream(cfg.vocab, cfg.batch * (steps[-1] + 1), cfg.seq + 1, cfg.seed)).cuda()
    torch.manual_seed(cfg.seed)
    model = GPT(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1)

    def batch(i: int) -> tuple:
        rows = data[i * cfg.batch : (i + 1) * cfg.batch]
        return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()

    def grads(ops, xb, yb) -> tuple:
        model.zero_grad(set_to_none=True)
        loss = model(xb, yb, ops)
        loss.backward()
        return float(loss.detach()), {n: q.grad.detach().float().clone() for n, q in model.named_parameters()}

    done = 0
    for at in steps:
        while done < at:  # torch_eager training up to this state
            xb, yb = batch(done)
            model.zero_grad(set_to_none=True)
            model(xb, yb, t16).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            done += 1
        xb, yb = batch(at)
        l32, g32 = grads(Fp32Ops(), xb, yb)
        norm32 = torch.sqrt(sum((g**2).sum() for g in g32.values()))
        print(f"== state after {at} torch_eager steps: fp32 loss {l32:.5f}")
        per: dict = {}
        for name, ops in opsets.items():
            loss, g = grads(ops, xb, yb)
            total = torch.sqrt(sum(((g[n] - g32[n]) ** 2).sum() for n in g32)) / norm32
            per[name] = {n: float((g[n] - g32[n]).norm() / (g32[n].norm() + 1e-12)) for n in g32}
            print(f"  {name:14s} loss {loss:.5f} ({(loss - l32) / l32:+.2e})  grad err vs fp32 {float(total):.3e}")
        worst = sorted(per["helios"], key=per["helios"].get, reverse=True)[: args.top]
        print("  worst parameters (rel err vs fp32): " + "name | " + " | ".join(opsets))
        for n in worst:
            print(f"    {n} | " + " | ".join(f"{per[k][n]:.2e}" for k in opsets))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
