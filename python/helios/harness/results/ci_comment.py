"""The sticky PR comment of `helios ci` (markdown) from its helios-ci/1 record:
status, the verdicts table with the control-normalized column, the raw statistics,
the gates and the run's settings. Every number is the record's."""

from __future__ import annotations

from typing import Optional

from .format import md_cell

COMMENT_MARKER = "<!-- helios-ci comment -->"  # the workflow finds and updates the comment carrying it


def _ms(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.4g}"


def comment(rec: dict) -> str:
    """The sticky PR comment (markdown) from a helios-ci/1 record."""
    base, head = ((rec.get(k) or "?")[:12] for k in ("base", "head"))
    status = {0: "no regression", 1: "REGRESSION" if rec.get("verdicts") else "FAILED", 2: "could not run"}
    said = f"INTERRUPTED by {rec['interrupted']}" if rec.get("interrupted") else status.get(rec["exit"], "?")
    lines = [COMMENT_MARKER, f"### Helios perf: head `{head}` vs base `{base}`: {said}", ""]
    lines.append(rec.get("reason", ""))
    dev = rec.get("device") or {}
    if dev:
        lines += ["", f"GPU: {dev.get('name')} ({dev.get('uuid')}), driver {dev.get('driver_info') or '?'}"]
    st = rec.get("gpu_state")
    if st:

        def clock(s: dict) -> str:
            mhz = s.get("sm_clock_mhz")
            why = f" ({', '.join(s['throttle_reasons'])})" if s.get("throttle_reasons") else ""
            span = f"SM {mhz[0]:.0f}-{mhz[1]:.0f} MHz, " if mhz else ""
            return f"{span}{s['throttled_rows']}/{s['rows']} rows throttled{why}, {s['low_clock_rows']} at low clock"

        lines.append("Clocks: " + "; ".join(f"{side} {clock(s)}" for side, s in st.items()))
    if rec.get("verdicts"):
        lines += [
            "",
            "| shape | base ms | head ms | change (95% CI) | verdict | control-normalized | head vs CUDA | roof |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for v in rec["verdicts"]:
            lo, hi = ((x - 1) * 100 for x in v["ratio_ci95"])
            vs_cuda = v.get("head_speedup_vs_cuda")
            roof = v.get("roof_fraction")
            c = v.get("control")
            normalized = "-" if not c else f"{c['change_pct']:+.1f}% {c['verdict']}"
            lines.append(
                f"| {v['shape']} | {_ms(v['base_ms'])} | {_ms(v['head_ms'])} | {v['change_pct']:+.1f}% "
                f"({lo:+.1f}..{hi:+.1f}) | {v['verdict']}{f' ({r})' if (r := v.get('verdict_reason')) else ''} | "
                f"{normalized} | "
                f"{'-' if vs_cuda is None else f'{1 / vs_cuda:.2f}x CUDA time'} | "
                f"{'-' if roof is None else f'{roof * 100:.0f}%'} |"
            )
        gate = rec.get("config", {}).get("verdict_gate", "plain")
        refused = next((v["control_refused"] for v in rec["verdicts"] if v.get("control_refused")), None)
        lines += [
            "",
            f"The job's exit status reads the {gate} verdict (a SLOWER row there fails it)"
            + (
                " (control-normalized where valid: Helios's time over the reference's, per round)"
                if gate != "plain"
                else ""
            )
            + (f". Control-normalized verdict not given: {refused}." if refused else "."),
        ]
        if rec.get("reruns"):
            lines += ["", f"Measured again before counting: {', '.join(rec['reruns'])}."]
        lines += ["", "<details><summary>raw statistics</summary>", ""]
        lines += ["| shape | p | MDE | noise floor | runs base/head | run CV base/head |", "|---|---|---|---|---|---|"]
        for v in rec["verdicts"]:
            cv = "/".join("-" if c is None or c != c else f"{c:.1f}%" for c in v["run_cv_pct"])
            lines.append(
                f"| {v['shape']} | {v['p']:.3g} | {v['mde_pct']:.1f}% | {v['noise_floor_pct']:.0f}% | "
                f"{v['runs'][0]}/{v['runs'][1]} | {cv} |"
            )
        lines += ["", "</details>"]
    return "\n".join(lines + _footer(rec))


def _footer(rec: dict) -> list[str]:
    """The gates' steps and the settings the job ran with (pairs, and what stopped them)."""
    lines: list[str] = []
    gate_rec = rec.get("gate") or {}
    if gate_rec:
        lines.append("")
        for side, g in gate_rec.items():
            steps = ", ".join(s["name"] + (" ok" if s["rc"] == 0 else f" exit {s['rc']}") for s in g["steps"])
            lines.append(f"Gate {side}: {'passed' if g['passed'] else 'FAILED'} ({steps})")
    c = rec.get("config", {})
    stop = rec.get("stopping") if isinstance(rec.get("stopping"), dict) else {}
    pairs = f"{c.get('runs')} base/head pairs (ABBA)"
    if stop:
        undecided = ", ".join(md_cell(s) for s in stop.get("undecided") or []) or "none"
        pairs += f", {stop.get('pairs')} in all (stopped: {md_cell(stop.get('stopped_by'))}; undecided: {undecided})"
    return lines + [
        "",
        f"<sub>helios ci: shapes {c.get('shapes')}, {pairs}, iters {c.get('iters')}, ref {c.get('ref')}; "
        "verdicts by helios compare with per-shape noise floors: SAME only where the interval lies "
        "inside the floor.</sub>",
        "",
    ]
