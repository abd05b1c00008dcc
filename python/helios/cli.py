"""The `helios` command line: info, time, bench, compare, check."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from . import _helios
from .check import ATOL, RTOL, check_close, reference_matmul
from .device import Device, random_inputs
from .shapes import parse_shape, parse_shapes, shape_str


def _bool(s: str) -> bool:
    v = s.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {s!r}")


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _shape_arg(s: str) -> tuple[int, int, int]:
    try:
        return parse_shape(s)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


EXIT_CODES = """exit status (every command):
  0  success (compare: no confident regression)
  1  a failed correctness check or gate (time, bench, check, tune), or a
     confident regression (compare; above --fail-on-regression when given)
  2  bad input or usage: unknown flags, invalid values or ranges, unreadable or
     malformed files, non-finite/negative/empty samples, --out problems, a
     variant or size this device cannot serve, no Vulkan device
  3  the device or driver failed at run time (the message names the Vulkan call)"""


class UsageError(ValueError):
    """Bad input or usage: exit status 2 with a one-line message."""


def _out_paths(out: Optional[str], force: bool) -> Optional[tuple[Path, Path]]:
    """(json, md) for --out, validated before any measurement: a .json name, not a
    directory, a parent that exists or can be made and is writable, and no existing
    file unless --force. Results are never lost at the end of a long run."""
    if not out:
        return None
    p = Path(out)
    if p.suffix.lower() != ".json":
        raise UsageError(f"--out {out!r}: give the JSON file's name (ending in .json); the "
                         f"markdown table is written beside it as .md")
    md = p.with_suffix(".md")
    for q in (p, md):
        if q.is_dir():
            raise UsageError(f"--out {out!r}: {q} is a directory")
        if q.exists() and not force:
            raise UsageError(f"--out {out!r}: {q} exists; pass --force to replace it")
    parent = p.parent if str(p.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {out!r}: cannot create {parent}: {e.strerror or e}") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out!r}: {parent} is not writable")
    return p, md


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _open(args: argparse.Namespace) -> Device:
    return Device(args.device, disable_coop=args.disable_coop)


def cmd_info(args: argparse.Namespace) -> int:
    with _open(args) as dev:
        info = dict(dev.info)
        info["default_variant"] = dev.default_variant()
        info["variants"] = dev.variants()
        # The driver's statistics of the default kernel (VK_KHR_pipeline_executable_properties).
        info["kernel_stats"] = dev.kernel_stats() if info["pipeline_statistics"] else None
        # Attention at the head dims the anchors use (S_kv unknown: the long-context pick).
        info["attention_default_variants"] = {str(d): dev.default_attention_variant(d) for d in (64, 128)}
        info["attention_variants"] = {str(d): dev.attention_variants(d) for d in (64, 128)}
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"device        {info['name']} ({info['device_type']}, vendor 0x{info['vendor_id']:04x})")
    print(f"driver        {info['driver_name']} {info['driver_info']} (raw {info['driver_version']})")
    print(f"vulkan        {info['api_version']}")
    print(f"subgroup      {info['subgroup_size']} (min {info['min_subgroup_size']}, max {info['max_subgroup_size']})")
    print(f"shared memory {info['shared_memory_bytes']} bytes; max workgroup {info['max_workgroup_invocations']}")
    print(f"timestamps    {info['timestamp_period_ns']} ns/tick, {info['timestamp_valid_bits']} valid bits")
    print(f"coopmat KHR   {info['cooperative_matrix']} (enabled: {info['cooperative_matrix_enabled']}); "
          f"NV coopmat2 {info['cooperative_matrix2']} "
          f"({info['cooperative_matrix2_flexible_dimensions']} flexible-dimension rows); "
          f"bf16 {info['bf16']}")
    rows = info["cooperative_matrix_properties"]
    if rows:
        print("cooperative matrix properties (MxNxK  A B -> C result  scope):")
        for r in rows:
            print(f"  {r['m']:>3}x{r['n']:<3}x{r['k']:<3} {r['a']:>4} {r['b']:>4} -> {r['c']:>4} "
                  f"{r['result']:>4}  {r['scope']}{'  saturating' if r['saturating'] else ''}")
    print(f"SMs           {info['sm_count'] or 'not reported (VK_NV_shader_sm_builtins absent)'}")
    print(f"default       {info['default_variant']}")
    ks = info["kernel_stats"]
    if ks is None:
        print("kernel stats  not offered by this driver (VK_KHR_pipeline_executable_properties)")
    else:
        print("kernel stats  " + ", ".join(f"{k} {v:g}" for k, v in ks.items()))
    print(f"variants      {len(info['variants'])} (helios info --json lists them)")
    print("attention     " + "; ".join(f"d={d}: {v} ({len(info['attention_variants'][d])} variants)"
                                       for d, v in info["attention_default_variants"].items()))
    return 0


def _torch_time(a: np.ndarray, b: np.ndarray, iters: int, warmup: int) -> Optional[list[float]]:
    """torch.cuda timed like Helios: one CUDA event pair per iteration after warm-up."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    for _ in range(warmup):
        torch.matmul(ta, tb)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(iters)]
    for start, end in events:
        start.record()
        torch.matmul(ta, tb)
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events]


def cmd_time(args: argparse.Namespace) -> int:
    shapes = parse_shapes(args.shapes)
    out = _out_paths(args.out, args.force)
    results = []
    with _open(args) as dev:
        cm, cn, ck = parse_shape(args.check_shape)
        a, b = random_inputs(cm, cn, ck, seed=args.seed + 1)
        c = dev.matmul(a, b, out_dtype=np.float32, variant=args.variant)
        chk = check_close(c, reference_matmul(a, b), atol=args.atol, rtol=args.rtol)
        print(f"check {args.check_shape}: {chk.line()} -> {'PASS' if chk.passed else 'FAIL'}")
        if not chk.passed:
            print("correctness check failed: no timings are reported", file=sys.stderr)
            return 1
        print(f"{'shape':>16} {'helios ms':>10} {'TFLOP/s':>8} {'cuda ms':>9} {'TFLOP/s':>8} "
              f"{'ratio':>6}  variant")
        for shape in shapes:
            m, n, k = shape
            a, b = random_inputs(m, n, k, seed=args.seed)
            t = dev.time_matmul(m, n, k, iters=args.iters, warmup=args.warmup,
                                variant=args.variant, inputs=(a, b))
            ref = _torch_time(a, b, args.iters, args.warmup) if not args.no_cuda else None
            cuda_ms = float(np.median(ref)) if ref else None
            flops = 2.0 * m * n * k
            row = {"shape": shape_str(shape), "heliosMs": t.median_ms, "heliosTflops": t.tflops,
                   "heliosBatchMs": t.batch_ms, "heliosSamplesMs": t.samples_ms,
                   "cudaMs": cuda_ms, "cudaTflops": flops / (cuda_ms * 1e-3) / 1e12 if cuda_ms else None,
                   "cudaSamplesMs": ref, "variant": t.variant}
            results.append(row)
            cuda_txt = (f"{cuda_ms:9.4f} {row['cudaTflops']:8.1f} {t.median_ms / cuda_ms:6.2f}"
                        if cuda_ms else f"{'-':>9} {'-':>8} {'-':>6}")
            print(f"{shape_str(shape):>16} {t.median_ms:10.4f} {t.tflops:8.2f} {cuda_txt}  {t.variant}",
                  flush=True)
        info = dict(dev.info)
    if out:
        _write_atomic(out[0], json.dumps({"schema": "helios-time/1", "device": info, "iters": args.iters,
                                          "warmup": args.warmup, "check": chk.as_dict(), "rows": results},
                                         indent=2))
        print(f"wrote {out[0]}")
    return 0


def _child_argv(args: argparse.Namespace, command: str, drop: Sequence[str]) -> tuple[list[str], list[str]]:
    """(this command line, the subcommand's arguments without `drop`) for --devices children."""
    from .fleet import strip_args
    argv = list(sys.argv[1:] if args.argv is None else args.argv)
    return argv, strip_args(argv[argv.index(command) + 1:] if command in argv else argv, drop)


def cmd_bench_devices(args: argparse.Namespace) -> int:
    """--devices: one child bench per GPU, then the fleet summary (helios/fleet.py)."""
    from .device import identities
    from .fleet import device_indices, fleet_markdown, run_devices, summarize
    if not args.out:
        raise UsageError("--devices needs --out FILE.json: the fleet summary; each device's result "
                         "is written beside it as FILE-dev<i>.json")
    out = _out_paths(args.out, args.force)
    infos = identities()
    indices = device_indices(args.devices, infos)
    argv, child = _child_argv(args, "bench", ["--devices", "--devices-serial", "--out", "--force"])
    entries = run_devices(child, indices, infos, out[0].with_suffix(""), args.devices_serial)
    results, labels = [], []
    for e in entries:
        path = Path(e["file"])
        if path.exists():
            res = json.loads(path.read_text(encoding="utf-8"))
            results.append(res)
            labels.append(f"dev{e['index']} {res.get('helios', {}).get('pci_bus_id') or e['uuid'][:8]}")
    summary = summarize(results, labels)
    summary.update(devices=entries, serial=bool(args.devices_serial), command=["helios"] + argv,
                   host=__import__("platform").node())
    table = fleet_markdown(summary) if results else "no device produced a result\n"
    print(table, end="")
    _write_atomic(out[0], json.dumps(summary, indent=1))
    _write_atomic(out[1], table)
    print(f"wrote {out[0]} and {out[1]}")
    rcs = [e["rc"] for e in entries]
    for e in entries:
        if e["rc"]:
            print(f"helios: device {e['index']} exited {e['rc']} (log: {e['log']})", file=sys.stderr)
    return 3 if 3 in rcs else 2 if 2 in rcs else 1 if any(rcs) else 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import BenchConfig, markdown, run_bench
    if args.suite != "cuda":
        print(f"helios: error: unknown suite {args.suite!r} (only 'cuda')", file=sys.stderr)
        return 1
    if args.devices:
        return cmd_bench_devices(args)
    if args.workload == "attention":
        return cmd_bench_attention(args)
    if args.causal or args.sdpa_backends is not None:
        raise UsageError("--causal and --sdpa-backends belong to --workload=attention")
    if args.ref == "sdpa":
        raise UsageError("--ref=sdpa is the attention workload's reference; matmul takes auto, torch, "
                         "cublas or numpy")
    if args.shapes is None:
        args.shapes = "canonical"
    variant = None if args.variant in (None, "matmul", "default") else args.variant
    if args.out and "{" in args.out:   # {host}, {uuid}, {rank}, {local_rank}
        from .launcher import expand_out, launcher_info
        with _open(args) as d:
            uuid = d.info["uuid"]
        args.out = expand_out(args.out, uuid, launcher_info())
    out = _out_paths(args.out, args.force)
    cfg = BenchConfig(shapes=parse_shapes(args.shapes), iters=args.iters, warmup=args.warmup,
                      dtype=args.dtype, variant=variant, check=args.check, check_shape=args.check_shape,
                      atol=args.atol, rtol=args.rtol, repeats=args.repeats, runs=args.runs,
                      flush_l2=args.flush_l2,
                      warmup_ms=args.warmup_ms,
                      ref=args.ref, seed=args.seed, device=args.device,
                      command=["helios"] + list(sys.argv[1:] if args.argv is None else args.argv))
    return _run_and_emit(lambda: run_bench(cfg, log=print), markdown, out)


def cmd_bench_attention(args: argparse.Namespace) -> int:
    from .attn_bench import AttnBenchConfig, attention_markdown, parse_attention_shapes, run_attention_bench
    from .sdpa import BACKENDS
    if args.ref in ("torch", "cublas"):
        raise UsageError(f"--ref={args.ref} is a matmul reference; attention takes auto, sdpa or numpy")
    backends = tuple(b.strip() for b in (args.sdpa_backends or ",".join(BACKENDS)).split(",") if b.strip())
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown or not backends:
        raise UsageError(f"--sdpa-backends: unknown {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(BACKENDS)}")
    variant = None if args.variant in (None, "matmul", "default", "auto") else args.variant
    out = _out_paths(args.out, args.force)
    cfg = AttnBenchConfig(shapes=parse_attention_shapes(args.shapes or "seed004,seed003,long"),
                          causal=args.causal, iters=args.iters, warmup=args.warmup, warmup_ms=args.warmup_ms,
                          variant=variant, check=args.check, atol=args.atol, rtol=args.rtol,
                          repeats=args.repeats, flush_l2=args.flush_l2, ref=args.ref, backends=backends,
                          seed=args.seed, device=args.device,
                          command=["helios"] + list(sys.argv[1:] if args.argv is None else args.argv))
    return _run_and_emit(lambda: run_attention_bench(cfg, log=print), attention_markdown, out)


def _run_and_emit(run, table, out: Optional[tuple[Path, Path]]) -> int:
    """A bench run: exit 2 when a reference asked for is not here (a RuntimeError
    that is not the engine's), else the table and files of _emit."""
    try:
        result = run()
    except RuntimeError as e:
        if isinstance(e, _helios.HeliosError):
            raise
        print(f"helios: error: {e}", file=sys.stderr)
        return 2
    return _emit(result, table(result), out, f"run rejected: {result.get('failure')}")


def _emit(result: dict, table: str, out: Optional[tuple[Path, Path]], rejected: str) -> int:
    """Print the table, write JSON + markdown where --out says; exit 1 unless status is ok."""
    print(table, end="")
    if out:
        _write_atomic(out[0], json.dumps(result, indent=1))
        _write_atomic(out[1], table)
        print(f"wrote {out[0]} and {out[1]}")
    if result["status"] != "ok":
        print(f"helios: {rejected}", file=sys.stderr)
        return 1
    return 0


def _int_list(text: str) -> list[int]:
    try:
        vals = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return vals


def cmd_suite(args: argparse.Namespace) -> int:
    from .suite import SuiteConfig, run_suite, suite_markdown
    out = _out_paths(args.out, args.force)
    adapters = [a.strip() for a in args.adapters.split(",") if a.strip()]
    cfg = SuiteConfig(tokens=args.tokens, d_model=args.d_model, hidden=args.hidden, iters=args.iters,
                      warmup=args.warmup, adapters=adapters, seed=args.seed, atol=args.atol,
                      rtol=args.rtol, device=args.device, tag=args.tag,
                      command=["helios"] + list(sys.argv[1:]))
    result = run_suite(cfg, log=print)
    return _emit(result, suite_markdown(result), out, "suite rejected: an adapter failed its correctness gate")


def _compare_doc() -> str:
    from . import compare
    return compare.__doc__ or ""


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import CompareError, commit_line, compare, exit_status, load, table, _gpu_label
    old_files = args.old or []
    new_files = args.new or []
    if args.files:
        if old_files or new_files or len(args.files) != 2:
            print("helios: error: give OLD.json NEW.json, or --old FILE... --new FILE...", file=sys.stderr)
            return 2
        old_files, new_files = [args.files[0]], [args.files[1]]
    if not old_files or not new_files:
        print("helios: error: give OLD.json NEW.json, or --old FILE... --new FILE...", file=sys.stderr)
        return 2
    try:
        old = [load(p) for p in old_files]
        new = [load(p) for p in new_files]
        if not 0.5 <= args.level < 1.0:
            raise CompareError(f"--level must be in [0.5, 1), got {args.level}")
        verdicts = compare(old, new, ignore_device=args.ignore_device, run_noise=args.run_noise / 100.0,
                           level=args.level)
    except CompareError as e:
        print(f"helios: cannot compare: {e}", file=sys.stderr)
        return 2
    print(table(verdicts))
    print()
    print(commit_line(verdicts, _gpu_label(new[0]), args.summary))
    return exit_status(verdicts, args.fail_on_regression)


def cmd_check_devices(args: argparse.Namespace) -> int:
    """--devices: the same fuzz (same seed, same shapes) on every GPU, concurrently."""
    import tempfile
    from .device import identities
    from .fleet import device_indices, run_devices
    infos = identities()
    indices = device_indices(args.devices, infos)
    _, child = _child_argv(args, "check", ["--devices", "--devices-serial"])
    with tempfile.TemporaryDirectory(prefix="helios-check-") as tmp:
        entries = run_devices(child, indices, infos, Path(tmp) / "check", args.devices_serial, command="check")
        for e in entries:
            tail = Path(e["log"]).read_text(encoding="utf-8", errors="replace").strip().splitlines()
            print(f"device {e['index']} ({e['name']}, {e['uuid']}): exit {e['rc']}: "
                  f"{tail[-1] if tail else 'no output'}")
            for line in tail[:-1]:
                if line.startswith("FAIL"):
                    print(f"  {line}")
    rcs = [e["rc"] for e in entries]
    # 1: any failure anywhere; 2 only when every device was skipped
    return 1 if 1 in rcs else 2 if all(r == 2 for r in rcs) else max(rcs)


def cmd_check_attention(args: argparse.Namespace) -> int:
    """--attention: exit 0 pass, 1 any failure, 2 skipped (no device, or no CUDA
    oracle with --oracle=sdpa: the float64 checks still run and a failure is still 1)."""
    from .attn_fuzz import SdpaOracle, attention_fuzz
    try:
        dev = _open(args)
    except _helios.NoDeviceError as e:
        print(f"helios check --attention: skipped: no Vulkan device ({e})")
        return 2
    oracle, why = None, None
    with dev:
        if args.oracle == "sdpa":
            try:
                oracle = SdpaOracle(dev.info["uuid"])
            except (ImportError, RuntimeError) as e:
                why = str(e)
        print(f"environment: {oracle.environment() if oracle else 'float64 reference only'}; "
              f"Helios fp16 in/out on {dev.info['name']}; atol={args.atol} rtol={args.rtol}")
        failures = n = 0
        for case in attention_fuzz(dev, args.fuzz, args.seed, matrix=args.matrix == "seed003",
                                   variant=args.variant,
                                   oracle=oracle, max_seq=args.max_seq, atol=args.atol, rtol=args.rtol):
            n += 1
            if not case.passed:
                failures += 1
                print(f"FAIL #{case.index} {case.label()}: float64 {case.float64}"
                      + (f"; sdpa {case.sdpa}" if case.sdpa else ""))
            elif args.verbose:
                print(f"ok   #{case.index} {case.label()}")
    print(f"{n - failures} passed, {failures} failed (attention fuzz seed {args.seed}"
          f"{', seed 003 matrix' if args.matrix == 'seed003' else ''})")
    if failures:
        return 1
    if oracle is None and args.oracle == "sdpa":
        print(f"helios check --attention: skipped: no CUDA oracle ({why}); float64 checks passed. "
              f"--oracle=float64 accepts them alone.")
        return 2
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .fuzz import fuzz
    if getattr(args, "devices", None):
        return cmd_check_devices(args)
    if args.attention:
        return cmd_check_attention(args)
    try:
        dev = _open(args)
    except _helios.NoDeviceError as e:
        print(f"helios check: skipped: no Vulkan device ({e})")
        return 2
    failures = 0
    with dev:
        variants = [dev.check_variant(args.variant)] if args.variant else None
        n = 0
        for case in fuzz(dev, args.fuzz, args.seed, variants=variants, max_dim=args.max_dim,
                         atol=args.atol, rtol=args.rtol):
            n += 1
            if not case.passed:
                failures += 1
                print(f"FAIL #{case.index} {shape_str(case.shape)} out={case.out_dtype} "
                      f"{case.variant}: {case.line}")
            elif args.verbose:
                print(f"ok   #{case.index} {shape_str(case.shape)} out={case.out_dtype} {case.variant}")
    print(f"{n - failures} passed, {failures} failed (fuzz seed {args.seed})")
    return 1 if failures else 0


def cmd_tune(args: argparse.Namespace) -> int:
    from . import tune as tuner
    shapes = parse_shapes(args.shapes)
    with _open(args) as dev:
        if args.candidates:
            cands = [dev.check_variant(v) for v in tuner.read_variant_list(args.candidates)]
        else:
            cands = tuner.candidates(dev)
        print(f"helios tune: {len(cands)} candidates x {len(shapes)} shapes on {dev.info['name']}",
              file=sys.stderr)
        try:
            results = tuner.tune(dev, shapes, variants=cands, iters=args.iters, warmup=args.warmup,
                                 warmup_ms=args.warmup_ms, seed=args.seed,
                                 log=lambda s: print(s, file=sys.stderr, flush=True))
        except RuntimeError as e:
            if isinstance(e, _helios.HeliosError):
                raise
            print(f"helios: {e}", file=sys.stderr)
            return 1
        path = Path(args.cache) if args.cache else None
        if args.dry_run:
            print("helios tune: --dry-run, cache not written", file=sys.stderr)
        else:
            path = tuner.store(results, dev.info, path)
            print(f"helios tune: wrote {len(results)} picks to {path}", file=sys.stderr)
        if args.json:
            print(json.dumps([{"shape": shape_str(r.shape), "bucket": r.bucket, "variant": r.variant,
                               "median_ms": r.median_ms, "candidates": r.candidates} for r in results],
                             indent=1))
        else:
            for r in results:
                print(f"{shape_str(r.shape):>16} {r.median_ms:9.4f} ms  {r.variant}")
    return 0


def _expand_dirs(paths: Sequence[str]) -> list[str]:
    """Directories stand for the .json files in them (sorted)."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(str(q) for q in Path(p).glob("*.json"))
            if not found:
                raise UsageError(f"{p}: a directory with no .json result in it")
            out.extend(found)
        else:
            out.append(p)
    return out


def cmd_report(args: argparse.Namespace) -> int:
    from .fleet import fleet_from_files, fleet_markdown
    from .report import report
    try:
        files = _expand_dirs(args.files)
        files = [f for f in files if json.loads(Path(f).read_text(encoding="utf-8")).get("schema")
                 != "helios-fleet/1"] if len(files) > 1 else files
        print(report(files, markdown=args.md, png_dir=args.png))
        fleet = fleet_from_files(files) if len(files) > 1 else None
        if fleet and len(fleet["gpus"]) > 1:   # several GPUs, hosts or ranks: one fleet table
            print("\nfleet (GPU = host/PCI address or UUID/rank):\n" + fleet_markdown(fleet), end="")
    except ImportError as e:
        print(f"helios: error: figures need matplotlib (pip install helios[notebook]): {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print(f"helios: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        print(f"helios: error: a result file is malformed ({type(e).__name__}: {e}); "
              f"expected helios-bench/1 or helios-sweep/1-2 files as written by helios", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="helios", epilog=EXIT_CODES,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Vulkan cooperative-matrix matmul, "
                                "measured against CUDA.")
    p.add_argument("--device", type=int, default=None,
                   help="Vulkan device index (default: HELIOS_DEVICE, else the best GPU)")
    p.add_argument("--disable-coop", action="store_true",
                   help="use the scalar path only (like HELIOS_DISABLE_COOP=1)")
    sub = p.add_subparsers(dest="command", required=True)

    pi = sub.add_parser("info", help="print the device's capabilities and cooperative-matrix table")
    pi.add_argument("--json", action="store_true", help="print the full report as JSON, variants included")
    pi.set_defaults(func=cmd_info)

    pt = sub.add_parser("time", help="GPU-timed matmul per shape, gated by a correctness check; "
                        "torch.cuda timed the same way when available")
    pt.add_argument("--shapes", default="small",
                    help="comma list of MxNxK and/or named sets (small, canonical, large, llm); "
                         "default: small")
    pt.add_argument("--iters", type=int, default=20, help="timed iterations per shape (default 20)")
    pt.add_argument("--warmup", type=int, default=5, help="untimed warm-up iterations (default 5)")
    pt.add_argument("--variant", default=None, help="kernel variant string (default: the device's default)")
    pt.add_argument("--check-shape", "--checkShape", dest="check_shape", default="384x384x384",
                    help="shape of the correctness check run first (default 384x384x384)")
    pt.add_argument("--atol", type=float, default=ATOL, help=f"absolute tolerance (default {ATOL})")
    pt.add_argument("--rtol", type=float, default=RTOL, help=f"relative tolerance (default {RTOL})")
    pt.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    pt.add_argument("--no-cuda", action="store_true", help="do not time torch.cuda even if present")
    pt.add_argument("--out", default=None,
                    help="write the results as JSON to this .json file (checked before timing starts)")
    pt.add_argument("--force", action="store_true", help="replace an existing --out file")
    pt.set_defaults(func=cmd_time)

    pb = sub.add_parser("bench", help="the CUDA-parity protocol: gate, interleaved GPU timing of Helios "
                        "and a reference, statistics, JSON (the seeds' `alpha bench --suite=cuda`)")
    pb.add_argument("--suite", default="cuda", help="benchmark suite; only 'cuda' (Helios vs a reference)")
    pb.add_argument("--workload", default="matmul", choices=["matmul", "attention"],
                    help="matmul (default), or attention: seeds 003/004's suite, Helios's flash-attention "
                         "forward vs every torch SDPA backend")
    pb.add_argument("--shapes", default=None,
                    help="matmul: comma list of MxNxK and/or named sets: canonical (1024/2048/3072 cubes), "
                         "large (4096/8192), llm (transformer projections), small; default canonical. "
                         "attention: BxHxSxd and/or sets seed004 (S=128..256), seed003 (32x8x512x64), "
                         "anchor (the ggml anchor table), long (S=2048..8192, d=128), small; default "
                         "seed004,seed003,long")
    pb.add_argument("--causal", action="store_true",
                    help="attention: causal masking (torch's is_causal; FLOPs counted for the half computed)")
    pb.add_argument("--sdpa-backends", dest="sdpa_backends", default=None,
                    help="attention: torch SDPA backends to time, comma list of flash, cudnn, efficient, "
                         "math (default all; one that refuses a shape is recorded as unavailable)")
    pb.add_argument("--iters", type=int, default=100, help="timed iterations per side, shape and round (default 100)")
    pb.add_argument("--warmup", type=int, default=10,
                    help="untimed warm-up launches before them, at least (default 10)")
    pb.add_argument("--warmup-ms", "--warmupMs", dest="warmup_ms", type=float, default=200.0,
                    help="and at least this many ms of GPU work of warm-up, so an idle GPU's clocks "
                         "ramp up first; the launches used are recorded per row (default 200)")
    pb.add_argument("--dtype", default="float16", choices=["float16"],
                    help="input dtype (float16; bf16 inputs are not implemented yet)")
    pb.add_argument("--variant", "--heliosVariant", dest="variant", default="matmul",
                    help="'matmul' or 'auto' (per shape: the `helios tune` pick for its bucket, else "
                         "the built-in default for the shape) or one variant string from "
                         "`helios info --json` for every shape")
    pb.add_argument("--check", type=_bool, nargs="?", const=True, default=True,
                    help="gate the run on the check shape and check every timed output "
                         "(default true; --check=false gives results marked untrusted)")
    pb.add_argument("--check-shape", "--checkShape", dest="check_shape", type=_shape_arg,
                    default=(384, 384, 384), help="shape of the gate (default 384x384x384)")
    pb.add_argument("--atol", type=float, default=ATOL, help=f"gate absolute tolerance (default {ATOL})")
    pb.add_argument("--rtol", type=float, default=RTOL, help=f"gate relative tolerance (default {RTOL})")
    pb.add_argument("--repeats", type=int, default=1,
                    help="rounds; each round times every shape on both sides, alternating which "
                         "goes first (default 1)")
    pb.add_argument("--flush-l2", "--flushL2", dest="flush_l2", action="store_true",
                    help="cold mode: overwrite 256 MiB before each sample, outside the timed region")
    pb.add_argument("--ref", default="auto", choices=["auto", "torch", "cublas", "numpy", "sdpa"],
                    help="reference: torch.cuda, the built-in cuBLASLt module, or numpy on the CPU "
                         "(labelled NOT CUDA); auto = torch, else cublas, else numpy. attention: sdpa "
                         "(torch SDPA) or numpy; auto = sdpa, else numpy")
    pb.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    pb.add_argument("--runs", type=_positive_int, default=1,
                    help="independent runs in one invocation (the seeds' '3 runs' protocol): each "
                         "with its own clock ramp and warm-up, recorded per round "
                         "(rows[].helios.round_runs) so compare sees run-to-run noise (default 1)")
    pb.add_argument("--out", default=None,
                    help="write the helios-bench/1 JSON to this .json file, and the markdown table "
                         "beside it (.md); checked before anything is timed, written atomically")
    pb.add_argument("--force", action="store_true", help="replace existing --out files")
    pb.add_argument("--devices", default=None, metavar="all|I,J,...",
                    help="one independent bench per Vulkan GPU ('all': every hardware GPU), run "
                         "concurrently, each pinned to its GPU (--device, and CUDA_VISIBLE_DEVICES by "
                         "UUID on NVIDIA); --out names the fleet summary, per-device results beside it")
    pb.add_argument("--devices-serial", dest="devices_serial", action="store_true",
                    help="with --devices: one GPU after another instead of all at once")
    pb.set_defaults(func=cmd_bench, argv=None)

    pc = sub.add_parser("compare", help="per-shape FASTER / SLOWER / SAME / INCONCLUSIVE between "
                        "bench results, beyond run-to-run noise; exit 0 no confident regression, "
                        "1 a confident regression (above --fail-on-regression), 2 bad input",
                        description=_compare_doc(), formatter_class=argparse.RawDescriptionHelpFormatter)
    pc.add_argument("files", nargs="*", help="OLD.json NEW.json")
    pc.add_argument("--old", nargs="+", help="several OLD results, pooled")
    pc.add_argument("--new", nargs="+", help="several NEW results, pooled")
    pc.add_argument("--ignore-device", action="store_true",
                    help="compare results from different devices or drivers anyway")
    pc.add_argument("--summary", default="<change summary>",
                    help="change summary for the printed commit-message line")
    pc.add_argument("--fail-on-regression", dest="fail_on_regression", type=float, default=None,
                    metavar="PCT", help="CI gate: exit 1 only for a confident regression larger than "
                    "PCT percent (default: any confident regression)")
    pc.add_argument("--level", type=float, default=0.95,
                    help="confidence level of the interval (default 0.95; a CI gate over many shapes "
                         "or a noisy device may want 0.99)")
    pc.add_argument("--run-noise", dest="run_noise", type=float, default=1.5, metavar="PCT",
                    help="between-run noise (CV, percent) assumed for a side with a single run, and "
                         "the least assumed with several (default 1.5)")
    pc.set_defaults(func=cmd_compare)

    pk = sub.add_parser("check", help="correctness fuzzing: random shapes x variants vs float64; "
                        "exit 0 pass, 1 fail, 2 skipped (no device)")
    pk.add_argument("--fuzz", type=_positive_int, default=50, help="number of random cases (default 50)")
    pk.add_argument("--seed", type=int, default=0, help="seed (default 0); a failure is reproducible from it")
    pk.add_argument("--variant", default=None, help="fuzz one variant only (default: all the device lists)")
    pk.add_argument("--max-dim", type=int, default=700, help="largest M, N, K drawn (default 700)")
    pk.add_argument("--atol", type=float, default=ATOL, help=f"absolute tolerance (default {ATOL})")
    pk.add_argument("--rtol", type=float, default=RTOL, help=f"relative tolerance (default {RTOL})")
    pk.add_argument("--verbose", "-v", action="store_true", help="print passing cases too")
    pk.add_argument("--attention", action="store_true",
                    help="fuzz attention instead (seed 003): the 27-config matrix causal and not, then "
                         "--fuzz random odd shapes, vs float64 and torch SDPA; exit 2 when no CUDA oracle")
    pk.add_argument("--matrix", default="seed003", choices=["seed003", "none"],
                    help="attention: run seed 003's 27-config matrix first (default) or not")
    pk.add_argument("--oracle", default="sdpa", choices=["sdpa", "float64"],
                    help="attention: sdpa (default: torch SDPA and float64; skipped, exit 2, without "
                         "CUDA) or float64 alone")
    pk.add_argument("--max-seq", dest="max_seq", type=_positive_int, default=300,
                    help="attention: longest random sequence drawn (default 300)")
    pk.add_argument("--devices", default=None, metavar="all|I,J,...",
                    help="the same fuzz (same seed, same shapes) on every listed Vulkan GPU, each in its "
                         "own process, concurrently; exit 1 if any device fails")
    pk.add_argument("--devices-serial", dest="devices_serial", action="store_true",
                    help="with --devices: one GPU after another")
    pk.set_defaults(func=cmd_check)

    pu = sub.add_parser("tune", help="time candidate variants per shape bucket and store the fastest "
                        "that passed its check in the on-disk cache that variant=None/'auto' uses")
    pu.add_argument("--shapes", default="canonical,large,llm",
                    help="shapes to tune: MxNxK and/or named sets (default canonical,large,llm); each "
                         "pick serves its bucket (every dimension rounded up to a multiple of 128)")
    pu.add_argument("--candidates", default=None,
                    help="comma-separated variant strings or @FILE (default: the built-in templates "
                         "for this device's coop shapes, plus the default)")
    pu.add_argument("--iters", type=int, default=20, help="timed launches per candidate and shape (default 20)")
    pu.add_argument("--warmup", type=int, default=5, help="minimum warm-up launches (default 5)")
    pu.add_argument("--warmup-ms", dest="warmup_ms", type=float, default=200.0,
                    help="and at least this many ms of warm-up work per candidate (default 200)")
    pu.add_argument("--seed", type=int, default=0, help="seed of the inputs and checks (default 0)")
    pu.add_argument("--cache", default=None,
                    help="cache file (default: HELIOS_TUNE_CACHE, else ~/.cache/helios/tune.json)")
    pu.add_argument("--dry-run", action="store_true", help="time and print, but do not write the cache")
    pu.add_argument("--json", action="store_true", help="print the picks and every candidate's time as JSON")
    pu.set_defaults(func=cmd_tune)

    ps = sub.add_parser("suite", help="seed 002's workload suite: a transformer MLP block "
                        "(gelu(x@W1+b1)@W2+b2) through Helios (resident chain, and per call), torch eager "
                        "and torch.compile; p50/p95 latency, tokens/s, peak memory; JSON + markdown",
                        description=__import__("helios.suite", fromlist=["x"]).__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ps.add_argument("workload", choices=["mlp"], help="the workload (mlp)")
    ps.add_argument("--tokens", type=_int_list, default=[512, 1024, 2048, 4096],
                    help="token counts, comma-separated (default 512,1024,2048,4096)")
    ps.add_argument("--d-model", dest="d_model", type=_positive_int, default=4096,
                    help="model width d (default 4096)")
    ps.add_argument("--hidden", type=_positive_int, default=14336, help="MLP hidden size (default 14336)")
    ps.add_argument("--iters", type=_positive_int, default=50, help="timed forwards per adapter (default 50)")
    ps.add_argument("--warmup", type=int, default=10, help="untimed forwards first (default 10)")
    ps.add_argument("--adapters", default="helios,helios_per_call,torch_eager,torch_compile",
                    help="comma-separated subset of helios, helios_per_call, torch_eager, torch_compile "
                         "(default all; torch ones are recorded as skipped without CUDA)")
    ps.add_argument("--seed", type=int, default=0, help="seed of the inputs (default 0)")
    ps.add_argument("--atol", type=float, default=ATOL, help=f"gate absolute tolerance (default {ATOL})")
    ps.add_argument("--rtol", type=float, default=RTOL, help=f"gate relative tolerance (default {RTOL})")
    ps.add_argument("--tag", default="mlp", help="label stored in the result (seed 002's --tag)")
    ps.add_argument("--out", default=None,
                    help="write the JSON result here and the markdown table beside it (.md)")
    ps.add_argument("--force", action="store_true", help="replace existing --out files")
    ps.set_defaults(func=cmd_suite)

    pr = sub.add_parser("report", help="tables and figures from bench (helios-bench/1) and sweep "
                        "(helios-sweep/1, /2) result files; exit 2 for unreadable or malformed files")
    pr.add_argument("files", nargs="+", help="result JSON files, or directories of them (e.g. one "
                    "result per rank from a Slurm job: merged into one fleet table)")
    pr.add_argument("--md", action="store_true", help="print markdown tables instead of plain text")
    pr.add_argument("--png", metavar="DIR", default=None,
                    help="also write figures to DIR: TFLOP/s by shape, ratio vs the 1.25x parity line, "
                         "run-to-run variance, and a heatmap per sweep file")
    pr.set_defaults(func=cmd_report)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) in (cmd_bench, cmd_check):
        args.argv = list(argv) if argv is not None else None
    try:
        return int(args.func(args))
    except _helios.NoDeviceError as e:
        print(f"helios: no Vulkan device: {e}", file=sys.stderr)
        return 2
    except UsageError as e:
        print(f"helios: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, _helios.UnsupportedError, _helios.DeviceMemoryError) as e:
        print(f"helios: error: {e}", file=sys.stderr)   # a request this input or device cannot serve
        return 2
    except _helios.HeliosError as e:
        print(f"helios: device failure: {e}", file=sys.stderr)
        return 3
