"""`helios info`: the device, its driver, cooperative-matrix table and defaults."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .common import open_device
from .common_args import Grouped


def cmd_info(args: argparse.Namespace) -> int:
    with open_device(args) as dev:
        info = dict(dev.info)
        info["default_variant"] = dev.default_variant()
        info["variants"] = dev.variants()
        # The driver's statistics of the default kernel (VK_KHR_pipeline_executable_properties).
        info["kernel_stats"] = dev.kernel_stats() if info["pipeline_statistics"] else None
        # Attention at the head dims the anchors use (S_kv unknown: the long-context pick).
        info["attention_default_variants"] = {str(d): dev.default_attention_variant(d) for d in (64, 128)}
        info["attention_variants"] = {str(d): dev.attention_variants(d) for d in (64, 128)}
        # The MMA roof `helios roof` measured and cached for this device and driver (None: not yet).
        from ..roof import cached_rows

        info["mma_roof"] = cached_rows(info)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"device        {info['name']} ({info['device_type']}, vendor 0x{info['vendor_id']:04x})")
    print(f"driver        {info['driver_name']} {info['driver_info']} (raw {info['driver_version']})")
    print(f"vulkan        {info['api_version']}")
    print(f"subgroup      {info['subgroup_size']} (min {info['min_subgroup_size']}, max {info['max_subgroup_size']})")
    print(f"shared memory {info['shared_memory_bytes']} bytes; max workgroup {info['max_workgroup_invocations']}")
    print(f"timestamps    {info['timestamp_period_ns']} ns/tick, {info['timestamp_valid_bits']} valid bits")
    print(
        f"coopmat KHR   {info['cooperative_matrix']} (enabled: {info['cooperative_matrix_enabled']}); "
        f"NV coopmat2 {info['cooperative_matrix2']} "
        f"({info['cooperative_matrix2_flexible_dimensions']} flexible-dimension rows); "
        f"bf16 {info['bf16']}"
    )
    why = info.get("bf16_coop_unavailable")
    print(f"bf16 kernels  {'cooperative matrices' if not why else 'scalar fp32 path: ' + why}")
    rows = info["cooperative_matrix_properties"]
    if rows:
        print("cooperative matrix properties (MxNxK  A B -> C result  scope):")
        for r in rows:
            print(
                f"  {r['m']:>3}x{r['n']:<3}x{r['k']:<3} {r['a']:>4} {r['b']:>4} -> {r['c']:>4} "
                f"{r['result']:>4}  {r['scope']}{'  saturating' if r['saturating'] else ''}"
            )
    family = "graphics and compute" if info["queue_family_graphics"] else "compute only"
    asked, got = info["queue_priority_asked"], info["queue_priority"]
    if asked != got:
        why = "refused by the driver" if info["queue_priority_refused"] else "no global priority extension"
        got = f"{got} (asked {asked}: {why})"
    print(
        f"queue         family {info['queue_family']} ({family}; HELIOS_QUEUE_FAMILY), "
        f"priority {got} (HELIOS_QUEUE_PRIORITY); a wait polls {info['wait_spin_us']} us before it sleeps "
        "(HELIOS_WAIT_SPIN_US)"
    )
    for lay in info["accumulator_layouts"]:
        where = (
            f"rows in registers ({lay['slots']} a lane, lanes sharing a row: xor {lay['lanes']})"
            if lay["rows_in_registers"]
            else f"rows through shared memory ({lay['why']})"
        )
        print(f"accumulator   {lay['shape']} f32: {where}")
    print(f"SMs           {info['sm_count'] or 'not reported (VK_NV_shader_sm_builtins absent)'}")
    print(f"default       {info['default_variant']}")
    ks = info["kernel_stats"]
    if ks is None:
        print("kernel stats  not offered by this driver (VK_KHR_pipeline_executable_properties)")
    else:
        print("kernel stats  " + ", ".join(stat_text(k, v, info) for k, v in ks.items()))
    print(f"variants      {len(info['variants'])} (helios info --json lists them)")
    print(
        "attention     "
        + "; ".join(
            f"d={d}: {v} ({len(info['attention_variants'][d])} variants)"
            for d, v in info["attention_default_variants"].items()
        )
    )
    return 0


# Local memory and stack are per thread: CUDA caps a thread's local memory at 512 KiB.
PER_THREAD_MAX_BYTES = 512 << 10


def stat_text(name: str, value: Any, info: dict) -> str:
    """One driver statistic in its unit: a "... Size" in bytes (B, KiB, MiB), a count
    as an integer. A size no kernel can have is said not to be plausible rather than
    shown as if it were spilled: a per-thread one (local memory, stack) past 512 KiB,
    any other past the device's memory (NVIDIA 580's Local Memory Size reads 2^36)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return f"{name} {value}"
    if float(value).is_integer():
        value = int(value)
    if not name.lower().endswith("size"):
        return f"{name} {value:g}" if isinstance(value, float) else f"{name} {value}"
    per_thread = "local memory" in name.lower() or "stack" in name.lower()
    limit = PER_THREAD_MAX_BYTES if per_thread else int(info.get("device_local_bytes") or 0)
    if limit and value > limit:
        bound = "a thread's 512 KiB" if per_thread else "the device's memory"
        return f"{name} not plausible (the driver reports {value} bytes, more than {bound})"
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if value >= 1 << shift:
            return f"{name} {value / (1 << shift):.3g} {unit}"
    return f"{name} {value} B"


def register(sub: Any) -> None:
    pi = Grouped(sub.add_parser("info", help="print the device's capabilities and cooperative-matrix table"))
    pi.add_argument("--json", action="store_true", help="print the full report as JSON, variants included")
    pi.set_defaults(func=cmd_info)
