"""Adversarial inputs: every case ends in the documented exception or
exit status with a one-line message, fast, and never a traceback for a user
error; the C core's variant parsing under threads with HELIOS_VARIANT set."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from helpers import device_variants, small_ints

import helios
from helios import _helios
from helios.cli import main


# ---- environment switches: strict values ------------------------------------------------
@pytest.mark.parametrize("name", ["HELIOS_DISABLE_COOP", "HELIOS_DISABLE_COOP2"])
@pytest.mark.parametrize(
    "value,ok",
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("on", True),
        ("0", True),
        ("off", True),
        ("False", True),
        ("maybe", False),
        ("2", False),
    ],
)
def test_boolean_switches_are_strict(monkeypatch, name, value, ok):
    monkeypatch.setenv(name, value)
    if ok:
        helios.Device().close()
    else:
        with pytest.raises(ValueError, match=f"{name}='{value}'"):
            helios.Device()


@pytest.mark.parametrize("value", ["urgent", "1", "high ", "512"])
def test_queue_priority_env_is_strict(monkeypatch, value):
    monkeypatch.setenv("HELIOS_QUEUE_PRIORITY", value)
    with pytest.raises(ValueError, match=f"HELIOS_QUEUE_PRIORITY='{value}': expected low, medium, high or realtime"):
        helios.Device()


def test_queue_family_env_picks_or_refuses(monkeypatch):
    """HELIOS_QUEUE_FAMILY (a measuring switch): an index the device has runs there; one
    it lacks, or not an index, is refused naming the switch."""
    monkeypatch.setenv("HELIOS_QUEUE_FAMILY", "0")
    with helios.Device() as d:
        assert d.info["queue_family"] == 0
        a, b = small_ints((9, 7), 3), small_ints((7, 5), 4)
        np.testing.assert_array_equal(d.matmul(a, b), a.astype(np.float64) @ b.astype(np.float64))
    for value, msg in (("1000", "has no queue family of that index"), ("first", "expected an index 0..1024")):
        monkeypatch.setenv("HELIOS_QUEUE_FAMILY", value)
        with pytest.raises(ValueError, match=f"HELIOS_QUEUE_FAMILY.*{msg}"):
            helios.Device()


@pytest.mark.parametrize("value", ["", "low", "HIGH", "realtime"])
def test_queue_priority_is_asked_for_and_reported(monkeypatch, value):
    """The queue gets the priority asked for where the driver has the extension and
    permits it, else the driver's default with the reason in info; either way it computes."""
    monkeypatch.setenv("HELIOS_QUEUE_PRIORITY", value)
    with helios.Device() as d:
        info = d.info
        asked = value.lower() or "default"
        assert info["queue_priority_asked"] == asked
        refused = info["queue_priority_refused"]  # the driver answered VK_ERROR_NOT_PERMITTED
        assert not refused or (value and info["global_priority"])
        granted = bool(value) and info["global_priority"] and not refused
        assert info["queue_priority"] == (asked if granted else "default")
        a, b = small_ints((17, 9), 1), small_ints((9, 5), 2)
        np.testing.assert_array_equal(d.matmul(a, b), a.astype(np.float64) @ b.astype(np.float64))


def test_disable_coop_true_is_honoured(device, monkeypatch):
    monkeypatch.setenv("HELIOS_DISABLE_COOP", "true")
    with helios.Device() as d:
        assert d.default_variant().startswith("scalar:")


@pytest.mark.parametrize("value", ["garbage", "-1", "99999999999", "0x1", " 0"])
def test_device_index_env_is_strict(monkeypatch, value):
    monkeypatch.setenv("HELIOS_DEVICE", value)
    with pytest.raises(ValueError, match="HELIOS_DEVICE"):
        helios.Device()


@pytest.mark.parametrize(
    "value,on", [("", False), ("0", False), ("off", False), ("1", True), ("YES", True), ("on", True), ("2", None)]
)
def test_env_flag_is_the_engines_parse(monkeypatch, value, on):
    """helios._helios.env_flag: the switches Python reads (HELIOS_DISABLE_CAST_CACHE)
    parse as the engine's own, a value it does not know refused naming the switch."""
    monkeypatch.setenv("HELIOS_SOME_SWITCH", value)
    if on is None:
        with pytest.raises(ValueError, match="HELIOS_SOME_SWITCH='2'"):
            _helios.env_flag("HELIOS_SOME_SWITCH")
    else:
        assert _helios.env_flag("HELIOS_SOME_SWITCH") is on
    monkeypatch.delenv("HELIOS_SOME_SWITCH")
    assert _helios.env_flag("HELIOS_SOME_SWITCH") is False


def test_coop_switches_are_strict(device, monkeypatch):
    monkeypatch.setenv("HELIOS_COOP_DIRECT_LOAD", "sometimes")
    with pytest.raises(ValueError, match="HELIOS_COOP_DIRECT_LOAD='sometimes'"):
        device.default_variant()


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


# ---- sizes and counts: checked before any work ----------------------------------------
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


# ---- the command line: exit codes and one-line messages --------------------------------
def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "helios", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--fuzz=-5"],
        ["check", "--fuzz=0"],
        ["bench", "--runs=0"],
        ["bench", "--repeats=x"],
        ["nosuchcommand"],
        ["bench", "--no-such-flag"],
    ],
)
def test_usage_errors_exit_2_without_traceback(args):
    r = _run_cli(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    "content",
    [
        "[]",
        "42",
        '"a string"',
        "{bad json",
        json.dumps({"schema": "helios-bench/1", "rows": [{"shape": 5}]}),
        json.dumps({"schema": "helios-bench/1", "rows": "x"}),
    ],
)
def test_report_on_malformed_files_exits_2_one_line(tmp_path, content):
    p = tmp_path / "r.json"
    p.write_text(content)
    r = _run_cli("report", str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_report_on_non_utf8_exits_2(tmp_path, capsys):
    p = tmp_path / "r.json"
    p.write_bytes(b"\xff\xfe\x00")
    assert main(["report", str(p)]) == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_help_documents_exit_codes():
    r = _run_cli("--help")
    assert r.returncode == 0 and "exit status" in r.stdout and "3  the device or driver failed" in r.stdout


# ---- threads ----------------------------------------------------------------------------
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
