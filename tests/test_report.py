"""helios report on the committed H100 results."""

import glob
import json
import os

import pytest
from helpers import ASAN_DRAW_SKIP

from helios.cli import main
from helios.harness.results.report import load, summary_rows, sweep_matrix, table

RESULTS = os.path.join(os.path.dirname(__file__), "..", "results")
BENCH = sorted(glob.glob(os.path.join(RESULTS, "*gemm*", "gemm*.json")))
# A helios-sweep/1 file (coop shape x tiling), kept as test data: results/ holds /2 sweeps only.
SWEEP = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "data", "*-sweep-*.json")))


def test_committed_results_exist():
    assert BENCH and SWEEP, "results/ should hold bench and sweep files"


def test_table_rows_and_ratio():
    benches, _ = load(BENCH)
    rows = summary_rows(benches)
    assert len(rows) == sum(len(b["rows"]) for b in benches)
    for r in rows:
        assert r["ratio"] == pytest.approx(r["helios_ms"] / r["ref_ms"])
    md = table(benches)
    assert md.startswith("| file | shape |") and "4096x4096x4096" in md


def test_sweep_matrix_marks_rejected_as_nan():
    _, sweeps = load(SWEEP)
    rows, cols, m = sweep_matrix(sweeps[0])
    assert "scalar" in rows and m.shape == (len(rows), len(cols))
    rejected = [r for r in sweeps[0]["rows"] if r["check_fails"]]
    import numpy as np

    assert np.isnan(m).sum() >= len(rejected)


@ASAN_DRAW_SKIP
def test_cli_report_md_and_png(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="figures need matplotlib (the notebook extra)")
    assert main(["report", *BENCH, *SWEEP, "--md", "--png", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| file | shape |" in out and "best coop:" in out
    pngs = sorted(p.name for p in tmp_path.iterdir())
    assert {"tflops.png", "ratio.png", "variance.png", "sweep0.png"} <= set(pngs)
    assert all((tmp_path / p).stat().st_size > 5000 for p in pngs)


def test_cli_report_rejects_other_files(tmp_path, capsys):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"schema": "other"}))
    assert main(["report", str(p)]) == 2
    assert "is none of helios-bench/1" in capsys.readouterr().err
