"""Bad input to the Python API: every argument checked before any work, a clear
exception (type, message naming the shapes, dtypes or variant), never a crash,
a hang or a truncated count; the C core's variant parsing under threads."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from helpers import device_variants, small_ints

import helios

A = np.ones((4, 3), np.float16)


B = np.ones((3, 5), np.float16)


@pytest.mark.parametrize(
    "a,b,exc,match",
    [
        # lists, 1-D and N-D operands are taken as numpy.matmul takes them: what does not chain is refused
        ([[1.0]], B, ValueError, r"inner dimensions differ: op\(a\) is \(1, 1\)"),
        (A, "not an array", TypeError, "must be an array"),
        (None, B, TypeError, "must be an array"),
        (np.ones(4, np.float16), B, ValueError, r"inner dimensions differ: a has shape \(4,\) \(K 4\).*\(3, 5\)"),
        (np.ones((2, 2, 2, 2), np.float16), B, ValueError, r"inner dimensions differ: a has shape \(2, 2, 2, 2\)"),
        (np.ones((4, 2), np.float16), B, ValueError, r"inner dimensions differ.*\(4, 2\).*\(3, 5\)"),
        (np.ones((4, 3), np.int32), B, TypeError, "int32"),
        (np.ones((4, 3), object), B, TypeError, "object"),
        (np.ones((4, 3), np.complex64), B, TypeError, "complex64"),
        (np.ones((4, 3), bool), B, TypeError, "bool"),
    ],
)
def test_bad_operands(device, a, b, exc, match):
    with pytest.raises(exc, match=match):
        device.matmul(a, b)


@pytest.mark.parametrize("out_dtype", ["float64", "int8", "bogus", 3.5])
def test_bad_out_dtype(device, out_dtype):
    with pytest.raises(ValueError, match="out_dtype"):
        device.matmul(A, B, out_dtype=out_dtype)


@pytest.mark.parametrize(
    "variant",
    [
        "",
        "coop",
        "coop:16x16x16",
        "fast",
        "coop:0x16x16:tile1x1x1:sg1x1:acc=f32:load=shared:stages=2",
        "coop:16x16x16:tile128x128x32:sg4x4:acc=f64:load=shared:stages=2",
        "coop:16x16x16:tile128x128x32:sg4x4:acc=f32:load=maybe:stages=2",
        "scalar:tile64x64:acc=f32",
    ],
)
def test_malformed_variant_is_value_error(device, variant):
    with pytest.raises(ValueError, match="variant"):
        device.matmul(A, B, variant=variant)


@pytest.mark.parametrize(
    "variant",
    [
        "coop:7x7x7:tile14x14x14:sg1x1:acc=f32:load=shared:stages=2",  # not in the table
        "coop:8x8x8:tile4000x4000x64:sg500x500:acc=f32:load=shared:stages=2",  # far too big
        "scalar:tile32x32x16:acc=f32",  # scalar is fixed
        "coop:16x16x16:tile128x128x32:sg4x4:acc=f32:load=shared:stages=3",
    ],
)
def test_unsupported_variant_is_unsupported_error(device, variant):
    with pytest.raises(helios.UnsupportedError, match="variant") as ei:
        device.matmul(A, B, variant=variant)
    assert isinstance(ei.value, NotImplementedError) and isinstance(ei.value, helios.HeliosError)
    assert ei.value.status == "HL_ERR_UNSUPPORTED_VARIANT"


def test_variant_must_be_str(device):
    with pytest.raises(TypeError, match="variant"):
        device.matmul(A, B, variant=3)


def test_too_large_is_device_memory_error(device):
    # np.empty reserves address space without touching it: the engine must refuse
    # before it reads a byte. 70000^2 elements overflow 32-bit indexing.
    a = np.empty((70000, 70000), np.float16)
    with pytest.raises(helios.DeviceMemoryError, match="70000") as ei:
        device.matmul(a, np.ones((70000, 1), np.float16))
    assert isinstance(ei.value, MemoryError)
    # A 4 GiB fp32 output exceeds maxStorageBufferRange (and was never allocated).
    with pytest.raises(helios.DeviceMemoryError, match="exceeds"):
        device.matmul(np.ones((65536, 1), np.float16), np.ones((1, 16384), np.float16), out_dtype="float32")


def test_time_matmul_bad_arguments(device):
    with pytest.raises(ValueError, match="m must be"):
        device.time_matmul(0, 4, 4)
    with pytest.raises(ValueError, match="iters"):
        device.time_matmul(4, 4, 4, iters=0)
    with pytest.raises(TypeError, match="dtype must be one of float16, bfloat16"):
        device.time_matmul(4, 4, 4, dtype="float64")
    with pytest.raises(ValueError, match="do not match"):
        device.time_matmul(4, 4, 4, inputs=(A, B))


def test_low_level_run_validates(device):
    def run(a, b, out):
        return device._gemm(a=a, b=b, m=a.shape[0], n=b.shape[1], k=a.shape[1], out_dtype=out)

    with pytest.raises(TypeError, match="float16"):
        run(np.ones((2, 2), np.float32), np.ones((2, 2), np.float16), "float32")
    with pytest.raises(ValueError, match="C-contiguous"):
        run(np.asfortranarray(np.ones((2, 3), np.float16)), np.ones((3, 2), np.float16), "float32")
    with pytest.raises(ValueError, match="out_dtype"):
        run(np.ones((2, 2), np.float16), np.ones((2, 2), np.float16), "float64")


def test_bad_device_index():
    with pytest.raises(helios.NoDeviceError, match="out of range"):
        helios.Device(999)
    with pytest.raises(ValueError):
        helios.Device(-1)
    with pytest.raises(TypeError):
        helios.Device("0")


@pytest.mark.parametrize(
    "index,exc,msg",
    [
        (2**63, ValueError, "0..1024"),
        (-1, ValueError, "0..1024"),
        (True, TypeError, "bool"),
        ("0", TypeError, "str"),
        (1.0, TypeError, "float"),
    ],
)
def test_device_index_argument(index, exc, msg):
    with pytest.raises(exc, match=msg):
        helios.Device(index)


def test_huge_shape_fails_in_milliseconds(device):
    t = time.perf_counter()
    with pytest.raises(helios.DeviceMemoryError, match="1048576x1048576x1048576"):
        device.time_matmul(1 << 20, 1 << 20, 1 << 20, iters=1, warmup=0)
    assert time.perf_counter() - t < 0.5


def test_device_buffer_limit_checked_before_inputs(device):
    """A square product whose A alone exceeds the device's per-buffer limit (while
    every operand stays under 2^32 elements) is refused before inputs exist."""
    side = int((device.info["max_storage_buffer_range"] / 2) ** 0.5) + 1024
    assert side * side < 2**32 - 16
    t = time.perf_counter()
    with pytest.raises(helios.DeviceMemoryError, match="bytes per buffer"):
        device.time_matmul(side, side, side, iters=1, warmup=0)
    assert time.perf_counter() - t < 0.5


@pytest.mark.parametrize(
    "kw,exc,msg",
    [
        ({"iters": 2**32 + 3}, ValueError, "iters must be in 1..100000"),
        ({"iters": 0}, ValueError, "iters must be in"),
        ({"warmup": 2**32}, ValueError, "warmup must be in 0..100000"),
        ({"warmup": -1}, ValueError, "warmup must be in"),
        ({"flush_bytes": 2**64 - 1}, ValueError, "flush_bytes must be in"),
        ({"iters": 2.0}, TypeError, "iters must be an int"),
        ({"iters": True}, TypeError, "iters must be an int"),
    ],
)
def test_time_matmul_counts(device, kw, exc, msg):
    with pytest.raises(exc, match=msg):
        device.time_matmul(8, 8, 8, **kw)


def test_numpy_integers_are_counts(device):
    t = device.time_matmul(np.int64(8), np.int32(8), np.uint16(8), iters=np.int64(2), warmup=np.int8(1))
    assert len(t.samples_ms) == 2


def test_bool_is_not_a_dimension(device):
    with pytest.raises(TypeError, match="m must be an int, not bool"):
        device.time_matmul(True, 8, 8)


def test_unaligned_contiguous_operand_is_copied(device):
    raw = np.zeros(2 * 9 * 9 + 1, dtype=np.uint8)
    a = raw[1:].view(np.float16).reshape(9, 9)  # contiguous, one byte off alignment
    a[...] = small_ints((9, 9), 1)
    assert not a.flags.aligned and a.flags.c_contiguous
    b = small_ints((9, 9), 2)
    np.testing.assert_array_equal(device.matmul(a, b, out_dtype="float32"), a.astype(np.float32) @ b.astype(np.float32))


def test_invalid_variant_rejected_even_for_empty_operands(device):
    with pytest.raises(ValueError, match="malformed"):
        device.matmul(np.zeros((0, 4), np.float16), np.zeros((4, 3), np.float16), variant="nonsense")


@pytest.mark.slow
def test_threaded_stress_with_forced_variant(device, monkeypatch):
    """Many threads, one shared device and one device each, HELIOS_VARIANT set (its
    parsing runs in the C core with the GIL released), random shapes and variants,
    every result checked exactly (small integers)."""
    forced = device.default_variant()
    monkeypatch.setenv("HELIOS_VARIANT", forced)
    variants = [None] + [v for v in device_variants() if "acc=f32" in v or v.startswith("scalar")][:4]
    for v in variants:  # each kernel compiled once before the threads: on a CPU driver every
        # device would JIT it at once otherwise (minutes cold); the threads then share the cache
        device.matmul(small_ints((8, 8), 0), small_ints((8, 8), 1), out_dtype="float32", variant=v)
    device.time_matmul(8, 8, 8, iters=1, warmup=0, inputs=(small_ints((8, 8), 0), small_ints((8, 8), 1)))
    errors: list[str] = []
    done = [0]
    lock = threading.Lock()

    def work(tid: int, dev: helios.Device) -> None:
        rng = np.random.default_rng(tid)
        for i in range(12):
            m, n, k = (int(x) for x in rng.integers(1, 90, size=3))
            a, b = small_ints((m, k), tid * 100 + i), small_ints((k, n), tid * 100 + i + 50)
            v = variants[int(rng.integers(0, len(variants)))]
            try:
                c = dev.matmul(a, b, out_dtype="float32", variant=v)
                if not np.array_equal(c, a.astype(np.float32) @ b.astype(np.float32)):
                    raise AssertionError(f"wrong result {m}x{n}x{k} {v}")
                if v is None and i % 4 == 0:  # the forced variant is what runs (its own report)
                    used = dev.time_matmul(m, n, k, iters=1, warmup=0, inputs=(a, b)).variant
                    if used != forced:
                        raise AssertionError(f"HELIOS_VARIANT not used: {used}")
            except Exception as e:  # collected, reported below with the thread and case
                with lock:
                    errors.append(f"thread {tid}: {type(e).__name__}: {e}")
        with lock:
            done[0] += 1

    own = [helios.Device() for _ in range(3)]
    threads = [threading.Thread(target=work, args=(t, device if t % 2 else own[t // 2 % 3])) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    for d in own:
        d.close()
    assert not errors, errors[:5]
    assert done[0] == 8


def test_low_level_run_never_truncates_counts(device):
    a, b = small_ints((4, 4), 1), small_ints((4, 4), 2)

    def run(warmup, iters):
        return device._gemm(a=a, b=b, m=4, n=4, k=4, out_dtype="float32", warmup=warmup, iters=iters)

    with pytest.raises(OverflowError):
        run(0, 2**64 + 3)
    with pytest.raises(ValueError, match="0..100000"):
        run(0, 2**32 + 3)
    with pytest.raises(ValueError, match="0..100000"):
        run(-1, 2)


@pytest.mark.parametrize(
    "bad", [np.full(4, np.nan, np.float16), np.array([1, 1, np.inf, 1], np.float16), np.array([1, 1, 1, 2], np.float16)]
)
def test_check_close_truth_is_its_verdict(bad):
    r = helios.check_close(bad, np.ones(4))
    assert not r and not r.passed
    with pytest.raises(AssertionError, match="not close"):
        helios.assert_close(bad, np.ones(4))
    assert helios.check_close(np.ones(4, np.float16), np.ones(4))


def test_check_close_refuses_a_shape_mismatch_and_bad_tolerances():
    with pytest.raises(ValueError, match="shape"):
        helios.check_close(np.ones(4), np.ones(5))
    with pytest.raises(ValueError, match="finite"):
        helios.check_close(np.ones(4), np.ones(4), atol=float("nan"))


@pytest.mark.parametrize(
    "kwargs,err",
    [
        ({"device": "x"}, TypeError),
        ({"alpha": "2"}, TypeError),
        ({"alpha": True}, TypeError),
        ({"alpha": float("nan")}, ValueError),
        ({"alpha": 10**400}, ValueError),
        ({"trans_a": "yes"}, TypeError),
        ({"c": np.ones((4, 4), np.complex64), "beta": 1.0}, TypeError),
        ({"c": np.ones((4, 4), np.int64), "beta": 1.0}, TypeError),
    ],
)
def test_api_arguments_are_checked(device, kwargs, err):
    a = np.ones((4, 4), np.float16)
    kw = dict(kwargs)
    if "device" not in kw:
        kw["device"] = device
    with pytest.raises(err) as e:
        helios.matmul(a, a, **kw)
    name = [k for k in kwargs if k != "beta"][0]
    assert name in str(e.value) or name == "device"


@pytest.mark.parametrize("shape", [(3.9, 2), (True, 2), ("a", 2)])
def test_empty_refuses_non_integer_dims(device, shape):
    with pytest.raises(TypeError, match="shape"):
        device.empty(shape)


@pytest.mark.parametrize("x", [np.ones(4, np.int32), np.ones(4, np.complex64), np.ones(4, object), np.ones(4, bool)])
def test_one_conversion_rule_for_uploads(device, x):
    with pytest.raises(TypeError, match="floating-point"):
        device.upload(x)
    with pytest.raises(TypeError, match="floating-point"):
        helios.from_dlpack(x, device=device)


def test_float64_is_rounded_everywhere_alike(device):
    x = np.full((4, 4), 1 / 3)
    assert device.upload(x).numpy().dtype == np.float16
    assert np.array_equal(device.upload(x).numpy(), x.astype(np.float16))


def test_attention_flags_and_aliases(device):
    q = np.random.default_rng(0).standard_normal((1, 1, 8, 16)).astype(np.float16)
    for bad in ("yes", None):
        with pytest.raises(TypeError, match="causal"):
            device.attention(q, q, q, causal=bad)
    a = device.attention(q, q, q, is_causal=True)
    b = device.attention(q, q, q, causal=True)
    assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="disagree"):
        device.attention(q, q, q, causal=True, is_causal=False)


def test_variant_strings_with_nul_are_refused(device):
    with pytest.raises(ValueError, match="NUL"):
        helios.canonical_variant("scalar:tile64x64x16:acc=f32\0junk")
    q = np.ones((1, 1, 8, 16), np.float16)
    with pytest.raises(ValueError, match="NUL"):
        device.attention(q, q, q, variant="fa-scalar\0x")


def test_chain_output_before_run_raises(device):
    x = device.upload(np.ones((8, 8), np.float16))
    ch = device.chain()
    y = ch.matmul(x, x)
    with pytest.raises(RuntimeError, match="has not run"):
        y.numpy()
    ch.run()
    assert (y.numpy() == 8).all()
    with pytest.raises(ValueError):
        ch.time(iters=0)


def test_empty_batch_gives_numpys_answer(device):
    a, b = np.ones((0, 17, 23), np.float16), np.ones((23, 9), np.float16)
    r = device.matmul(a, b)
    assert r.shape == np.matmul(a, b).shape == (0, 17, 9)


def test_rows_of_minus_inf_scores_are_zero_everywhere(device):
    """Every key scored -inf: each attention variant and the float64 reference give 0 (torch's math
    backend's answer), never NaN."""
    rng = np.random.default_rng(1)
    q = np.abs(rng.standard_normal((1, 2, 5, 16))).astype(np.float16) + np.float16(0.1)
    k = np.full((1, 2, 7, 16), -np.inf, np.float16)
    v = rng.standard_normal((1, 2, 7, 16)).astype(np.float16)
    ref = helios.reference_attention(q, k, v)
    assert np.array_equal(ref, np.zeros_like(ref))
    # Both kernels (the coop one at its default and another tiling, and the scalar fallback);
    # every coop variant is the same softmax code with other tile constants.
    variants = device.attention_variants(16)
    for variant in sorted({variants[0], variants[-1], "fa-scalar"}):
        out = device.attention(q, k, v, variant=variant)
        assert np.array_equal(out, np.zeros_like(out)), variant
