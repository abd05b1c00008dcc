"""docs/reference/api-rules.md as tests: the dtype, result-type and device rules, one
table row each, for products and attention alike."""

from __future__ import annotations

import numpy as np
import pytest

import helios

F16, F32, F64 = np.float16, np.float32, np.float64


@pytest.mark.parametrize(
    "da,db,want",
    [
        (F16, F16, F16),
        (F16, F32, F32),
        (F32, F16, F32),
        (F32, F32, F32),
        (F64, F16, F32),
        (F16, F64, F32),
    ],
)
def test_matmul_result_dtype(device, da, db, want):
    a = np.ones((4, 3), da)
    b = np.ones((3, 5), db)
    assert device.matmul(a, b).dtype == want
    assert device.matmul(b.T, a.T).dtype == want  # operand order does not matter
    assert helios.matmul(a, b, device=device).dtype == want


@pytest.mark.parametrize("dt,want", [(F16, F16), (F32, F32), (F64, F32)])
def test_attention_result_dtype(device, dt, want):
    q = np.random.default_rng(0).standard_normal((1, 1, 8, 16)).astype(dt)
    assert device.attention(q, q, q).dtype == want


@pytest.mark.parametrize("bad", [np.int32, np.int64, np.bool_, np.complex64, object])
def test_non_float_inputs_are_refused_everywhere(device, bad):
    x = np.ones((4, 4), bad)
    ok = np.ones((4, 4), F16)
    for call in (
        lambda: device.matmul(x, ok),
        lambda: device.matmul(ok, x),
        lambda: device.matmul(ok, ok, c=x, beta=1.0),
        lambda: device.matmul(ok, ok, bias=x[0]),
        lambda: device.upload(x),
        lambda: device.attention(x[None, None], ok[None, None], ok[None, None]),
    ):
        with pytest.raises(TypeError):
            call()


def test_tensor_in_tensor_out(device):
    a = device.upload(np.ones((4, 3), F16))
    b = device.upload(np.ones((3, 5), F16))
    r = device.matmul(a, b)
    assert isinstance(r, helios.Tensor) and r.shape == (4, 5) and (r.numpy() == 3).all()
    r2 = device.matmul(a, np.ones((3, 5), F16))  # one Tensor is enough
    assert isinstance(r2, helios.Tensor)
    r3 = device.matmul(a, b, c=np.ones((4, 5), F16))  # C goes to the device too
    assert isinstance(r3, helios.Tensor) and (r3.numpy() == 4).all()
    q = device.upload(np.ones((1, 1, 8, 16), F16))
    assert isinstance(device.attention(q, q, q), helios.Tensor)


def test_numpy_in_numpy_out(device):
    assert isinstance(device.matmul(np.ones((2, 2), F16), np.ones((2, 2), F16)), np.ndarray)


def test_torch_in_torch_out(device):
    torch = pytest.importorskip("torch", reason="torch not installed")
    a = torch.ones((4, 3), dtype=torch.float32)
    r = device.matmul(a, torch.ones((3, 5), dtype=torch.float16))
    assert isinstance(r, torch.Tensor) and r.dtype == torch.float32 and bool((r == 3).all())
    q = torch.ones((1, 1, 8, 16), dtype=torch.float16)
    o = device.attention(q, q, q)
    assert isinstance(o, torch.Tensor) and o.dtype == torch.float16


def test_bfloat16_torch_tensors_stay_bfloat16(device):
    torch = pytest.importorskip("torch", reason="torch not installed")
    x = torch.full((2, 3), 1.5, dtype=torch.bfloat16)
    y = device.matmul(x, x.T)  # read through the same bits (NumPy has no bfloat16)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.bfloat16
    assert torch.equal(y, torch.full((2, 2), 6.75, dtype=torch.bfloat16))
    z = torch.ones((2, 2), dtype=torch.int32)
    with pytest.raises(TypeError, match="int32"):
        device.matmul(z, z)


def test_ops_run_where_their_tensors_live(device):
    with helios.Device() as other:
        x = other.upload(np.ones((4, 4), F16))
        r = helios.matmul(x, x)  # not the default device: the Tensors' own
        assert isinstance(r, helios.Tensor) and r.device is other and (r.numpy() == 4).all()
        y = device.upload(np.ones((4, 4), F16))
        with pytest.raises(ValueError, match="different Devices"):
            helios.matmul(x, y)


def test_out_takes_host_arrays_like_numpy(device):
    a, b = np.ones((4, 3), F16), np.ones((3, 5), F16)
    out = np.zeros((4, 5), F32)
    r = device.matmul(a, b, out=out)
    assert r is out and (out == 3).all()
    out[...] = 1
    device.matmul(a, b, out=out, beta=2.0)  # beta reads out, as with a Tensor out=
    assert (out == 5).all()
    with pytest.raises(ValueError, match="shape"):
        device.matmul(a, b, out=np.zeros((5, 4), F32))
    with pytest.raises(TypeError, match="out"):
        device.matmul(a, b, out=np.zeros((4, 5), np.int32))
    ro = np.zeros((4, 5), F16)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="read-only"):
        device.matmul(a, b, out=ro)


# ---- what NumPy's and torch's users expect (issue: new user, round two, item 9) ----------


def _ref(a, b):
    return np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))


@pytest.mark.parametrize(
    "sa,sb",
    [
        ((24,), (24, 16)),  # a 1-D a is a row, its axis dropped
        ((16, 24), (24,)),  # a 1-D b is a column
        ((24,), (24,)),  # both: a 0-d result
        ((2, 3, 8, 24), (24, 16)),  # a batch of any rank
        ((2, 1, 8, 24), (1, 3, 24, 16)),  # leading axes broadcast
        ((3, 8, 24), (2, 1, 24, 16)),
    ],
)
def test_matmul_takes_numpys_shapes(device, sa, sb):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(sa).astype(F16) / 4
    b = rng.standard_normal(sb).astype(F16) / 4
    got = helios.matmul(a, b, device=device)
    want = _ref(a, b)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, atol=2e-2, rtol=1e-2)


def test_matmul_refuses_what_numpy_refuses(device):
    with pytest.raises(ValueError, match="do not broadcast"):
        helios.matmul(np.ones((2, 3, 4, 5), F16), np.ones((4, 5, 6), F16), device=device)
    with pytest.raises(ValueError, match="scalar"):
        helios.matmul(np.float16(2), np.ones((2, 2), F16), device=device)
    with pytest.raises(ValueError, match="1-D operand has nothing to transpose"):
        helios.matmul(np.ones(3, F16), np.ones((3, 2), F16), trans_a=True, device=device)


def test_matmul_takes_python_lists(device):
    got = helios.matmul([[1.0, 2.0], [3.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]], device=device)
    np.testing.assert_array_equal(got, np.array([[1, 2], [3, 4]], F32))  # float64 lists: a float32 result
    with pytest.raises(TypeError, match="int64"):
        helios.matmul([[1, 2]], [[1], [2]], device=device)  # integers, as any int array: refused


def test_float32_beyond_float16s_range_warns_naming_the_operand(device):
    a = np.full((4, 4), 1e5, F32)
    with pytest.warns(RuntimeWarning, match=r"a holds values beyond float16's range \(largest \|x\| = 100000") as w:
        helios.matmul(a, np.eye(4, dtype=F32), device=device)
    assert w[0].filename == __file__  # pointed at the caller's line, not Helios's insides
    assert not [x for x in w if "overflow encountered" in str(x.message)]  # NumPy's bare warning gone


def test_a_tensor_is_made_from_data_as_torch_and_cupy_make_theirs(device):
    with pytest.raises(TypeError, match=r"helios\.tensor\(data"):
        helios.Tensor(np.ones((2, 2), F16))
    t = helios.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    assert isinstance(t, helios.Tensor) and t.dtype == F16 and t.device is device
    np.testing.assert_array_equal(t.cpu(), np.array([[1, 2], [3, 4]], F16))
    t32 = t.astype("float32")
    assert isinstance(t32, helios.Tensor) and t32.dtype == F32 and t32.device is device
    np.testing.assert_array_equal(t32.to("cpu"), np.array([[1, 2], [3, 4]], F32))
    assert t.to(np.float32).dtype == F32 and t.to(device) is t
    with helios.Device() as other:
        moved = t.to(other)
        assert moved.device is other and np.array_equal(moved.numpy(), t.numpy())


def test_device_may_be_an_index(device):
    got = helios.matmul(np.eye(2, dtype=F16), np.eye(2, dtype=F16), device=0)
    np.testing.assert_array_equal(got, np.eye(2, dtype=F16))
    assert helios.functions.device_at(0) is helios.functions.device_at(0)  # one Device per index
    with pytest.raises(TypeError, match="a helios.Device, an index or None"):
        helios.matmul(np.eye(2, dtype=F16), np.eye(2, dtype=F16), device="cuda:0")


def test_the_module_level_ops_show_their_keywords():
    import inspect

    for fn, names in (
        (
            helios.matmul,
            {"trans_a", "trans_b", "bias", "activation", "alpha", "beta", "c", "out", "out_dtype", "variant"},
        ),
        (helios.attention, {"causal", "scale", "variant", "out", "is_causal", "return_lse"}),
    ):
        params = inspect.signature(fn).parameters
        assert names | {"device"} <= set(params) and not any(p.kind is p.VAR_KEYWORD for p in params.values())


def test_a_tensor_of_another_device_is_refused_naming_both(device):
    with helios.Device() as other:
        t = other.upload(np.ones((4, 4), F16))
        with pytest.raises(ValueError, match="another Device object of the same GPU|lives on '"):
            device.matmul(t, np.ones((4, 4), F16))
