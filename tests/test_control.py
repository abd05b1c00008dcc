"""The reference as an in-run control. Synthetic bench results with a
known truth: a drift that moves Helios and the reference alike (clocks, power, a
co-tenant) and a slowdown of Helios alone; the normalized verdict must call the
first SAME where the plain verdict cannot, and both must catch the second."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from helios.cli import main
from helios.harness.results.compare import compare, exit_status
from helios.harness.results.compare_table import table, verdict_dict

UUID = "e47836ec-b0e3-3bb3-1f5b-5a19013bb117"


def bench(seed: int, helios_ms: float, ref_ms: float, drift: float = 1.0, runs: int = 3, rounds: int = 2) -> dict:
    """A helios-bench/1 result of one shape: per run a run effect (0.4%), per round a
    round effect (0.3%) shared by Helios and the reference (what a clock moves), and
    launch jitter; `drift` multiplies both sides' times."""
    rng = np.random.default_rng(seed)
    hs, cs, rr = [], [], []
    for run in range(runs):
        run_effect = np.exp(rng.normal(0, 0.004))
        for _ in range(rounds):
            common = drift * run_effect * np.exp(rng.normal(0, 0.003))
            hs.append(list(helios_ms * common * np.exp(rng.normal(0, 0.002, 20))))
            cs.append(list(ref_ms * common * np.exp(rng.normal(0, 0.002, 20))))
            rr.append(run)
    return {
        "schema": "helios-bench/1",
        "status": "ok",
        "helios": {"name": "NVIDIA H100 80GB HBM3", "driver_version": 1, "uuid": UUID},
        "cuda": {"reference": "torch", "torch_version": "2.11.0+cu130", "cuda_runtime": "13.0", "gpu_uuid": UUID},
        "rows": [
            {
                "shape": "4096x4096x4096",
                "valid": True,
                "helios": {"samples_ms": hs, "round_runs": rr},
                "cuda": {"samples_ms": cs, "round_runs": rr},
            }
        ],
    }


def test_common_drift_is_same_when_normalized_and_not_plain():
    """A/A with 10% common drift: the plain verdict sees +10% (SLOWER); the
    normalized one, Helios over the reference per round, SAME (10 runs a side: enough
    for its interval to fit inside the 2% floor)."""
    [v] = compare([bench(1, 1.0, 0.5, runs=10)], [bench(2, 1.0, 0.5, drift=1.10, runs=10)])
    assert v.verdict == "SLOWER" and v.pct == pytest.approx(10, abs=1.5)
    assert v.control is not None and v.control.verdict == "SAME" and abs(v.control.pct) < 1.0
    assert v.control.old_ratio == pytest.approx(2.0, rel=0.01)
    assert exit_status([v]) == 1 and exit_status([v], gate="normalized") == 0


@pytest.mark.parametrize("slow", [1.05, 1.10])
def test_a_slowdown_of_helios_alone_is_caught_both_ways(slow):
    [v] = compare([bench(3, 1.0, 0.5)], [bench(4, slow, 0.5)])
    assert v.verdict == "SLOWER" and v.control.verdict == "SLOWER"
    assert v.control.pct == pytest.approx((slow - 1) * 100, abs=1.0)
    assert exit_status([v], gate="normalized") == 1


def test_a_slowdown_under_drift_is_caught_normalized():
    """Helios 5% slower while the machine drifts 12% faster: the plain verdict sees a
    faster Helios; the normalized one the regression."""
    [v] = compare([bench(5, 1.0, 0.5)], [bench(6, 1.05, 0.5, drift=1 / 1.12)])
    assert v.verdict == "FASTER"
    assert v.control.verdict == "SLOWER" and v.control.pct == pytest.approx(5, abs=1.0)


@pytest.mark.parametrize(
    "edit,why",
    [
        (lambda d: d["cuda"].__setitem__("torch_version", "2.10.0+cu128"), "build differs"),
        (lambda d: d["cuda"].__setitem__("gpu_uuid", "00000000-0000-0000-0000-000000000000"), "different devices"),
        (lambda d: d["cuda"].__setitem__("reference", "numpy"), "references differ"),
        (lambda d: d.pop("cuda"), "no reference"),
    ],
)
def test_the_control_is_refused_where_the_reference_changed(edit, why):
    new = bench(8, 1.0, 0.5)
    edit(new)
    [v] = compare([bench(7, 1.0, 0.5)], [new])
    assert v.control is None and why in v.control_refused
    assert "not given" in table([v]) and why in table([v])
    assert exit_status([v], gate="normalized") == exit_status([v])  # the plain verdict stands


def test_unpaired_reference_rounds_give_no_control():
    new = bench(10, 1.0, 0.5)
    new["rows"][0]["cuda"]["samples_ms"].pop()
    [v] = compare([bench(9, 1.0, 0.5)], [new])
    assert v.control is None and "pair" in v.control_refused


def test_compare_json_and_gate_flag(tmp_path, capsys):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(bench(11, 1.0, 0.5, runs=10)))
    new.write_text(json.dumps(bench(12, 1.0, 0.5, drift=1.10, runs=10)))
    assert main(["compare", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "control-normalized" in out and "| **SAME** | SLOWER |" in out
    assert main(["compare", str(old), str(new), "--gate", "normalized", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "helios-compare/1" and doc["rule"]["gate"] == "normalized" and doc["exit"] == 0
    [row] = doc["verdicts"]
    assert row["verdict"] == "SLOWER" and row["control"]["verdict"] == "SAME" and row["verdict_reason"]
    assert set(row) >= {"ratio_ci95", "mde_pct", "p", "noise_floor_pct", "runs", "control_refused"}


def test_verdict_dict_round_trips_through_json():
    [v] = compare([bench(13, 1.0, 0.5, runs=10)], [bench(14, 1.0, 0.5, runs=10)])
    d = json.loads(json.dumps(verdict_dict(v)))
    assert d["verdict"] == "SAME" and d["control"]["verdict"] == "SAME"


def test_ci_comment_shows_the_normalized_column():
    from helios.harness.results.ci_comment import comment
    from helios.harness.runs.ci_verdicts import head_verdict

    [v] = compare([bench(15, 1.0, 0.5, runs=10)], [bench(16, 1.0, 0.5, drift=1.10, runs=10)])
    rec = {
        "exit": 0,
        "base": "a" * 40,
        "head": "b" * 40,
        "reason": "no regression",
        "verdicts": [head_verdict(v)],
        "config": {"verdict_gate": "normalized"},
    }
    text = comment(copy.deepcopy(rec))
    assert "control-normalized" in text and "SAME" in text and "exit status reads the normalized verdict" in text


# ---- the kernel's identity -------------------------------------------------------------------------


def with_kernel(doc: dict, digest) -> dict:
    d = copy.deepcopy(doc)
    for row in d["rows"]:
        row["kernel"] = None if digest is None else {"code_digest": digest, "stats": [{"Register Count": 128.0}]}
    return d


@pytest.mark.parametrize(
    "old_digest,new_digest,code",
    [("00aa", "00aa", "same"), ("00aa", "00bb", "changed"), ("00aa", None, "unknown"), (None, None, "unknown")],
)
def test_each_row_says_whether_the_code_changed(old_digest, new_digest, code):
    old = with_kernel(bench(17, 1.0, 0.5), old_digest)
    new = with_kernel(bench(18, 1.08, 0.5), new_digest)
    [v] = compare([old], [new])
    assert v.verdict == "SLOWER" and v.code == code and verdict_dict(v)["code"] == code
    assert ("same code: environment or noise" in table([v])) == (code == "same")
    v.verdict = "INCONCLUSIVE"  # the note explains a confident change only
    assert "same code" not in table([v])


def with_machine_code(doc: dict, spirv: str, machine) -> dict:
    d = with_kernel(doc, spirv)
    for row in d["rows"]:
        row["kernel"]["machine_code"] = {"digest": machine, "bytes": [4096]} if machine else {"status": "no NVML"}
    return d


@pytest.mark.parametrize(
    "old,new,code",
    [
        (("00aa", "5a55"), ("00bb", "5a55"), "same"),  # new SPIR-V, the same machine code
        (("00aa", "5a55"), ("00aa", "5a66"), "changed"),  # the same SPIR-V compiled to other code
        (("00aa", "5a55"), ("00aa", None), "same"),  # a side without the machine code: SPIR-V decides
        (("00aa", "5a55"), ("00bb", None), "changed"),
    ],
)
def test_the_machine_code_decides_where_both_sides_have_it(old, new, code):
    [v] = compare([with_machine_code(bench(23, 1.0, 0.5), *old)], [with_machine_code(bench(24, 1.08, 0.5), *new)])
    assert v.code == code


def test_a_different_driver_or_device_is_changed_code():
    old = with_kernel(bench(19, 1.0, 0.5), "00aa")
    new = with_kernel(bench(20, 1.0, 0.5), "00aa")
    new["helios"]["driver_version"] = 2
    [v] = compare([old], [new], ignore_device=True)
    assert v.code == "changed"


@pytest.mark.parametrize("strict", [False, True])
def test_ci_fails_only_rows_whose_code_changed_unless_strict(strict):
    from helios.harness.runs.ci_verdicts import failing

    old = with_kernel(bench(21, 1.0, 0.5), "00aa")
    same = compare([old], [with_kernel(bench(22, 1.08, 0.5), "00aa")])
    changed = compare([old], [with_kernel(bench(22, 1.08, 0.5), "00bb")])
    unknown = compare([old], [with_kernel(bench(22, 1.08, 0.5), None)])
    for vs, fails in ((same, strict), (changed, True), (unknown, True)):
        fail, kept = failing(vs, "plain", 0.0, strict)
        assert bool(fail) == fails and len(fail) + len(kept) == 1


def test_ci_fails_the_same_kernel_from_another_engine_build():
    """The host may launch the same kernel code otherwise (grid, push constants): ci
    marks it "launch" and fails it, and its reason does not blame the environment."""
    from helios.harness.results.compare_table import _reason
    from helios.harness.runs.ci_verdicts import failing, mark_launches

    old = with_kernel(bench(21, 1.0, 0.5), "00aa")
    cases = (({"base": "e1", "head": "e1"}, "same", False), ({"base": "e1", "head": "e2"}, "launch", True),
             ({}, "launch", True))  # fmt: skip
    for engines, code, fails in cases:
        verdicts = compare([old], [with_kernel(bench(22, 1.08, 0.5), "00aa")])
        mark_launches(verdicts, engines)
        assert verdicts[0].code == code and bool(failing(verdicts, "plain", 0.0, False)[0]) == fails
        assert ("environment or noise" in _reason(verdicts[0])) == (not fails)


def test_bench_rows_record_their_kernel(device, tmp_path):
    """Each row of a real bench carries its kernel's code digest: equal for the same
    variant in two runs, different for another variant."""
    variants = [v for v in device.variants() if "acc=f16" not in v][:2]  # f16 sums fail the gate on random data
    digests = []
    for i, v in enumerate([variants[0], variants[0], variants[-1]]):
        out = tmp_path / f"r{i}.json"
        args = ["bench", "--shapes=40x24x16", "--iters=2", "--warmup=0", "--ref=numpy", f"--variant={v}"]
        assert main([*args, f"--out={out}"]) == 0
        k = json.loads(out.read_text())["rows"][0]["kernel"]
        assert len(k["code_digest"]) == 16 and isinstance(k["stats"], list)
        digests.append(k["code_digest"])
    assert digests[0] == digests[1] and (digests[0] != digests[2]) == (variants[0] != variants[-1])


def test_the_normalized_verdict_is_offered_only_where_it_lowers_the_variance(capsys, tmp_path):
    """A reference whose own run-to-run noise (3%) is not Helios's: dividing by it adds
    that noise, var(ratio) / var(plain) > 1, and the normalized verdict is not offered
    (the gate reads the plain one); with shared drift the ratio is below 1 and it is."""
    from helios.harness.results.compare import gated, normalizing_helps

    def noisy_reference(doc: dict, seed: int) -> dict:
        rng = np.random.default_rng(seed)
        cuda = doc["rows"][0]["cuda"]
        per_run = {run: float(np.exp(rng.normal(0, 0.03))) for run in set(cuda["round_runs"])}
        cuda["samples_ms"] = [[x * per_run[run] for x in r] for r, run in zip(cuda["samples_ms"], cuda["round_runs"])]
        return doc

    [v] = compare([noisy_reference(bench(41, 1.0, 0.5, runs=6), 1)], [noisy_reference(bench(42, 1.0, 0.5, runs=6), 2)])
    assert v.control is not None and v.control_var_ratio > 1 and not normalizing_helps(v)
    assert gated(v, "normalized") == (v.verdict, v.pct)
    assert "not offered: the control adds noise here" in table([v])
    [shared] = compare([bench(43, 1.0, 0.5, runs=6)], [bench(44, 1.0, 0.5, drift=1.05, runs=6)])
    assert shared.control_var_ratio < 1 and normalizing_helps(shared)
    assert gated(shared, "normalized")[0] == shared.control.verdict
    d = verdict_dict(v)
    assert d["control_offered"] is False and d["control_var_ratio"] > 1


def _runs(seed: int, shared: float, own_helios: float, own_ref: float, runs: int = 6, rounds: int = 2) -> dict:
    """bench()'s file with run effects of given sizes: one shared by Helios and the
    reference, and one each of their own."""
    rng = np.random.default_rng(seed)
    doc = bench(seed, 1.0, 0.5, runs=runs, rounds=rounds)
    hs, cs = doc["rows"][0]["helios"]["samples_ms"], doc["rows"][0]["cuda"]["samples_ms"]
    rr = doc["rows"][0]["helios"]["round_runs"]
    effects = {r: (rng.normal(0, shared), rng.normal(0, own_helios), rng.normal(0, own_ref)) for r in set(rr)}
    for i, run in enumerate(rr):
        s, h, c = effects[run]
        hs[i] = [x * np.exp(s + h) for x in hs[i]]
        cs[i] = [x * np.exp(s + c) for x in cs[i]]
    return doc


def test_the_normalized_verdict_needs_the_runs_to_show_it_helps():
    """Offered only where the runs show (one-sided p < 0.05, a paired-variance test) that
    dividing by the reference lowers the variance: a ratio under 1 by chance is not
    enough. A control whose noise is its own (true ratio 1.5) is offered in at most 5% of
    A/A pairs, where "ratio < 1" offered it in about 30%; one sharing most of
    Helios's noise is offered in nearly all."""
    from helios.harness.results.compare import normalizing_helps

    def rates(shared: float, own_helios: float, own_ref: float, n: int = 120) -> tuple[float, float]:
        offered = below_one = 0
        for i in range(n):
            [v] = compare([_runs(2 * i, shared, own_helios, own_ref)], [_runs(2 * i + 1, shared, own_helios, own_ref)])
            offered += normalizing_helps(v)
            below_one += v.control_var_ratio < 1
        return offered / n, below_one / n

    own, own_below_one = rates(0.0, 0.01, 0.007)
    assert own <= 0.05 and own_below_one > 0.1, (own, own_below_one)
    shared, _ = rates(0.01, 0.003, 0.003)
    assert shared >= 0.9, shared
    # one run a side: no test, not offered
    [v] = compare([_runs(1, 0.01, 0.003, 0.003, runs=1)], [_runs(2, 0.01, 0.003, 0.003, runs=1)])
    assert v.control is not None and v.control.helps_p is None and not normalizing_helps(v)
