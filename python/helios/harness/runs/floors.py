"""The noise floors ci and bisect judge with: per shape tier (small shapes are noisier),
and on a CPU driver (lavapipe) one wide floor and a least run spread."""

from __future__ import annotations

from ..results.compare import NOISE, RUN_NOISE, RUN_NOISE_FLOOR

# Noise floors by work per shape (GFLOP up to, floor): SAME where the interval lies inside the floor.
# Under 1 GFLOP a launch lasts a few microseconds and its time is the launch's as much as
# the kernel's. Above it one floor: on an H200 the runs of 2-60 GFLOP products vary
# between processes as little as the larger ones' (0.11-0.62%,
# results/h200-ci-series-d4b8122), and a wider floor there could never call +3% SLOWER.
NOISE_TIERS = ((1.0, 0.05), (float("inf"), NOISE))
# A CPU driver (lavapipe) shares its cores with everything else on the machine: its
# timings of one build swing by tens of percent between runs (A/A on CI's 2 cores),
# so there only a change beyond this floor is a verdict.
CPU_NOISE = 0.30
# ... and its runs' spread is never taken as below half that floor: two runs a side that
# happen to agree (t at 2 degrees of freedom) otherwise can make a 30%+ A/A swing FASTER
# (tests/test_ci.py simulates it). With 4 runs a side the floor, not this, is what a change must pass.
CPU_RUN_NOISE = CPU_NOISE / 2


def noise_floor(shape: str, device_type: str = "discrete_gpu") -> float:
    """The noise floor of a shape's tier (by its FLOPs), CPU_NOISE on a CPU device."""
    if device_type == "cpu":
        return CPU_NOISE
    try:
        dims = [int(x) for x in shape.split("-")[0].split("x")]
    except ValueError:
        return NOISE
    if len(dims) == 3:  # a product M x N x K
        gflop = 2.0 * dims[0] * dims[1] * dims[2] / 1e9
    elif len(dims) == 4:  # attention B x H x S x d
        gflop = 4.0 * dims[0] * dims[1] * dims[2] ** 2 * dims[3] / 1e9
    else:
        return NOISE
    return next(floor for limit, floor in NOISE_TIERS if gflop <= limit)


def run_noise_floor(device_type: str) -> float:
    """The least between-run sd of log time compare takes from measured runs on this kind
    of device."""
    return CPU_RUN_NOISE if device_type == "cpu" else RUN_NOISE_FLOOR


def assumed_run_noise(device_type: str) -> float:
    """The between-run sd compare assumes where a side has one run (nothing measured)."""
    return max(RUN_NOISE, run_noise_floor(device_type))
