"""helios.engine: the entry points a framework bridge (helios.torch) calls. helios.torch
reaches the binding only through them, each is a call the binding has, and the kernel
entries compute what their public twins do (against float64, on any Vulkan device)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import helios
from helios import _helios, engine
from helios.gemm import activation_code

TORCH_BRIDGE = Path(helios.__file__).parent / "torch"
BINDING = (_helios, _helios.Device, _helios.Tensor, helios.Device, helios.Tensor)
PRIVATE = {n for o in BINDING for n in dir(o) if n.startswith("_") and not n.startswith("__")}


def private_uses(path: Path) -> list[str]:
    """`x._member` where _member is a private member of the binding and x is not self."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
    return found


def test_helios_torch_reaches_the_engine_only_through_helios_engine():
    files = sorted(TORCH_BRIDGE.glob("*.py"))
    assert len(files) >= 10
    found = [u for f in files for u in private_uses(f)]
    assert not found, f"helios.torch calls the binding's private members (use helios.engine): {found}"


def test_the_private_use_check_sees_a_call(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(dev, stream):\n    w, s = dev._async_values()\n    self._gemm()\n")
    assert private_uses(bad) == ["bad.py:2 ._async_values"]


def test_each_entry_calls_a_member_the_binding_has():
    entries = [f for n, f in vars(engine).items() if inspect.isfunction(f) and f.__module__ == engine.__name__]
    assert len(entries) >= 15
    for f in entries:
        assert f.__doc__, f"helios.engine.{f.__name__} has no docstring"
        for member in re.findall(r"\._([a-z][a-z_]*)\(", inspect.getsource(f)):
            assert f"_{member}" in PRIVATE, f"helios.engine.{f.__name__} calls _{member}, which the binding lacks"


def test_the_matmul_entry_computes_what_matmul_does(device):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 7)).astype(np.float16)
    b = rng.standard_normal((3, 7)).astype(np.float16)  # used transposed
    out = device.empty((5, 3), "float16")
    engine.matmul(device, a=device.upload(a), b=device.upload(b), m=5, n=3, k=7, trans_a=False, trans_b=True,
                  lda=7, ldb=7, in_dtype="float16", out_dtype="float16", out=out, act=activation_code("relu"),
                  bias=None, variant=engine.pick_matmul(device, 5, 3, 7, "float16"))  # fmt: skip
    want = np.maximum(a.astype(np.float64) @ b.astype(np.float64).T, 0)
    np.testing.assert_allclose(out.numpy().astype(np.float64), want, rtol=2e-2, atol=2e-2)
    assert engine.pick_matmul(device, 5, 3, 7, "float16") in (None, device.resolve_variant(5, 3, 7))


def test_the_activation_entry_and_its_backward(device):
    z = np.linspace(-3, 3, 40).astype(np.float16)
    g = np.full(40, 2.0, np.float16)
    y, dz = device.empty((40,), "float16"), device.empty((40,), "float16")
    hz = device.upload(z)
    engine.activation(device, hz, y, 40, activation_code("relu"), "float16")
    engine.activation(device, hz, dz, 40, activation_code("relu"), "float16", device.upload(g))
    np.testing.assert_array_equal(y.numpy(), np.maximum(z, 0))
    np.testing.assert_array_equal(dz.numpy(), np.where(z > 0, g, 0).astype(np.float16))


def test_a_view_reads_the_bytes_it_names(device):
    x = np.arange(64, dtype=np.float16)
    t = device.upload(x)
    v = engine.view(t, 0, 32, (4, 4), "float16", 4)
    np.testing.assert_array_equal(v.numpy(), x[:16].reshape(4, 4))
    with pytest.raises((ValueError, _helios.UnsupportedError)):
        engine.view(t, 0, 1 << 20, (4, 4), "float16", 4)  # past the tensor's bytes


def test_the_layernorm_entry_against_float64(device):
    rng = np.random.default_rng(5)
    rows, d = 3, 16
    x, gamma, beta = (rng.standard_normal(s).astype(np.float32) for s in ((rows, d), d, d))
    h, stats = device.empty((rows, d), "float16"), device.empty((rows, 2), "float32")
    hx, hg, hb = (device.upload(t, dtype="float32") for t in (x, gamma, beta))
    engine.layernorm(device, hx, hg, hb, h, stats, rows, d, 1e-5, "float16")
    x64 = x.astype(np.float64)
    mean, var = x64.mean(1, keepdims=True), x64.var(1, keepdims=True)
    want = (x64 - mean) / np.sqrt(var + 1e-5) * gamma + beta
    np.testing.assert_allclose(h.numpy().astype(np.float64), want, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(stats.numpy()[:, 0], mean[:, 0], rtol=1e-5, atol=1e-5)
