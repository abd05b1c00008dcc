"""helios.torch's custom operators (torch.library): schemas, fake implementations,
autograd formulas and torch.compile without graph breaks.

Without a CUDA GPU (CI) the ops get CPU reference kernels registered here (torch's
own products and attention, float64): what is tested then is everything around
the kernels — the schemas, the fake (meta) shapes, and the backward formulas
(gradcheck against finite differences, every transpose combination). On a CUDA
GPU that Helios runs on, torch.library.opcheck runs on the real kernels in
float16 and bfloat16, and a small decoder built from helios.torch ops compiles
with fullgraph=True and matches eager."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from helios.torch import _library  # noqa: E402

CUDA = torch.cuda.is_available()


# ---- CPU reference kernels (registered only where there is no CUDA) -------------------------------


def _op(t, trans):
    return t.t() if trans else t


def _attention_ref(q, k, v, causal, scale):
    s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if causal:
        n, m = s.shape[-2:]
        s = s.masked_fill(torch.ones(n, m, dtype=torch.bool).triu(m - n + 1), float("-inf"))
    lse = torch.logsumexp(s.float(), -1)
    return torch.softmax(s, -1) @ v, lse


@pytest.fixture(scope="module")
def cpu_kernels():
    if CUDA:
        pytest.skip("a CUDA device is here: the real kernels are tested instead")
    lib = torch.library.Library("helios", "IMPL")  # test-only kernels, dropped with lib

    def mm(a, b, ta, tb):
        return _op(a, ta) @ _op(b, tb)

    def attention_backward(q, k, v, out, g, lse, causal, scale):
        # written out (a kernel runs below autograd: nothing inside it records a graph)
        c = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
        s = (q @ k.transpose(-1, -2)) * c
        if causal:
            n, m = s.shape[-2:]
            s = s.masked_fill(torch.ones(n, m, dtype=torch.bool).triu(m - n + 1), float("-inf"))
        p = torch.softmax(s, -1)
        dp = g @ v.transpose(-1, -2)
        ds = p * (dp - (g * out).sum(-1, keepdim=True))
        return (ds @ k) * c, (ds.transpose(-1, -2) @ q) * c, p.transpose(-1, -2) @ g

    lib.impl("mm", mm, "CPU")
    lib.impl("mm2", lambda a1, b1, ta1, tb1, a2, b2, ta2, tb2: (mm(a1, b1, ta1, tb1), mm(a2, b2, ta2, tb2)), "CPU")
    lib.impl("linear", lambda x, w, b, act: x @ w.t() + (0 if b is None else b), "CPU")
    lib.impl(
        "attention",
        lambda q, k, v, causal, scale: tuple(t.clone() for t in _attention_ref(q, k, v, causal, scale)),
        "CPU",
    )
    lib.impl("attention_backward", attention_backward, "CPU")
    kernel_dtypes = _library.OP_DTYPES
    _library.OP_DTYPES = {**kernel_dtypes, torch.float64: "float64"}  # what these kernels compute in
    yield
    _library.OP_DTYPES = kernel_dtypes
    lib._destroy()


def f64(*shape, grad=True):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)


# ---- around the kernels (any machine) -------------------------------------------------------------


def test_every_op_has_a_schema_and_a_fake():
    for op in _library.OPS:
        schema = str(op._opoverload._schema)
        assert schema.startswith("helios::"), schema
    a, b = (torch.empty(n, 3, device="meta", dtype=torch.float16) for n in (5, 7))
    assert torch.ops.helios.mm(a, b, False, True).shape == (5, 7)
    assert torch.ops.helios.mm(a, b.t(), False, False).shape == (5, 7)
    assert torch.ops.helios.linear(a, b, None, "relu").shape == (5, 7)
    q = torch.empty(2, 3, 4, 8, device="meta", dtype=torch.float16)
    o, lse = torch.ops.helios.attention(q, q, q, True, None)
    assert o.shape == q.shape and o.dtype == torch.float16 and lse.shape == (2, 3, 4) and lse.dtype == torch.float32


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_mm_backward_matches_finite_differences(cpu_kernels, ta, tb):
    a = f64(*((4, 3) if ta else (3, 4)))
    b = f64(*((5, 4) if tb else (4, 5)))
    assert torch.autograd.gradcheck(lambda x, y: _library.mm(x, y, ta, tb), (a, b))
    # one operand wanting its gradient: a single product, not the pair
    assert torch.autograd.gradcheck(lambda x: _library.mm(x, b.detach(), ta, tb), (a,))


@pytest.mark.parametrize("bias", [True, False])
def test_linear_backward_matches_finite_differences(cpu_kernels, bias):
    x, w = f64(6, 4), f64(3, 4)
    args = (x, w) + ((f64(3),) if bias else ())
    assert torch.autograd.gradcheck(lambda x, w, *b: _library.linear(x, w, b[0] if b else None, None), args)


def test_linear_with_a_fused_activation_refuses_a_backward(cpu_kernels):
    y = _library.linear(f64(2, 4), f64(3, 4), None, "relu")
    with pytest.raises(RuntimeError, match="keeps the pre-activation"):
        y.sum().backward()


@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_matches_finite_differences(cpu_kernels, causal):
    q, k, v = f64(1, 2, 3, 4), f64(1, 2, 5, 4), f64(1, 2, 5, 4)
    assert torch.autograd.gradcheck(lambda q, k, v: _library.attention(q, k, v, causal, 0.5)[0], (q, k, v))


def test_mm2_backward_matches_finite_differences(cpu_kernels):
    a, b, c, d = f64(3, 4), f64(5, 4), f64(4, 2), f64(4, 6)
    assert torch.autograd.gradcheck(lambda a, b, c, d: _library.mm2(a, b, False, True, c, d, True, False), (a, b, c, d))


def test_opcheck_on_the_reference_kernels(cpu_kernels):
    """The registration itself (schema, fake, autograd, AOT dispatch) with the CPU
    reference kernels; the real kernels' opcheck runs on a CUDA GPU."""
    a, b = f64(3, 4), f64(4, 5)
    q, k = f64(1, 2, 3, 4), f64(1, 2, 5, 4)
    cases = [
        (_library.mm, (a, b, False, False)),
        (_library.mm2, (a, b, False, False, b, a, True, True)),
        (_library.linear, (a, f64(5, 4), f64(5), None)),
        (_library.attention, (q, k, k.detach().clone().requires_grad_(True), True, None)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)


# ---- on a CUDA GPU that Helios runs on -------------------------------------------------------------


def _cuda_device():
    if not CUDA:
        pytest.skip("needs a CUDA GPU (the real kernels; CI runs the reference kernels above)")
    import helios.torch as ht

    try:
        ht.device_for(torch.empty(1, device="cuda"))
    except Exception as e:  # noqa: BLE001 -- any reason Helios cannot serve this GPU is a skip reason
        pytest.skip(f"Helios cannot run on this CUDA GPU: {e}")
    return ht


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_opcheck_on_the_gpu(dtype):
    _cuda_device()
    dt = getattr(torch, dtype)

    def t(*shape):
        return torch.randn(*shape, device="cuda", dtype=dt, requires_grad=True)

    a, b = t(64, 32), t(32, 48)
    q, k, v = t(1, 2, 64, 64), t(1, 2, 80, 64), t(1, 2, 80, 64)
    g = torch.randn(1, 2, 64, 64, device="cuda", dtype=dt)
    o, lse = _library.attention(q, k, v, False, None)
    cases = [
        (_library.mm, (a, b, False, False)),
        (_library.mm, (a, b.detach().t().contiguous(), False, True)),
        (_library.mm2, (a, b, False, False, b, a, True, True)),
        (_library.linear, (a, t(48, 32), t(48), None)),
        (_library.linear, (a.detach(), t(48, 32).detach(), None, "gelu_tanh")),
        (_library.attention, (q, k, v, False, 0.2)),
        (_library.attention, (q, t(1, 2, 64, 64), t(1, 2, 64, 64), True, None)),
        (_library.attention_backward, (q.detach(), k.detach(), v.detach(), o.detach(), g, lse.detach(), False, None)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args, atol=2e-2, rtol=2e-2)


class TinyDecoder(torch.nn.Module):
    """Two pre-LayerNorm blocks from helios.torch.linear and attention."""

    def __init__(self, d=128, heads=2, layers=2, dtype=torch.float16):
        super().__init__()
        self.heads = heads
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            blk = torch.nn.ModuleDict(
                {
                    "ln1": torch.nn.LayerNorm(d),
                    "qkv": torch.nn.Linear(d, 3 * d),
                    "out": torch.nn.Linear(d, d),
                    "ln2": torch.nn.LayerNorm(d),
                    "up": torch.nn.Linear(d, 4 * d),
                    "down": torch.nn.Linear(4 * d, d),
                }
            )
            self.blocks.append(blk)
        self.to(device="cuda", dtype=dtype)

    def forward(self, x, ht):
        b, s, d = x.shape
        for blk in self.blocks:
            h = blk["ln1"](x)
            qkv = ht.linear(h, blk["qkv"].weight, blk["qkv"].bias)
            q, k, v = qkv.reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
            a = ht.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)
            x = x + ht.linear(a.transpose(1, 2).reshape(b, s, d), blk["out"].weight, blk["out"].bias)
            h = ht.linear(blk["ln2"](x), blk["up"].weight, blk["up"].bias, activation="gelu_tanh")
            x = x + ht.linear(h, blk["down"].weight, blk["down"].bias)
        return x


def test_a_decoder_compiles_with_fullgraph_and_matches_eager():
    ht = _cuda_device()
    torch.manual_seed(0)
    model = TinyDecoder()
    x = torch.randn(2, 64, 128, device="cuda", dtype=torch.float16)
    eager = model(x, ht)
    compiled = torch.compile(lambda x: model(x, ht), fullgraph=True)
    got = compiled(x)
    torch.testing.assert_close(got, eager, atol=2e-2, rtol=2e-2)
    got.float().sum().backward()  # the compiled backward runs Helios's backward ops
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
