"""helios.torch: Helios ops on torch CUDA tensors, forward against float64 and
gradients against torch's own autograd. Without CUDA (CI on lavapipe) only the
refusals run: every other test says why it is skipped."""

from __future__ import annotations

import gc
import os

import pytest

import helios

torch = pytest.importorskip("torch", reason="torch is not installed")
ht = pytest.importorskip("helios.torch", reason="helios.torch needs torch")
from helios.torch._group import Group  # noqa: E402  (after the skip: needs torch)
from helios.torch._staging import handed_back  # noqa: E402
from helios.torch._state import ACTIVATIONS, RUNTIME  # noqa: E402


def test_refusals_name_what_is_wrong():
    cpu = torch.ones(4, 4, dtype=torch.float16)
    with pytest.raises(TypeError, match="must be a CUDA tensor, got one on cpu"):
        ht.matmul(cpu, cpu)
    with pytest.raises(TypeError, match="must be a torch.Tensor, not list"):
        ht.linear([1.0], cpu)
    with pytest.raises(TypeError, match="must be a CUDA tensor"):
        ht.attention(cpu[None, None], cpu[None, None], cpu[None, None])


@pytest.fixture()
def cuda(device):
    if not torch.cuda.is_available():
        pytest.skip("torch.cuda is not available here (no CUDA driver or GPU)")
    if not device.info.get("external_memory_fd"):
        pytest.skip("the Vulkan device offers no exportable memory (VK_KHR_external_memory_fd)")
    return torch.device("cuda")


def _close(got: torch.Tensor, want: torch.Tensor, rel: float) -> None:
    """max |got - want| within rel of max |want| (fp16 outputs, fp32 accumulation)."""
    err = (got.double() - want.double()).abs().max().item()
    scale = want.double().abs().max().item() or 1.0
    assert err <= rel * scale, f"max error {err:.3g} vs scale {scale:.3g}"


# float16, and bfloat16 (fewer significant bits: looser bounds, 8 vs 11 bits)
DTYPES = [(torch.float16, 1.0), (torch.bfloat16, 8.0)]


def test_dtype_and_shape_refusals_on_cuda(cuda):
    f32 = torch.ones(8, 8, device=cuda, dtype=torch.float32)
    with pytest.raises(TypeError, match="takes float16 or bfloat16"):
        ht.matmul(f32, f32)
    mixed = torch.ones(8, 8, device=cuda, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="share one dtype"):
        ht.matmul(mixed, mixed.half())
    h = torch.ones(8, 4, device=cuda, dtype=torch.float16)
    with pytest.raises(ValueError, match="do not chain"):
        ht.matmul(h, h)
    with pytest.raises(ValueError, match="activation must be one of"):
        ht.linear(h, h, activation="tanh")


@pytest.mark.parametrize("dtype,loose", DTYPES)
def test_matmul_forward_and_gradients(cuda, dtype, loose):
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(96, 72, device=cuda, generator=g).to(dtype).requires_grad_(True)
    b = torch.randn(72, 40, device=cuda, generator=g).to(dtype).requires_grad_(True)
    y = ht.matmul(a, b)
    assert y.is_cuda and y.dtype == dtype and y.shape == (96, 40)
    _close(y, a.double() @ b.double(), 2e-3 * loose)
    go = torch.randn(96, 40, device=cuda, generator=g).to(dtype)
    y.backward(go)
    assert a.grad.dtype == dtype and b.grad.dtype == dtype
    _close(a.grad, go.double() @ b.double().T, 2e-3 * loose)
    _close(b.grad, a.double().T @ go.double(), 2e-3 * loose)


@pytest.mark.parametrize("dtype,loose", DTYPES)
@pytest.mark.parametrize("activation", [None, "relu", "gelu_tanh", "silu"])
def test_linear_forward_and_gradients(cuda, activation, dtype, loose):
    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(3, 50, 64, device=cuda, generator=g).to(dtype).requires_grad_(True)
    w = (torch.randn(80, 64, device=cuda, generator=g) / 8).to(dtype).requires_grad_(True)
    bias = torch.randn(80, device=cuda, generator=g).to(dtype).requires_grad_(True)
    act = {None: lambda z: z, "relu": torch.relu, "silu": torch.nn.functional.silu}.get(
        activation, lambda z: torch.nn.functional.gelu(z, approximate="tanh")
    )
    y = ht.linear(x, w, bias, activation=activation)
    assert y.shape == (3, 50, 80)
    xr, wr, br = (t.detach().double().requires_grad_(True) for t in (x, w, bias))
    want = act(torch.nn.functional.linear(xr, wr, br))
    assert y.dtype == dtype
    _close(y, want, 5e-3 * loose)
    go = torch.randn(3, 50, 80, device=cuda, generator=g).to(dtype)
    y.backward(go)
    want.backward(go.double())
    _close(x.grad, xr.grad, 1e-2 * loose)
    _close(w.grad, wr.grad, 1e-2 * loose)
    _close(bias.grad, br.grad, 1e-2 * loose)


@pytest.mark.parametrize("dtype,loose", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_forward_and_gradients(cuda, causal, dtype, loose):
    g = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn(2, 4, 130, 64, device=cuda, generator=g).to(dtype).requires_grad_(True) for _ in range(3))
    o = ht.attention(q, k, v, causal=causal)
    assert o.dtype == dtype
    qr, kr, vr = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    want = torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
    _close(o, want, 5e-3 * loose)
    go = torch.randn_like(o)
    o.backward(go)
    want.backward(go.double())
    for got, ref in ((q.grad, qr.grad), (k.grad, kr.grad), (v.grad, vr.grad)):
        _close(got, ref, 2e-2 * loose)


def test_outputs_are_torch_memory_helios_wrote(cuda):
    """The result is handed over with no copy: its memory is a Helios export."""
    a = torch.ones(64, 64, device=cuda, dtype=torch.float16)
    y = ht.matmul(a, a)
    assert torch.all(y == 64)
    dev = ht.device_for(a)
    assert dev.telemetry()["live_exports"] >= 1


def test_results_are_pooled_once_torch_frees_them(cuda):
    """A result torch has freed is written again by a later op of its shape; one
    torch still holds never is."""
    a = torch.ones(32, 32, device=cuda, dtype=torch.float16)
    first = ht.matmul(a, a)
    ptr = first.data_ptr()
    second = ht.matmul(a, 2 * a)
    assert second.data_ptr() != ptr and torch.all(first == 32) and torch.all(second == 64)
    del first
    third = ht.matmul(a, 3 * a)
    assert third.data_ptr() == ptr and torch.all(third == 96) and torch.all(second == 64)


def _semaphore_or_skip(t):
    how = ht.ordering(t)
    if how != "semaphore":
        pytest.skip(f"ops are ordered by a host wait here ({how})")


@pytest.fixture
def poisoned(monkeypatch):
    """Ordered ops poison their outputs (NaN) first, as synchronous calls always do:
    a read that overtook Helios then sees NaN, not an earlier call's equal result."""
    monkeypatch.setenv("HELIOS_POISON_ORDERED", "1")


def test_no_host_wait_and_the_stream_still_sees_helios_results(cuda, poisoned):
    """A long Helios product, then torch reads its result at once: the stream waits
    for Helios through the shared semaphore (the output is poisoned to NaN first,
    so a read that overtook Helios would not match)."""
    a = torch.full((8192, 8192), 0.5, device=cuda, dtype=torch.float16)
    _semaphore_or_skip(a)
    for _ in range(3):
        y = ht.matmul(a, a)
        total = y.float().sum()  # queued on the stream right behind the product
        assert total.item() == pytest.approx(8192 * 8192 * 2048.0)


def test_helios_sees_what_torch_queued_before(cuda):
    """torch writes the input on its stream and calls Helios at once: Helios starts
    only after the stream got there."""
    a = torch.empty((4096, 4096), device=cuda, dtype=torch.float16)
    _semaphore_or_skip(a)
    for k in range(1, 4):
        a.fill_(float(k))  # queued, not finished, when the op is called
        y = ht.matmul(a, torch.ones((4096, 64), device=cuda, dtype=torch.float16))
        assert torch.all(y == 4096.0 * k).item()


@pytest.mark.timing  # a race the planted fault must lose: another process on the GPU changes who wins
def test_the_ordering_test_catches_a_missing_wait(cuda, monkeypatch, poisoned):
    """With the stream's wait removed, an immediate read sees the poisoned output:
    the test above would fail, so it tests the wait. The product is long (16384 x
    4096 x 65536: ~9 TFLOP, tens of ms) and tried up to five times: the GPU
    time-slices the CUDA and Vulkan contexts, and a product shorter than a time slice
    (on the H100 an 8192^3 one, ~2 ms, sometimes was) can finish before the read that
    was queued behind nothing runs."""
    a = torch.full((16384, 65536), 0.5, device=cuda, dtype=torch.float16)
    b = torch.full((65536, 4096), 0.5, device=cuda, dtype=torch.float16)
    _semaphore_or_skip(a)
    monkeypatch.setattr(helios.Device, "_cuda_wait", lambda self, stream, value: None)
    finished = 16384 * 4096 * 65536 * 0.25
    early = []
    for _ in range(5):
        y = ht.matmul(a, b)
        early.append(y.float().sum().item())
        torch.cuda.synchronize()
        if early[-1] != pytest.approx(finished):
            break
    ht.device_for(a).telemetry()  # the device is still usable
    assert early[-1] != pytest.approx(finished), f"every early read saw the finished product: {early}"


def test_the_host_wait_ordering_gives_the_same_results(cuda, monkeypatch, poisoned):
    """HELIOS_DISABLE_SEMAPHORE_ORDERING=1: every group waits for torch's stream on
    the host and hands results back finished (the path of a device without the shared
    semaphore); a linear, an attention and an MLP block, forward and backward, equal
    the semaphore path's bit for bit (outputs poisoned first: a result handed back
    unfinished would show)."""
    g = torch.Generator(device="cuda").manual_seed(9)
    x = torch.randn(300, 256, device=cuda, generator=g).half()
    w1, w2 = (torch.randn(512, 256, device=cuda, generator=g).half() * 0.05 for _ in range(2))
    b1 = torch.randn(512, device=cuda, generator=g).half()
    qkv = [torch.randn(2, 4, 130, 64, device=cuda, generator=g).half() for _ in range(3)]

    def run() -> list:
        xs, w1s, w2s, b1s = (t.detach().clone().requires_grad_(True) for t in (x, w1, w2, b1))
        qs = [t.detach().clone().requires_grad_(True) for t in qkv]
        y = ht.linear(xs, w1s, b1s, activation="gelu_tanh")
        o = ht.attention(*qs, causal=True)
        z = ht.mlp(xs, w1s, b1s, w2s.t().contiguous(), None, activation="gelu_tanh")
        (y.float().sum() + o.float().square().sum() + z.float().sum()).backward()
        return [y, o, z] + [t.grad for t in (xs, w1s, w2s, b1s, *qs)]

    want = run()
    monkeypatch.setenv("HELIOS_DISABLE_SEMAPHORE_ORDERING", "1")
    assert ht.ordering(x) == "host sync: HELIOS_DISABLE_SEMAPHORE_ORDERING=1"
    got = run()
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_attention_backward_runs_on_helios(cuda):
    """The gradient of ht.attention comes from Helios's backward kernels (one more
    attention call on the device), not from a torch recomputation."""
    g = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = (torch.randn(1, 2, 70, 64, device=cuda, generator=g).half().requires_grad_(True) for _ in range(3))
    dev = ht.device_for(q)
    o = ht.attention(q, k, v, causal=True)
    before = dev.telemetry()["attentions"]
    o.float().sum().backward()
    torch.cuda.synchronize()
    assert dev.telemetry()["attentions"] == before + 1
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


def test_a_result_feeds_the_next_op_in_place(cuda):
    """A Helios result handed to the next op (whole, or reshaped) is read where it is,
    not copied; once torch frees it, its address no longer names it."""
    g = torch.Generator(device=cuda).manual_seed(7)
    a = torch.randn(64, 64, device=cuda, dtype=torch.float16, generator=g) / 8
    y = ht.matmul(a, a)
    dev = ht.device_for(a)
    h = handed_back(dev, y)
    assert h is not None and h.exports >= 1 and tuple(h.shape) == (64, 64)
    assert handed_back(dev, y.reshape(32, 128)) is not None
    assert handed_back(dev, y[1:]) is None  # not whole: copied as before
    z = ht.matmul(y, a)
    torch.testing.assert_close(z.float(), y.float() @ a.float(), atol=2e-3, rtol=1e-2)
    ptr = y.data_ptr()
    del y, h
    other = torch.empty(64, 64, device=cuda, dtype=torch.float16)
    if other.data_ptr() == ptr:  # the same address reused by torch: never taken for the old result
        assert handed_back(dev, other) is None


def test_gradient_products_are_one_group_and_ordered(cuda, monkeypatch):
    """Both gradient products of a product's backward go to Helios as one group (one
    CUDA <-> Vulkan hop pair, the second waiting for the first on the Vulkan side);
    torch reading both at once, with no host sync, sees both finished."""
    a = torch.full((4096, 4096), 0.5, device=cuda, dtype=torch.float16, requires_grad=True)
    b = torch.full((4096, 4096), 0.25, device=cuda, dtype=torch.float16, requires_grad=True)
    _semaphore_or_skip(a)
    groups = RUNTIME.groups
    groups.clear()
    y = ht.matmul(a, b)
    y.backward(torch.ones_like(y))
    assert list(groups) == [1, 2]
    assert torch.all(a.grad == 1024.0).item()  # ones @ b^T
    assert torch.all(b.grad == 2048.0).item()  # a^T @ ones


def test_linear_with_activation_keeps_its_pre_activation(cuda, monkeypatch):
    """Training through an activation: the forward's one product, then the backward's
    two as one group (no recomputed pre-activation); inference keeps the fused epilogue."""
    x = torch.randn(64, 32, device=cuda, dtype=torch.float16, requires_grad=True)
    w = torch.randn(48, 32, device=cuda, dtype=torch.float16, requires_grad=True)
    _semaphore_or_skip(x)
    groups = RUNTIME.groups
    groups.clear()
    ht.linear(x, w, activation="gelu_tanh").float().sum().backward()
    assert list(groups) == [1, 2]
    with torch.no_grad():
        y = ht.linear(x, w, activation="gelu_tanh")
    want = torch.nn.functional.gelu(x.double() @ w.double().T, approximate="tanh")
    torch.testing.assert_close(y.double(), want, atol=2e-2, rtol=1e-2)


def _block_params(cuda, dtype, seed, shapes):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [
        (torch.randn(*s, device=cuda, generator=g) / (8 if len(s) == 2 else 4)).to(dtype).requires_grad_(True)
        for s in shapes
    ]


def _check_grads(params, refs, rel):
    for p, r in zip(params, refs):
        assert p.grad is not None and p.grad.dtype == p.dtype and p.grad.shape == p.shape
        _close(p.grad, r.grad, rel)


@pytest.mark.parametrize("dtype,loose", DTYPES)
@pytest.mark.parametrize("activation", ["gelu_tanh", "relu", "silu"])
def test_mlp_block_forward_and_gradients(cuda, activation, dtype, loose):
    """helios.torch.mlp against torch's composition in float64, every gradient."""
    d, f = 64, 176  # hidden not a multiple of the tiles: tails
    x, wu, bu, wd, bd = _block_params(cuda, dtype, 11, [(3, 37, d), (f, d), (f,), (d, f), (d,)])
    y = ht.mlp(x, wu, bu, wd, bd, activation=activation)
    assert y.shape == x.shape and y.dtype == dtype
    refs = [t.detach().double().requires_grad_(True) for t in (x, wu, bu, wd, bd)]
    act = ACTIVATIONS[activation]
    want = torch.nn.functional.linear(act(torch.nn.functional.linear(refs[0], refs[1], refs[2])), refs[3], refs[4])
    _close(y, want, 5e-3 * loose)
    go = torch.randn_like(y)
    y.backward(go)
    want.backward(go.double())
    _check_grads((x, wu, bu, wd, bd), refs, 1e-2 * loose)
    with torch.no_grad():  # inference: the activation fused in the first product's epilogue
        _close(ht.mlp(x, wu, bu, wd, bd, activation=activation), want.detach(), 5e-3 * loose)


@pytest.mark.parametrize("dtype,loose", DTYPES)
@pytest.mark.parametrize("causal", [True, False])
def test_self_attention_block_forward_and_gradients(cuda, causal, dtype, loose):
    """helios.torch.self_attention against torch's reshape/permute/SDPA composition in
    float64, every gradient (heads split out of the QKV product and merged back by
    Helios's layout copies)."""
    b, s, d, heads = 2, 70, 128, 2
    x, wqkv, bqkv, wo, bo = _block_params(cuda, dtype, 12, [(b, s, d), (3 * d, d), (3 * d,), (d, d), (d,)])
    y = ht.self_attention(x, wqkv, bqkv, wo, bo, heads, causal=causal)
    assert y.shape == x.shape and y.dtype == dtype
    xr, wqkvr, bqkvr, wor, bor = refs = [t.detach().double().requires_grad_(True) for t in (x, wqkv, bqkv, wo, bo)]
    qkv = torch.nn.functional.linear(xr, wqkvr, bqkvr)
    q, k, v = qkv.reshape(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
    a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    want = torch.nn.functional.linear(a.transpose(1, 2).reshape(b, s, d), wor, bor)
    _close(y, want, 1e-2 * loose)
    go = torch.randn_like(y)
    y.backward(go)
    want.backward(go.double())
    _check_grads((x, wqkv, bqkv, wo, bo), refs, 2e-2 * loose)


def test_blocks_are_one_group_each_way(cuda, monkeypatch):
    """Each block op is one group per direction (one CUDA <-> Vulkan hop pair): the
    MLP's forward (product, activation, product) and backward (four products and the
    activation's backward); attention's forward (QKV product, attention on its rows,
    the projection) and backward (two products, the attention backward into the QKV
    gradient's rows, two products)."""
    x, wu, bu, wd, bd = _block_params(cuda, torch.float16, 13, [(2, 16, 64), (128, 64), (128,), (64, 128), (64,)])
    _semaphore_or_skip(x)
    groups = RUNTIME.groups
    groups.clear()
    ht.mlp(x, wu, bu, wd, bd).float().sum().backward()
    assert list(groups) == [3, 5]
    groups.clear()
    wqkv, bqkv, wo, bo = _block_params(cuda, torch.float16, 14, [(192, 64), (192,), (64, 64), (64,)])
    ht.self_attention(x, wqkv, bqkv, wo, bo, 2).float().sum().backward()
    assert list(groups) == [3, 5]


def test_block_refusals_name_what_is_wrong(cuda):
    x, wu, bu, wd, bd = _block_params(cuda, torch.float16, 15, [(2, 8, 64), (96, 64), (96,), (64, 96), (64,)])
    with pytest.raises(ValueError, match="w_down is \\(64, 96\\); its in_features must be 192"):
        ht.mlp(x, torch.cat([wu, wu]), None, wd, None)
    with pytest.raises(ValueError, match="activation must be one of"):
        ht.mlp(x, wu, bu, wd, bd, activation=None)
    with pytest.raises(ValueError, match="b_up must have shape \\(96,\\)"):
        ht.mlp(x, wu, bd, wd, bd)
    with pytest.raises(ValueError, match="heads must be a positive int dividing D=64"):
        ht.self_attention(x, torch.cat([wd.T, wd.T, wd.T]), None, wd[:, :64], None, 3)
    with pytest.raises(ValueError, match="w_qkv must be \\(192, 64\\)"):
        ht.self_attention(x, wu, None, wd[:, :64], None, 2)
    with pytest.raises(ValueError, match="must have 3 dimensions"):
        ht.self_attention(x[0], wu, None, wd, None, 2)


def _rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double() - want.double()).norm() / want.double().norm())


def _decoder_reference(x, layers, heads, final, head):
    """The decoder in float64 through torch (the composition helios.torch.decoder fuses)."""
    F = torch.nn.functional
    b, s, d = x.shape
    for ln1w, ln1b, wqkv, bqkv, wo, bo, ln2w, ln2b, wu, bu, wd, bd in layers:
        h = F.layer_norm(x, (d,), ln1w, ln1b)
        q, k, v = F.linear(h, wqkv, bqkv).reshape(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + F.linear(a, wo, bo)
        x = x + F.linear(F.gelu(F.linear(F.layer_norm(x, (d,), ln2w, ln2b), wu, bu), approximate="tanh"), wd, bd)
    return F.linear(F.layer_norm(x, (d,), final[0], final[1]), head)


@pytest.mark.parametrize("dtype,bound", [(torch.float16, 5e-3), (torch.bfloat16, 3e-2)])
def test_decoder_forward_and_gradients(cuda, dtype, bound):
    """helios.torch.decoder (two layers, the final LayerNorm, a head) against torch's
    composition in float64: logits and the gradient of every input."""
    b, s, d, heads, hidden, vocab = 2, 40, 64, 2, 176, 96
    g = torch.Generator(device="cuda").manual_seed(21)

    def rnd(*shape, scale=1.0, dt=torch.float32):
        return (torch.randn(*shape, device=cuda, generator=g) * scale).to(dt).requires_grad_(True)

    layers = [
        (
            rnd(d, scale=0.2) + 1,
            rnd(d, scale=0.1),
            rnd(3 * d, d, scale=0.1, dt=dtype),
            rnd(3 * d, scale=0.1, dt=dtype),
            rnd(d, d, scale=0.1, dt=dtype),
            rnd(d, scale=0.1, dt=dtype),
            rnd(d, scale=0.2) + 1,
            rnd(d, scale=0.1),
            rnd(hidden, d, scale=0.1, dt=dtype),
            rnd(hidden, scale=0.1, dt=dtype),
            rnd(d, hidden, scale=0.1, dt=dtype),
            rnd(d, scale=0.1, dt=dtype),
        )
        for _ in range(2)
    ]
    layers = [tuple(t.detach().requires_grad_(True) for t in layer) for layer in layers]
    final = tuple(t.detach().requires_grad_(True) for t in (rnd(d, scale=0.2) + 1, rnd(d, scale=0.1)))
    head = rnd(vocab, d, scale=0.1, dt=dtype)
    x = rnd(b, s, d)
    y = ht.decoder(x, layers, heads, final, head)
    assert y.shape == (b, s, vocab) and y.dtype == dtype
    leaves = [x, *[t for layer in layers for t in layer], *final, head]
    refs = [t.detach().double().requires_grad_(True) for t in leaves]
    n = len(ht.LAYER_PARAMS)
    want = _decoder_reference(
        refs[0], [refs[1 + i * n : 1 + (i + 1) * n] for i in range(2)], heads, refs[-3:-1], refs[-1]
    )
    assert _rel(y, want) <= bound
    go = torch.randn(b, s, vocab, device=cuda, generator=g).to(dtype)
    y.backward(go)
    want.backward(go.double())
    for i, (t, r) in enumerate(zip(leaves, refs)):
        assert t.grad is not None and t.grad.dtype == t.dtype and t.grad.shape == t.shape, i
        assert _rel(t.grad, r.grad) <= 2 * bound, (i, _rel(t.grad, r.grad))


def _fp32_masters(cuda, seed: int, b: int, s: int, d: int, hidden: int, vocab: int) -> tuple:
    """A 2-layer decoder's fp32 master weights (requiring grad), its final LayerNorm,
    head and input, and the generator that made them."""
    g = torch.Generator(device="cuda").manual_seed(seed)

    def rnd(*shape, scale=0.1, shift=0.0):
        return (torch.randn(*shape, device=cuda, generator=g) * scale + shift).requires_grad_(True)

    masters = [
        [rnd(d, shift=1), rnd(d), rnd(3 * d, d), rnd(3 * d), rnd(d, d), rnd(d), rnd(d, shift=1), rnd(d)]
        + [rnd(hidden, d), rnd(hidden), rnd(d, hidden), rnd(d)]
        for _ in range(2)
    ]
    final, head, x = (rnd(d, shift=1), rnd(d)), rnd(vocab, d), rnd(b, s, d, scale=1.0)
    return masters, final, head, x, g


def test_decoder_casts_fp32_master_weights_itself(cuda):
    """With compute_dtype, the product weights, biases and head may be fp32 masters:
    the decoder casts them itself and returns fp32 gradients, the same values as a
    caller's .to(compute_dtype) casts give (logits and every gradient, bitwise)."""
    b, s, d, heads, hidden, vocab = 2, 24, 64, 2, 128, 96
    masters, final, head, x, g = _fp32_masters(cuda, 23, b, s, d, hidden, vocab)
    bf = torch.bfloat16
    y = ht.decoder(x, masters, heads, final, head, compute_dtype=bf)
    go = torch.randn(b, s, vocab, device=cuda, generator=g).to(bf)
    y.backward(go)
    got = [t.grad for layer in masters for t in layer] + [head.grad]
    assert all(t.dtype == torch.float32 for t in got)
    for t in [x, *[t for layer in masters for t in layer], *final, head]:
        t.grad = None
    cast = [[t if i in (0, 1, 6, 7) else t.to(bf) for i, t in enumerate(layer)] for layer in masters]
    y2 = ht.decoder(x, cast, heads, final, head.to(bf))
    assert torch.equal(y, y2)
    y2.backward(go)
    want = [t.grad for layer in masters for t in layer] + [head.grad]
    for i, (a, w) in enumerate(zip(got, want)):
        assert torch.equal(a, w), i
    with pytest.raises(TypeError, match="need compute_dtype"):
        ht.decoder(x, masters, heads, final, head)
    with pytest.raises(TypeError, match="compute_dtype must be torch.float16 or torch.bfloat16"):
        ht.decoder(x, masters, heads, final, head, compute_dtype=torch.float32)


def test_decoder_keeps_its_casts_across_steps(cuda, monkeypatch):
    """fp32 masters cast into kept buffers (one refill per forward): across steps
    with the masters updated in place between them, and with two forwards before
    one backward (the second casts afresh: the first's saved casts are not
    overwritten), logits and every gradient equal HELIOS_DISABLE_CAST_CACHE=1's
    (a .to() each), bitwise; the same buffers serve every step; a bad switch value
    is refused naming it. The same with stage_all's memo (HELIOS_DISABLE_STAGE_MEMO):
    on with the kept casts, off with the .to() path, and the kept casts in it."""
    b, s, d, heads, hidden, vocab = 2, 16, 64, 2, 128, 80
    masters, final, head, x, g = _fp32_masters(cuda, 29, b, s, d, hidden, vocab)
    params = [x, *[t for layer in masters for t in layer], *final, head]
    go = torch.randn(b, s, vocab, device=cuda, generator=g).to(torch.bfloat16)
    start = {n: t.detach().clone() for n, t in enumerate(params)}

    def run(cache: str) -> list:
        monkeypatch.setenv("HELIOS_DISABLE_CAST_CACHE", "0" if cache == "on" else "1")
        monkeypatch.setenv("HELIOS_DISABLE_STAGE_MEMO", "0" if cache == "on" else "1")
        with torch.no_grad():
            for n, t in enumerate(params):
                t.copy_(start[n])
        seen = []
        for step in range(3):
            for t in params:
                t.grad = None
            y = ht.decoder(x, masters, heads, final, head, compute_dtype=torch.bfloat16)
            if step == 2:  # two forwards, one backward
                y = y + ht.decoder(x, masters, heads, final, head, compute_dtype=torch.bfloat16)
            y.backward(go)
            seen += [y.detach().clone()] + [t.grad.clone() for t in params]
            with torch.no_grad():  # the optimizer's in-place update
                for t in params:
                    t.sub_(0.05 * t.grad)
        return seen

    def slots() -> set:
        return {id(sl.buf) for sl in RUNTIME.cast_slots.values() if any(sl.master() is t for t in params)}

    kept = run("on")
    assert len(slots()) == 2 * 8 + 1  # 4 weights and 4 biases a layer, and the head
    first = slots()
    again = run("on")
    assert slots() == first
    memo = {id(e[0]()) for e in RUNTIME.stage_memo.values() if e[0]() is not None}
    assert first <= memo  # every kept cast staged from the memo's answer

    def lent() -> list:
        return [sl.pending for sl in RUNTIME.cast_slots.values() if any(sl.master() is t for t in params)]

    monkeypatch.setenv("HELIOS_DISABLE_CAST_CACHE", "0")
    y = ht.decoder(x, masters, heads, final, head, compute_dtype=torch.bfloat16)  # never backpropagated
    assert all(lent()) and len(lent()) == 17
    del y
    gc.collect()
    assert not any(lent())  # the freed graph gave them back
    fresh = run("off")
    for i, (a, w, c) in enumerate(zip(kept, fresh, again)):
        assert torch.equal(a, w) and torch.equal(c, w), i
    monkeypatch.setenv("HELIOS_DISABLE_CAST_CACHE", "sometimes")
    with pytest.raises(ValueError, match="HELIOS_DISABLE_CAST_CACHE"):
        ht.decoder(x, masters, heads, final, head, compute_dtype=torch.bfloat16)


def test_decoder_is_one_group_each_way(cuda, monkeypatch):
    """The whole stack is one group per direction, recorded as it is built: 8 ops per
    layer and the final LayerNorm and head forward; 12 per layer and the head's two
    and the final LayerNorm's backward; every gradient finite. Profiled: one GPU
    timestamp per op, one label per op (what train_profile.py's table pairs)."""
    d, heads = 64, 2
    g = torch.Generator(device="cuda").manual_seed(22)

    def p(*shape, dt=torch.float16):
        return (torch.randn(*shape, device=cuda, generator=g) / 8).to(dt).requires_grad_(True)

    layers = [
        (
            p(d, dt=torch.float32),
            p(d, dt=torch.float32),
            p(3 * d, d),
            p(3 * d),
            p(d, d),
            p(d),
            p(d, dt=torch.float32),
            p(d, dt=torch.float32),
            p(4 * d, d),
            p(4 * d),
            p(d, 4 * d),
            p(d),
        )
        for _ in range(3)
    ]
    x = p(2, 16, d, dt=torch.float32)
    _semaphore_or_skip(x)
    groups = RUNTIME.groups
    groups.clear()
    monkeypatch.setattr(RUNTIME, "profile_labels", [])
    dev = ht.device_for(x)
    torch.cuda.synchronize()  # a profile starts with no ordered work pending
    dev._profile_start(1024)  # each op's GPU time, in the order the labels say
    ht.decoder(x, layers, heads, (p(d, dt=torch.float32), p(d, dt=torch.float32)), p(32, d)).float().sum().backward()
    torch.cuda.synchronize()
    marks, dropped = dev._profile_stop()
    assert list(groups) == [3 * 8 + 2, 3 * 12 + 3]
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for layer in layers for t in layer)
    labels = RUNTIME.profile_labels
    assert dropped == 0 and [k for k, _ in marks].count("op") == len(labels) == sum(groups)
    assert labels[0] == "layernorm 32x64" and labels[1] == "product 32x192x64 NT +bias"
    assert labels.count("attention backward 2x2x16x32 rows causal") == 3
    assert all(b >= a for a, b in zip([ms for _, ms in marks], [ms for _, ms in marks][1:]))


def test_decoder_refusals(cuda):
    d = 64
    w = torch.zeros(3 * d, d, device=cuda, dtype=torch.float16)
    ln = torch.ones(d, device=cuda)
    x = torch.zeros(1, 4, d, device=cuda)
    layer = [ln, ln, w, None, w[:d], None, ln, ln, w, None, w.T.contiguous(), None]
    with pytest.raises(ValueError, match="each layer is 12 tensors"):
        ht.decoder(x, [layer[:11]], 2, (ln, ln))
    with pytest.raises(TypeError, match="x is torch.float16"):
        ht.decoder(x.half(), [layer], 2, (ln, ln))
    with pytest.raises(ValueError, match="heads must be a positive int dividing D=64"):
        ht.decoder(x, [layer], 5, (ln, ln))
    bad = list(layer)
    bad[4] = w  # w_out (3d, d)
    with pytest.raises(ValueError, match=r"layers\[0\].w_out must be \(64, 64\)"):
        ht.decoder(x, [bad], 2, (ln, ln))
    with pytest.raises(ValueError, match=r"layers\[0\].ln1_w must be \(64,\)"):
        ht.decoder(x, [[ln[:8]] + layer[1:]], 2, (ln, ln))


def test_a_copy_after_a_live_group_opened_is_refused(cuda):
    """A live group records as it is built: an operand that would need a copy after the
    stream's signal could be read before the copy lands, so it is refused (and the
    group still closes, its signal reached: the next op runs)."""
    a = torch.ones(8, 8, device=cuda, dtype=torch.float16)
    group = Group(a)
    with pytest.raises(RuntimeError, match="stage it before live"):
        with group.live():
            group.stage(a * 2)
    torch.testing.assert_close(ht.matmul(a, a).float(), torch.full((8, 8), 8.0, device=cuda))


def test_ordering_and_device_for_refuse_a_cpu_tensor():
    """They raised AssertionError (and with a CUDA build of torch mapped a CPU tensor to the
    current CUDA device); every other helios.torch function says TypeError ... CUDA tensor."""
    for fn in (ht.ordering, ht.device_for):
        with pytest.raises(TypeError, match="must be a CUDA tensor, got one on cpu"):
            fn(torch.zeros(2))
        with pytest.raises(TypeError, match="must be a CUDA tensor, got list"):
            fn([1.0])


def test_a_failed_memory_pool_leaves_no_temporary_directory(tmp_path):
    """Issue 50: a process whose memory_pool() fails leaves nothing in its temporary
    directory once it exits (torch's own import-time directory included)."""
    import subprocess
    import sys

    code = (
        "import helios.torch as ht\n"
        "try:\n    ht.memory_pool(device=999)\nexcept Exception as e:\n    print(type(e).__name__)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    assert list(tmp_path.iterdir()) == []
