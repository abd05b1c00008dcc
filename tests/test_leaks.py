"""Leaks, measured: resident memory growth per call after warm-up, over the
last half of each loop (the figures print with -s and go in the closing note).
Bounds: < 64 bytes per matmul or failing call, < 16 KiB per device open/close
(the driver's own caches settle during warm-up)."""
from __future__ import annotations

import gc
import os

import numpy as np
import pytest

import helios
from conftest import UNDER_ASAN, small_ints

PAGE = os.sysconf("SC_PAGE_SIZE")

# ASan's quarantine keeps freed memory resident (it grows RSS by design), so RSS
# measures nothing there; the normal run measures it.
pytestmark = pytest.mark.skipif(UNDER_ASAN, reason="under ASan the allocator's quarantine keeps freed "
                                "memory resident: RSS growth is measured in the normal run")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def growth_per_call(fn, warmup: int, calls: int) -> tuple[float, list[int]]:
    """Bytes of RSS growth per call over the second half of `calls`, after `warmup`."""
    for _ in range(warmup):
        fn()
    gc.collect()
    marks = []
    for i in range(calls):
        fn()
        if i == calls // 2 or i == calls - 1:
            gc.collect()
            marks.append(rss())
    return (marks[1] - marks[0]) / (calls - 1 - calls // 2), marks


def test_matmul_loop_does_not_leak(device, report):
    a, b = small_ints((40, 30), 1), small_ints((30, 20), 2)
    per, marks = growth_per_call(lambda: device.matmul(a, b), warmup=300, calls=3000)
    report(f"leak: matmul {per:.1f} bytes/call over 1500 calls (RSS {marks[0]} -> {marks[1]})")
    assert per < 64


def test_time_matmul_loop_does_not_leak(device, report):
    per, marks = growth_per_call(lambda: device.time_matmul(32, 32, 32, iters=2, warmup=0),
                                 warmup=200, calls=1000)
    report(f"leak: time_matmul {per:.1f} bytes/call over 500 calls")
    assert per < 64


def test_failing_calls_do_not_leak(device, report):
    a, b = small_ints((4, 3), 1), small_ints((5, 2), 2)

    def bad() -> None:
        for call in (lambda: device.matmul(a, b), lambda: device.check_variant("nonsense"),
                     lambda: device.time_matmul(8, 8, 8, iters=0)):
            try:
                call()
            except (ValueError, TypeError, helios.HeliosError):
                pass
    per, _ = growth_per_call(bad, warmup=300, calls=3000)
    report(f"leak: failing calls {per:.1f} bytes/round of 3 over 1500 rounds")
    assert per < 64


def test_device_open_close_cycles_do_not_leak(report):
    def cycle() -> None:
        with helios.Device() as d:
            d.matmul(small_ints((16, 16), 1), small_ints((16, 16), 2))
    per, _ = growth_per_call(cycle, warmup=20, calls=60)
    report(f"leak: open/matmul/close {per:.0f} bytes/cycle over 30 cycles")
    assert per < 16 * 1024


def test_injected_faults_do_not_leak(device, report, monkeypatch):
    a, b = small_ints((40, 30), 1), small_ints((30, 20), 2)
    kinds = iter(["alloc:1", "buffer:1", "pipeline:1", "submit:1", "map:1"] * 1000)

    def faulty() -> None:
        monkeypatch.setenv("HELIOS_FAULT", next(kinds))
        with helios.Device() as d:
            try:
                d.matmul(a, b)
            except helios.HeliosError:
                pass
    per, _ = growth_per_call(faulty, warmup=20, calls=60)
    monkeypatch.delenv("HELIOS_FAULT")
    report(f"leak: open + injected fault + close {per:.0f} bytes/cycle over 30 cycles")
    assert per < 16 * 1024
