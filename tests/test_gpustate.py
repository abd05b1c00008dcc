"""GPU-state flags on synthetic snapshots (no NVIDIA GPU needed)."""

from helios.harness.protocol.gpustate import gpu_state, low_clock, ramp_clocks, throttled


def snap(clk, top=1980, reasons=()):
    return {"sm_clock_mhz": clk, "max_sm_clock_mhz": top, "throttle_reasons": list(reasons)}


def test_throttled_needs_a_reason_and_a_lower_clock():
    assert not throttled(snap(1980, reasons=["sw_power_cap"]))  # reported at max clock
    assert throttled(snap(1755, reasons=["sw_power_cap"]))
    assert not throttled(snap(1755))  # no reason: not throttled
    assert not throttled(None, None)


def test_low_clock():
    assert low_clock(snap(345)) and not low_clock(snap(1700)) and not low_clock(None)


def test_ramp_without_nvidia_gpu_is_a_noop():
    if gpu_state() is not None:
        return  # on an NVIDIA machine the ramp is exercised by the bench instead
    calls = []
    r = ramp_clocks(lambda: calls.append(1))
    assert r == {"done": False, "reason": "no NVIDIA GPU state to read"} and not calls
