"""helios.Tensor as an array: shape, dtype, device, len, repr, @, .T views read
as layouts, reshape views, copy_ / upload(out=) for new inputs to a chain."""

from __future__ import annotations

import numpy as np
import pytest

import helios


def rnd(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float16)


def close(h, ref):
    assert helios.check_close(np.asarray(h), ref), helios.check_close(np.asarray(h), ref).line()


def test_array_basics(device):
    t = device.upload(rnd((5, 3), 0))
    assert t.shape == (5, 3) and t.dtype == np.float16 and t.device is device and len(t) == 5
    r = repr(t)
    assert "shape=(5, 3)" in r and "float16" in r and device.info["name"] in r


def test_matmul_operator_stays_on_the_device(device):
    a, b = rnd((6, 4), 1), rnd((4, 7), 2)
    A, B = device.upload(a), device.upload(b)
    C = A @ B
    assert isinstance(C, helios.Tensor) and C.shape == (6, 7)
    close(C.numpy(), a.astype(np.float64) @ b)
    close((a @ B).numpy(), a.astype(np.float64) @ b)  # host @ Tensor: on the Tensor's device


def test_transposed_views_are_layouts_not_copies(device):
    a, b = rnd((9, 5), 3), rnd((9, 6), 4)
    A, B = device.upload(a), device.upload(b)
    At = A.T
    assert At.shape == (5, 9) and At.transposed and np.array_equal(At.numpy(), a.T)
    assert At.T.shape == (9, 5) and not At.T.transposed
    close(device.matmul(At, B).numpy(), a.T.astype(np.float64) @ b)  # (5, 9) @ (9, 6)
    close(device.matmul(B.T, A).numpy(), b.T.astype(np.float64) @ a)
    close(device.matmul(At, B.T.T).numpy(), a.T.astype(np.float64) @ b)
    close(device.matmul(A, B, trans_a=True).numpy(), a.T.astype(np.float64) @ b)
    x3 = rnd((2, 4, 3), 5)
    X3 = device.upload(x3)
    assert np.array_equal(X3.T.numpy(), np.swapaxes(x3, 1, 2))
    with pytest.raises(ValueError, match="packed"):
        device.matmul(A.T, B, out=device.empty((6, 5)).T)


def test_reshape_views_share_memory(device):
    x = rnd((4, 6), 6)
    X = device.upload(x)
    Y = X.reshape(2, 12)
    assert Y.shape == (2, 12) and np.array_equal(Y.numpy(), x.reshape(2, 12))
    assert X.reshape(-1).shape == (24,) and X.reshape((3, -1)).shape == (3, 8)
    X.copy_(np.ones((4, 6)))  # a write through the base shows in the view
    assert (Y.numpy() == 1).all()
    for bad in ((5, 5), (-1, -1), (0, 24)):
        with pytest.raises(ValueError):
            X.reshape(*bad)
    with pytest.raises(ValueError, match="not packed"):
        X.T.reshape(24)
    with pytest.raises(ValueError, match="not packed"):
        device.prepack(rnd((4, 6), 7)).reshape(24)  # padded rows


def test_view_outlives_its_name(device):
    v = device.upload(np.full((3, 4), 2, np.float16)).T  # the base is referenced by the view only
    import gc

    gc.collect()
    assert (v.numpy() == 2).all()


def test_copy_gives_a_chain_new_inputs(device):
    x1, x2, w = rnd((8, 16), 8), rnd((8, 16), 9), rnd((16, 4), 10)
    X, W = device.upload(x1), device.prepack(w)
    ch = device.chain()
    Y = ch.matmul(X, W)
    ch.run()
    close(Y.numpy(), x1.astype(np.float64) @ w)
    device.upload(x2, out=X)  # same as X.copy_(x2)
    ch.run()
    close(Y.numpy(), x2.astype(np.float64) @ w)
    W.copy_(np.zeros((16, 4)))  # a prepacked (padded) weight too
    ch.run()
    assert (Y.numpy() == 0).all()
    with pytest.raises(ValueError, match="shape"):
        X.copy_(np.ones((3, 3)))
    with pytest.raises(TypeError, match="floating-point"):
        X.copy_(np.ones((8, 16), np.int64))


def test_slices_are_views_the_kernels_read(device):
    x3 = rnd((4, 8, 16), 11)  # each batch item is 256 bytes: aligned
    w = rnd((16, 8), 12)
    X3, W = device.upload(x3), device.upload(w)
    s = X3[2]
    assert s.shape == (8, 16) and s.is_slice and np.array_equal(s.numpy(), x3[2])
    close(device.matmul(s, W).numpy(), x3[2].astype(np.float64) @ w)
    close((X3[1:3] @ W).numpy(), np.matmul(x3[1:3].astype(np.float64), w))
    assert np.array_equal(X3[-1].numpy(), x3[-1]) and np.array_equal(X3[1:3][1].numpy(), x3[2])
    rows = device.upload(rnd((32, 16), 13))  # a 2-D slice of whole rows (32 bytes each)
    close(device.matmul(rows[8:24], W).numpy(), rows.numpy()[8:24].astype(np.float64) @ w)
    close(device.matmul(rows[8:24].T, rows[8:24]).numpy(), rows.numpy()[8:24].T.astype(np.float64) @ rows.numpy()[8:24])
    q = device.upload(rnd((3, 2, 8, 16), 14))  # attention on a slice of the batch
    close(
        device.attention(q[1:2], q[1:2], q[1:2]).numpy(),
        helios.reference_attention(q.numpy()[1:2], q.numpy()[1:2], q.numpy()[1:2]),
    )


def test_slices_that_cannot_be_views_say_why(device):
    X = device.upload(rnd((5, 3), 15))  # rows of 6 bytes: row 1 starts unaligned
    with pytest.raises(ValueError, match="alignment"):
        X[1]
    with pytest.raises(ValueError, match="step"):
        X[::2]
    with pytest.raises(TypeError, match="int or a slice"):
        X[0, 1]
    with pytest.raises(IndexError):
        X[5]
    with pytest.raises(ValueError, match="nothing"):
        X[3:3]
    Y = device.upload(rnd((4, 8, 16), 16))
    with pytest.raises(ValueError, match="slice"):
        device.matmul(Y[0], Y[1].T, out=Y[2])  # never an output
    with pytest.raises(ValueError, match="slice"):
        Y[0].copy_(np.zeros((8, 16)))
    assert device.info["storage_offset_alignment"] >= 1


def test_slice_keeps_its_owner_alive(device):
    import gc

    s = device.upload(np.full((4, 8, 8), 3, np.float16))[1]  # the base has no other name
    gc.collect()
    assert (s.numpy() == 3).all() and (s.T.numpy() == 3).all()
