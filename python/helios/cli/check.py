"""`helios check`: correctness fuzzing of products and attention."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Optional

from .. import _helios
from ..check import tolerances
from ..harness.protocol.shapes import shape_str
from ..harness.workloads.fuzz import FORMS
from .common import UsageError, child_argv, int_list, open_device, positive_int
from .common_args import Grouped, add_seed, add_tolerances


def cmd_check_devices(args: argparse.Namespace) -> int:
    """--devices: the same fuzz (same seed, same shapes) on every GPU, concurrently."""
    import tempfile

    from ..harness.runs.fleet import device_indices, run_devices
    from ..launcher import identities

    infos = identities()
    indices = device_indices(args.devices, infos)
    _, child = child_argv(args, "check", ["--devices", "--devices-serial"])
    with tempfile.TemporaryDirectory(prefix="helios-check-") as tmp:
        entries = run_devices(child, indices, infos, Path(tmp) / "check", args.devices_serial, command="check")
        for e in entries:
            tail = Path(e["log"]).read_text(encoding="utf-8", errors="replace").strip().splitlines()  # files: our log
            print(
                f"device {e['index']} ({e['name']}, {e['uuid']}): exit {e['rc']}: {tail[-1] if tail else 'no output'}"
            )
            for line in tail[:-1]:
                if line.startswith("FAIL"):
                    print(f"  {line}")
    rcs = [e["rc"] for e in entries]
    # 1: any failure anywhere; 2 only when every device was skipped
    return 1 if 1 in rcs else 2 if all(r == 2 for r in rcs) else max(rcs)


class FirstUses:
    """On a CPU device, a case that is the first use of a kernel is announced before it
    runs and its time said after (mostly the driver's compile: a CPU driver compiles on
    first dispatch); elsewhere nothing. `announce` goes to the fuzz, `done` after each case."""

    def __init__(self, cpu: bool) -> None:
        self.announce = self._announce if cpu else None
        self._started: list[float] = []

    def _announce(self, line: str) -> None:
        self._started.append(time.perf_counter())
        print(f"  {line}", file=sys.stderr, flush=True)

    def done(self, index: int) -> None:
        if self._started:
            print(
                f"  case #{index} took {time.perf_counter() - self._started.pop():.1f} s", file=sys.stderr, flush=True
            )


def _device_or_skip(args: argparse.Namespace, who: str) -> Optional[Any]:
    """The device the check runs on, or None having said the check is skipped (no device)."""
    try:
        return open_device(args)
    except _helios.NoDeviceError as e:
        print(f"{who}: skipped: no Vulkan device ({e})")
        return None


def cmd_check_attention(args: argparse.Namespace) -> int:
    """--attention: exit 0 pass, 1 any failure, 2 skipped (no device, or no CUDA
    oracle with --oracle=sdpa: the float64 checks still run and a failure is still 1)."""
    from ..harness.protocol.progress import Progress
    from ..harness.workloads.attention_fuzz import GRID_MATRIX, SdpaOracle, attention_fuzz

    dev = _device_or_skip(args, "helios check --attention")
    if dev is None:
        return 2
    oracle, why = None, None
    with dev:
        if args.oracle == "sdpa":
            try:
                oracle = SdpaOracle(dev.info["uuid"])
            except (ImportError, RuntimeError) as e:
                why = str(e)
        atol, rtol = tolerances(args.dtype, args.atol, args.rtol)
        print(
            f"environment: {oracle.environment() if oracle else 'float64 reference only'}; "
            f"Helios {args.dtype} in/out on {dev.info['name']}; atol={atol} rtol={rtol}"
            + (
                "; a CPU device compiles each new pipeline first, 1-150 s each, cached after"
                + ("" if args.head_dims else "; head dims up to 64 (--head-dims for more)")
                if dev.info["device_type"] == "cpu"
                else ""
            ),
            flush=True,
        )
        failures = n = 0
        total = args.fuzz + (2 * len(GRID_MATRIX) if args.matrix == "grid" else 0)
        bar = Progress(total, unit="case", log_every=10)
        first = FirstUses(dev.info["device_type"] == "cpu")
        try:
            for case in attention_fuzz(
                dev,
                args.fuzz,
                args.seed,
                matrix=args.matrix == "grid",
                variant=args.variant,
                oracle=oracle,
                max_seq=args.max_seq,
                atol=atol,
                rtol=rtol,
                head_dims=args.head_dims,
                dtype=args.dtype,
                backward=args.backward,
                announce=first.announce,
            ):
                n += 1
                first.done(case.index)
                if not case.passed:
                    failures += 1
                    print(
                        f"FAIL #{case.index} {case.label()}: float64 {case.float64}"
                        + (f"; sdpa {case.sdpa}" if case.sdpa else "")
                    )
                elif args.verbose:
                    print(f"ok   #{case.index} {case.label()}")
                bar.step(case.label())
        except KeyboardInterrupt:
            raise interrupted_after(n, failures, f"attention fuzz seed {args.seed}") from None
        bar.close()
    print(
        f"{n - failures} passed, {failures} failed (attention{' backward' if args.backward else ''} fuzz seed "
        f"{args.seed}"
        f"{', the 27-case grid' if args.matrix == 'grid' else ''})"
    )
    if failures:
        return 1
    if oracle is None and args.oracle == "sdpa":
        print(
            f"helios check --attention: skipped: no CUDA oracle ({why}); float64 checks passed. "
            f"--oracle=float64 accepts them alone."
        )
        return 2
    return 0


def cmd_check_decode(args: argparse.Namespace) -> int:
    """--decode: exit 0 pass, 1 any failure, 2 skipped (no device)."""
    from ..harness.workloads.decode.fuzz import decode_fuzz, most_rows

    given = [flag for flag, on in (("--attention", args.attention), ("--backward", args.backward),
                                    ("--forms", args.forms != FORMS), ("--head-dims", args.head_dims is not None),
                                    ("--matrix", args.matrix != "grid"), ("--oracle", args.oracle != "sdpa")) if on]  # fmt: skip
    if given:
        raise UsageError(
            f"--decode fuzzes the decode attention alone; {', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to it"
        )
    dev = _device_or_skip(args, "helios check --decode")
    if dev is None:
        return 2
    if args.max_seq > most_rows(dev.info):
        why = (
            f"--max-seq {args.max_seq}: a cache of that many rows at the widest draw is past what "
            f"{dev.info['name']} binds a buffer (max_storage_buffer_range); at most {most_rows(dev.info)}"
        )
        dev.close()
        raise UsageError(why)
    atol, rtol = tolerances(args.dtype, args.atol, args.rtol)
    with dev:
        print(f"decode attention over a KV cache, {args.dtype}, on {dev.info['name']}; atol={atol} rtol={rtol}")
        cases = decode_fuzz(dev, args.fuzz, args.seed, dtype=args.dtype, max_seq=args.max_seq, atol=atol, rtol=rtol)
        return _report_cases(cases, args.verbose, f"decode attention fuzz seed {args.seed}")


def _report_cases(cases: Any, verbose: bool, what: str) -> int:
    """A fuzz's cases as they come (FAIL lines, and ok ones when verbose), then the tally:
    exit 1 on any failure, else 0; Ctrl-C says how far it got."""
    failures = n = 0
    try:
        for case in cases:
            n += 1
            if not case.passed:
                failures += 1
                print(f"FAIL #{case.index} {case.label()}: {case.line}")
            elif verbose:
                print(f"ok   #{case.index} {case.label()}")
    except KeyboardInterrupt:
        raise interrupted_after(n, failures, what) from None
    print(f"{n - failures} passed, {failures} failed ({what})")
    return 1 if failures else 0


def cmd_check_train(args: argparse.Namespace) -> int:
    """--train: exit 0 pass, 1 any failure, 2 skipped (no device)."""
    from ..harness.workloads.train_fuzz import train_fuzz

    given = [flag for flag, on in (("--attention", args.attention), ("--backward", args.backward),
                                    ("--decode", args.decode), ("--variant", bool(args.variant))) if on]  # fmt: skip
    if given:
        verb = "does" if len(given) == 1 else "do"
        raise UsageError(f"--train fuzzes the training step's own ops; {', '.join(given)} {verb} not apply to it")
    dev = _device_or_skip(args, "helios check --train")
    if dev is None:
        return 2
    with dev:
        print(f"a training step's ops (helios.train_ops), logits in {args.dtype}, on {dev.info['name']}, vs float64")
        return _report_cases(train_fuzz(dev, args.fuzz, args.seed, dtype=args.dtype), args.verbose,
                             f"training ops fuzz seed {args.seed}")  # fmt: skip


def cmd_check(args: argparse.Namespace) -> int:
    if getattr(args, "devices", None):
        return cmd_check_devices(args)
    if args.train:
        return cmd_check_train(args)
    if args.decode:
        return cmd_check_decode(args)
    if args.attention:
        if args.variant and "," in args.variant:
            raise UsageError("--attention fuzzes one variant (--variant V), not a list")
        return cmd_check_attention(args)
    if args.backward:
        raise UsageError("--backward belongs to --attention (the attention backward's fuzz)")
    dev = _device_or_skip(args, "helios check")
    if dev is None:
        return 2
    from ..harness.workloads.fuzz import bf16_aware_variants

    atol, rtol = tolerances(args.dtype, args.atol, args.rtol)
    with dev:
        variants = (
            [dev.check_variant(v.strip(), args.dtype) for v in args.variant.split(",") if v.strip()]
            if args.variant
            else bf16_aware_variants(dev, args.dtype)
        )
        if not variants:
            raise UsageError(f"--variant {args.variant!r} names no variant")
        cpu = dev.info["device_type"] == "cpu"
        reuse = cpu and not args.new_pipelines  # each new combination is a CPU compile of up to minutes
        # The first line at once, so a piped run is never silent while the first pipelines compile.
        print(
            f"helios check: {args.fuzz} cases; {args.dtype} inputs: {len(variants)} variants on {dev.info['name']} "
            f"(seed {args.seed}; atol={atol} rtol={rtol})"
            + ("; a CPU device compiles each new pipeline first, 1-150 s each, cached after" if cpu else "")
            + (
                "; once every variant and op form has run, new shapes on the pipelines already compiled "
                "(--new-pipelines: every case draws afresh)"
                if reuse and args.fuzz > len(variants)
                else ""
            ),
            flush=True,
        )
        n, failures, seen_variants, seen_forms = _run_fuzz(args, dev, variants, (atol, rtol), cpu, reuse)
    print(
        f"covered {len(seen_variants)} of {len(variants)} variants"
        + ("" if len(seen_variants) == len(variants) else f" (--fuzz {len(variants)} or more covers all)")
        + f"; op forms: {', '.join(sorted(seen_forms))}"
    )
    print(f"{n - failures} passed, {failures} failed (fuzz seed {args.seed})")
    return 1 if failures else 0


def _run_fuzz(args: argparse.Namespace, dev: Any, variants: list[str], tolerances: tuple[float, float], cpu: bool,
              reuse: bool) -> tuple[int, int, set, set]:  # fmt: skip
    """The cases, a line for each failure (and each pass with --verbose) and a progress
    bar: (cases, failures, variants seen, op forms seen)."""
    from ..harness.protocol.progress import Progress
    from ..harness.workloads.fuzz import fuzz

    n = failures = done = 0
    bar = Progress(args.fuzz, unit="case", log_every=25)
    first = FirstUses(cpu)
    seen_variants: set = set()
    seen_forms: set = set()
    atol, rtol = tolerances
    cases = fuzz(dev, args.fuzz, args.seed, variants=variants, max_dim=args.max_dim, atol=atol, rtol=rtol,
                 forms=args.forms, dtype=args.dtype, announce=first.announce, reuse_pipelines=reuse)  # fmt: skip
    try:
        for case in cases:
            n += 1
            first.done(case.index)
            seen_variants.add(case.variant)
            seen_forms.add(case.form.split("(")[0])
            label = f"#{case.index} {shape_str(case.shape)} {case.form} out={case.out_dtype} {case.variant}"
            if not case.passed:
                failures += 1
                print(f"FAIL {label}: {case.line}")
            elif args.verbose:
                print(f"ok   {label}")
            bar.step(label)
            done = n
    except KeyboardInterrupt:
        raise interrupted_after(done, failures, f"fuzz seed {args.seed}") from None
    finally:
        bar.close()
    return n, failures, seen_variants, seen_forms


def interrupted_after(n: int, failures: int, what: str) -> KeyboardInterrupt:
    """The interrupt, saying how far the cases got (check writes no file)."""
    return KeyboardInterrupt(
        f"interrupted after {n} cases: {n - failures} passed, {failures} failed ({what}); check writes no file"
    )


def head_dims_arg(text: str) -> tuple[int, ...]:
    return tuple(int_list(text))


def forms_arg(text: str) -> tuple[str, ...]:
    forms = tuple(f.strip() for f in text.split(",") if f.strip())
    bad = [f for f in forms if f not in FORMS]
    if bad or not forms:
        raise argparse.ArgumentTypeError(
            f"unknown form(s) {', '.join(bad) or '(none)'}; choose from {', '.join(FORMS)}"
        )
    return forms


# Long: the command's flags, one declaration each in the order --help prints them.
def register(sub: Any) -> None:
    pk = Grouped(
        sub.add_parser(
            "check",
            help="correctness fuzzing: case i runs variant i (cycling through every "
            "variant; --fuzz >= their count covers all) on a random odd shape and op form (plain, "
            "transposed operand, batched, fused epilogue) vs float64; "
            "exit 0 pass, 1 fail, 2 skipped (no device)",
        )
    )
    pk.add_argument("--fuzz", type=positive_int, default=50, help="number of random cases (default 50)")
    add_seed(pk, "the cases", "; a failure is reproducible from it")
    pk.add_argument(
        "--variant",
        default=None,
        help="fuzz these variants only, comma-separated (default: all the device lists; "
        "with --attention: one attention variant)",
    )
    pk.add_argument("--max-dim", type=positive_int, default=700, help="largest M, N, K drawn (default 700)")
    add_tolerances(pk, "")
    pk.add_argument("--verbose", "-v", action="store_true", help="print passing cases too")
    pk.add_argument(
        "--new-pipelines",
        dest="new_pipelines",
        action="store_true",
        help="on a CPU device too, every case draws its variant, op form and output type afresh (by default there, "
        "once every variant and op form has run, cases reuse the pipelines already compiled and change only the "
        "shape: each new combination is a CPU compile of up to minutes; a GPU always draws afresh)",
    )
    pk.add_argument(
        "--dtype",
        choices=["float16", "bfloat16"],
        default="float16",
        help="input dtype of products and attention (default float16). bfloat16 fuzzes every variant "
        "valid for it (bf16 cooperative matrices where the device has them, else the scalar fp32 path) "
        "with rtol at least 0.016 (two bfloat16 ulps)",
    )
    pk.add_argument(
        "--attention",
        action="store_true",
        help="fuzz attention instead: the 27-config matrix (S 448/512/640 x B 16/32/48 x H 4/8/16, d 64) causal and not, then "
        "--fuzz random odd shapes, vs float64 and torch SDPA; exit 2 when no CUDA oracle",
    )
    pk.add_argument(
        "--decode",
        action="store_true",
        help="fuzz the decode step's attention over a KV cache instead (a plan's attention_decode): random heads, "
        "head dims dividing 256, caches of up to --max-seq rows and positions in them, vs float64, the appended "
        "K and V compared bit for bit",
    )
    pk.add_argument(
        "--train",
        action="store_true",
        help="fuzz a training step's own ops instead (helios.train_ops): the embedding and its token and position "
        "gradients, cross-entropy (logits in --dtype), column sums, sums of squares and AdamW with gradient "
        "clipping, one op a case in turn, on random sizes vs float64",
    )
    pk.add_argument(
        "--backward",
        action="store_true",
        help="attention: fuzz the backward (dQ, dK, dV of every backward variant, from the default forward's O "
        "and log-sum-exp), sampled heads whole vs float64 and everything vs torch SDPA's backward",
    )
    pk.add_argument(
        "--matrix",
        default="grid",
        type=lambda s: {"seed003": "grid"}.get(s, s),
        choices=["grid", "none"],
        help="attention: run the grid of 27 cases first (S 448/512/640 x B 16/32/48 x H 4/8/16, d 64; "
        "default; seed003 is its old name) or not",
    )
    pk.add_argument(
        "--oracle",
        default="sdpa",
        choices=["sdpa", "float64"],
        help="attention: sdpa (default: torch SDPA and float64; skipped, exit 2, without CUDA) or float64 alone",
    )
    pk.add_argument(
        "--max-seq",
        dest="max_seq",
        type=positive_int,
        default=300,
        help="attention: longest random sequence drawn; decode: the largest cache (default 300)",
    )
    pk.add_argument(
        "--head-dims",
        dest="head_dims",
        type=head_dims_arg,
        default=None,
        help="attention: head dimensions the random cases draw from, comma-separated "
        "(default 16,32,40,64,80,96,128; on a CPU device 16,32,40,64); each is its own kernel compile",
    )
    pk.add_argument(
        "--forms",
        type=forms_arg,
        default=FORMS,
        help="matmul: op forms the cases draw from, comma-separated among plain, trans_a, trans_b, batched, "
        "epilogue (default all)",
    )
    pk.add_argument(
        "--devices",
        default=None,
        metavar="all|I,J,...",
        help="the same fuzz (same seed, same shapes) on every listed Vulkan GPU, each in its "
        "own process, concurrently; exit 1 if any device fails",
    )
    pk.add_argument(
        "--devices-serial", dest="devices_serial", action="store_true", help="with --devices: one GPU after another"
    )
    pk.set_defaults(func=cmd_check)
