"""NVIDIA GPU state around a measurement: clocks, temperature, power, utilisation,
throttle reasons and other compute processes. From NVML (nvidia-ml-py) where it
is installed, else `nvidia-smi`; None where neither answers (no NVIDIA GPU)."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Optional, Union

# NVML throttle-reason bits that mean the clocks were held down by the board,
# not by the GPU simply being idle or set by an application.
_THROTTLE_BITS = {
    0x0000000000000004: "sw_power_cap",
    0x0000000000000008: "hw_slowdown",
    0x0000000000000020: "sw_thermal_slowdown",
    0x0000000000000040: "hw_thermal_slowdown",
    0x0000000000000080: "hw_power_brake_slowdown",
}


# The GPU whose state is read when no index is given: an NVML index, or a UUID
# ("GPU-..." as NVML and nvidia-smi take it). helios bench and suite select the
# GPU that Helios runs on, by its Vulkan device UUID (CUDA's order, NVML's and
# Vulkan's differ, and CUDA_VISIBLE_DEVICES renumbers CUDA's).
_TARGET: Union[int, str] = 0


def nvml_uuid(uuid: str) -> str:
    """The NVML/nvidia-smi spelling of a device UUID: GPU-8-4-4-4-12."""
    u = uuid.strip().lower()
    return "GPU-" + (u[4:] if u.startswith("gpu-") else u)


def bare_uuid(uuid: str) -> str:
    """32 lower-case hex digits, whatever the spelling (GPU- prefix, dashes)."""
    u = uuid.strip().lower()
    return (u[4:] if u.startswith("gpu-") else u).replace("-", "")


def select_gpu(ident: Union[int, str, None]) -> Union[int, str]:
    """Read the state of this GPU from now on (index or UUID); returns the previous one."""
    global _TARGET
    prev = _TARGET
    _TARGET = 0 if ident is None else (nvml_uuid(ident) if isinstance(ident, str) else int(ident))
    return prev


def selected_gpu() -> Union[int, str]:
    return _TARGET


def _nvml(index: Union[int, str]) -> Optional[dict]:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        if isinstance(index, str):
            try:
                h = pynvml.nvmlDeviceGetHandleByUUID(index)
            except pynvml.NVMLError:  # not an NVIDIA GPU NVML knows: nothing to read
                return None
        else:
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
        util = pynvml.nvmlDeviceGetUtilizationRates(h)
        reasons = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        me = os.getpid()
        return {
            "source": "nvml",
            "gpu_uuid": pynvml.nvmlDeviceGetUUID(h),
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "utilization_gpu_pct": util.gpu,
            "utilization_mem_pct": util.memory,
            "throttle_reasons": [name for bit, name in _THROTTLE_BITS.items() if reasons & bit],
            "other_compute_processes": [
                {"pid": p.pid, "used_memory_bytes": p.usedGpuMemory} for p in procs if p.pid != me
            ],
        }
    except Exception as e:  # a field this driver lacks: report what failed, not a guess
        return {"source": "nvml", "error": f"{type(e).__name__}: {e}"}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _smi(index: Union[int, str]) -> Optional[dict]:
    if not shutil.which("nvidia-smi"):
        return None
    q = (
        "clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw,utilization.gpu,"
        "utilization.memory,clocks_throttle_reasons.sw_power_cap,clocks_throttle_reasons.hw_slowdown,"
        "clocks_throttle_reasons.sw_thermal_slowdown,clocks_throttle_reasons.hw_thermal_slowdown"
    )
    try:
        r = subprocess.run(
            ["nvidia-smi", "-i", str(index), f"--query-gpu={q}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if r.returncode != 0:
            return None
        v = [x.strip() for x in r.stdout.strip().split(",")]
        names = ["sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown"]

        def num(s: str) -> Optional[float]:
            try:
                return float(s)
            except ValueError:
                return None

        apps = subprocess.run(
            ["nvidia-smi", "-i", str(index), "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        me = os.getpid()
        procs = []
        for line in apps.stdout.strip().splitlines():
            parts = [x.strip() for x in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) != me:
                procs.append({"pid": int(parts[0]), "used_memory_bytes": (num(parts[1]) or 0) * 2**20})
        return {
            "source": "nvidia-smi",
            "sm_clock_mhz": num(v[0]),
            "mem_clock_mhz": num(v[1]),
            "max_sm_clock_mhz": num(v[2]),
            "temperature_c": num(v[3]),
            "power_w": num(v[4]),
            "utilization_gpu_pct": num(v[5]),
            "utilization_mem_pct": num(v[6]),
            "throttle_reasons": [n for n, s in zip(names, v[7:11]) if s.lower() == "active"],
            "other_compute_processes": procs,
        }
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def gpu_state(index: Union[int, str, None] = None) -> Optional[dict]:
    """A snapshot of NVIDIA GPU `index` (an index or a UUID; default: the selected
    GPU, see select_gpu), or None when there is none to read."""
    ident = _TARGET if index is None else index
    return _nvml(ident) or _smi(ident)


def throttled(*states: Optional[dict]) -> bool:
    """True when any snapshot shows a board-imposed limit actually holding the SM
    clock below its maximum. (An H100 reported sw_power_cap while at its 1980 MHz
    maximum; the raw reasons stay in the JSON either way.)"""
    for s in states:
        if s and s.get("throttle_reasons"):
            clk, top = s.get("sm_clock_mhz"), s.get("max_sm_clock_mhz")
            if clk is None or top is None or clk < top:
                return True
    return False


LOW_CLOCK = 0.8  # a row measured below 80% of the maximum SM clock is flagged


def low_clock(*states: Optional[dict]) -> bool:
    """True when any snapshot shows the SM clock under LOW_CLOCK x its maximum."""
    for s in states:
        if s and s.get("sm_clock_mhz") and s.get("max_sm_clock_mhz"):
            if s["sm_clock_mhz"] < LOW_CLOCK * s["max_sm_clock_mhz"]:
                return True
    return False


def ramp_clocks(work, *, target: float = 0.9, timeout_s: float = 3.0, index: Union[int, str, None] = None) -> dict:
    """Run `work()` (a few tens of ms of GPU work) until the SM clock reaches
    `target` x its maximum or `timeout_s` passes. An H100 idle for seconds was
    seen to stay at 345 MHz through 200 ms of back-to-back work, so a warm-up
    count alone does not guarantee clocks. Returns what happened; without NVML
    or nvidia-smi (no NVIDIA GPU) it does nothing and says so."""
    import time

    state = gpu_state(index)
    if not state or not state.get("max_sm_clock_mhz"):
        return {"done": False, "reason": "no NVIDIA GPU state to read"}
    t0 = time.perf_counter()
    calls = 0
    while state["sm_clock_mhz"] < target * state["max_sm_clock_mhz"] and time.perf_counter() - t0 < timeout_s:
        work()
        calls += 1
        state = gpu_state(index) or state
    reached = state["sm_clock_mhz"] >= target * state["max_sm_clock_mhz"]
    return {
        "done": True,
        "reached": bool(reached),
        "sm_clock_mhz": state["sm_clock_mhz"],
        "max_sm_clock_mhz": state["max_sm_clock_mhz"],
        "work_calls": calls,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def describe_ramp(r: dict) -> str:
    """One line for a ramp_clocks result."""
    if not r.get("done"):
        return f"skipped ({r.get('reason')})"
    how = "reached" if r.get("reached") else "did not reach"
    return (
        f"{how} {r['sm_clock_mhz']:.0f} of {r['max_sm_clock_mhz']:.0f} MHz after {r['work_calls']} bursts "
        f"({r['seconds']:.2f} s)"
    )


def side_states(results: list[dict]) -> dict:
    """Clocks and throttle flags over a side's rows: what the comment reports."""
    throttled = low = 0
    rows = 0
    clocks: list[float] = []
    reasons: set[str] = set()
    for d in results:
        for r in d.get("rows", []):
            rows += 1
            throttled += bool(r.get("throttled"))
            low += bool(r.get("low_clock"))
            for st in r.get("gpu_state") or []:
                for when in ("before", "after"):
                    g = st.get(when) or {}
                    if g.get("sm_clock_mhz"):
                        clocks.append(float(g["sm_clock_mhz"]))
                    reasons.update(str(x) for x in g.get("throttle_reasons") or [])
    return {
        "rows": rows,
        "throttled_rows": throttled,
        "low_clock_rows": low,
        "sm_clock_mhz": [min(clocks), max(clocks)] if clocks else None,
        "throttle_reasons": sorted(reasons),
    }
