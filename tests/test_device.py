"""Device lifetime, capability report, telemetry, GPU timing, threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import small_ints

import helios

INFO_KEYS = {
    "name",
    "vendor_id",
    "driver_version",
    "driver_name",
    "api_version",
    "subgroup_size",
    "shared_memory_bytes",
    "timestamp_period_ns",
    "timestamp_valid_bits",
    "cooperative_matrix",
    "cooperative_matrix2",
    "bf16",
    "cooperative_matrix_properties",
}


def test_info(device):
    info = device.info
    assert INFO_KEYS <= set(info)
    assert info["subgroup_size"] >= 1 and info["timestamp_period_ns"] > 0
    with pytest.raises(TypeError):
        info["name"] = "x"  # read-only mapping
    for row in info["cooperative_matrix_properties"]:
        assert {"m", "n", "k", "a", "b", "c", "result", "scope"} <= set(row)


def test_close_is_idempotent_and_final():
    with helios.Device() as d:
        assert not d.closed
    assert d.closed
    d.close()
    for call in (
        lambda: d.matmul(np.ones((2, 2), np.float16), np.ones((2, 2), np.float16)),
        d.variants,
        d.telemetry,
        lambda: d.info,
        lambda: d.time_matmul(2, 2, 2),
    ):
        with pytest.raises(helios.DeviceClosedError):
            call()
    with pytest.raises(helios.DeviceClosedError):
        d.matmul(np.ones((0, 2), np.float16), np.ones((2, 2), np.float16))  # even empty work


def test_telemetry_counts_and_resets(device):
    device.reset_telemetry()
    a, b = small_ints((33, 20), 1), small_ints((20, 17), 2)
    device.matmul(a, b, out_dtype="float32")
    device.matmul(a, b, out_dtype="float32")
    t = device.telemetry()
    assert t["matmuls"] == 2 and t["dispatches"] == 2 and t["submits"] == 2
    assert t["bytes_up"] == 2 * (33 * 20 + 20 * 17) * 2 and t["bytes_down"] == 2 * 33 * 17 * 4
    assert t["last_gpu_ms"] > 0 and t["barriers"] > 0
    coop = device.default_variant().startswith("coop:")
    assert t["coop_hit_rate"] == (1.0 if coop else 0.0)
    device.reset_telemetry()
    assert device.telemetry()["matmuls"] == 0


def test_time_matmul_gpu_samples(device):
    t = device.time_matmul(64, 48, 80, iters=5, warmup=2)
    assert len(t.samples_ms) == 5 and all(s > 0 for s in t.samples_ms)
    assert t.batch_ms > 0 and t.median_ms > 0 and t.tflops > 0
    assert t.variant == device.default_variant(64, 48, 80)  # the default for this shape
    assert t.telemetry["dispatches"] >= 2 + 2 * 5


def test_pipelines_are_cached(device):
    v = device.default_variant()
    a, b = small_ints((8, 8), 1), small_ints((8, 8), 2)
    device.matmul(a, b, variant=v)
    before = device.telemetry()["pipeline_compiles"]
    device.matmul(a, b, variant=v)
    assert device.telemetry()["pipeline_compiles"] == before


def test_threads_share_a_device(device):
    a, b = small_ints((50, 40), 1), small_ints((40, 30), 2)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    errors = []

    def work():
        try:
            for _ in range(5):
                np.testing.assert_array_equal(device.matmul(a, b, out_dtype="float32"), ref)
        except Exception as e:  # collected and re-raised in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_device_count():
    assert helios.device_count() >= 0


def test_tensor_transfers_run_through_the_one_submission_path(device):
    """Uploads and reads are operations like any other: one submission, one
    barrier each, counted in the telemetry (they once had their own submit)."""
    x = np.arange(48, dtype=np.float16).reshape(6, 8)
    device.reset_telemetry()
    t = device.upload(x)
    up = device.telemetry()
    assert (up["submits"], up["barriers"], up["bytes_up"], up["dispatches"]) == (1, 1, x.nbytes, 0)
    np.testing.assert_array_equal(t.numpy(), x)
    down = device.telemetry()
    assert (down["submits"], down["barriers"], down["bytes_down"]) == (2, 2, x.nbytes)
    assert np.array_equal(t[2:4].numpy(), x[2:4])  # a view reads from its offset


def test_a_timed_call_reports_its_variant_and_times(device):
    """The variant and GPU times come back in the call's own result."""
    a, b = small_ints((40, 24), 1), small_ints((24, 16), 2)
    res = device.time_matmul(40, 16, 24, iters=3, warmup=1, inputs=(a, b))
    assert res.variant == device.resolve_variant(40, 16, 24)
    assert len(res.samples_ms) == 3 and res.batch_ms > 0
