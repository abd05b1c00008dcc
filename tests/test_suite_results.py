"""The suites' result files (helios-suite/1, helios-decode/1, helios-train/1) through
every reader: report's text, --md, --png and --html read each kind through its row type;
what the published schema accepts is read, what it refuses is refused naming the file,
the row and the field; compare says why it does not judge decode and train files."""

from __future__ import annotations

import copy
import json
import os

import pytest
from helpers import ASAN_DRAW_SKIP

from helios.cli import main

RESULTS = os.path.join(os.path.dirname(__file__), "..", "results")
DECODE = os.path.join(RESULTS, "h200-splits", "committed-2aa2416", "decode-8x1024.json")
TRAIN = os.path.join(RESULTS, "h100-train-524306a", "train.json")


def _doc(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def _write(tmp_path, name: str, doc: dict) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


@pytest.mark.parametrize("path", [DECODE, TRAIN], ids=["decode", "train"])
@pytest.mark.parametrize("form", [[], ["--md"]], ids=["text", "md"])
def test_report_reads_every_suite_kind(path, form, capsys):
    assert main(["report", *form, path]) == 0
    out = capsys.readouterr().out
    assert "| adapter | status |" in out and "torch_eager" in out


@ASAN_DRAW_SKIP
def test_report_png_draws_decode_and_train(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert main(["report", DECODE, TRAIN, f"--png={tmp_path}"]) == 0
    assert {p.name for p in tmp_path.iterdir()} == {"decode0.png", "train0.png"}


def test_report_html_shows_decode_and_train(tmp_path, capsys):
    assert main(["report", DECODE, TRAIN, f"--html={tmp_path / 'page'}"]) == 0
    page = (tmp_path / "page" / "index.html").read_text()
    assert "suite decode" in page and "suite train" in page and '<td class="l">helios_plan</td>' in page


def test_a_refused_file_leaves_no_html_folder(tmp_path, capsys):
    bad = _write(tmp_path, "bad.json", {**_doc(DECODE), "roof_gb_s": "fast"})
    assert main(["report", bad, f"--html={tmp_path / 'page'}"]) == 2
    assert not (tmp_path / "page").exists()
    assert "roof_gb_s" in capsys.readouterr().err


def test_a_decode_file_with_an_empty_config_is_read(tmp_path, capsys):
    """The published schema requires `config` and leaves it open: {} is valid, so it is read."""
    path = _write(tmp_path, "open.json", {**_doc(DECODE), "config": {}})
    assert main(["report", path]) == 0
    assert "? layers, d=?" in capsys.readouterr().out


def _mutated(path: str, edit) -> dict:
    doc = copy.deepcopy(_doc(path))
    edit(doc)
    return doc


BAD = {
    "config junk": (DECODE, lambda d: d["config"].update(layers="eight"), "config: 'layers' must be an integer"),
    "roof junk": (DECODE, lambda d: d.update(roof_gb_s=[1]), "'roof_gb_s' must be a finite number > 0"),
    "config not an object": (DECODE, lambda d: d.update(config=[1]), "'config' must be an object"),
    "contexts entry junk": (
        DECODE,
        lambda d: d["rows"][0]["contexts"][0].update(ms_per_token_p50="x"),
        "rows[0].contexts[0]: 'ms_per_token_p50' must be a finite number > 0",
    ),  # fmt: skip
    "contexts not objects": (
        DECODE,
        lambda d: d["rows"][0].update(contexts=[3]),
        "rows[0].contexts[0] must be an object",
    ),
    "no adapter": (DECODE, lambda d: d["rows"][0].pop("adapter"), "rows[0]: no 'adapter'"),
    "no status": (DECODE, lambda d: d["rows"][1].pop("status"), "rows[1]: no 'status'"),
    "train no adapter": (TRAIN, lambda d: d["rows"][0].pop("adapter"), "rows[0]: no 'adapter'"),
    "train config junk": (TRAIN, lambda d: d["config"].update(batch=-8), "config: 'batch' must be an integer >= 0"),
    "train world junk": (TRAIN, lambda d: d.update(distributed={"world_size": "two"}), "distributed: 'world_size'"),
    "no rows": (TRAIN, lambda d: d.pop("rows"), "needs 'rows'"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_what_the_readers_refuse_names_the_file_row_and_field(tmp_path, capsys, case):
    base, edit, msg = BAD[case]
    path = _write(tmp_path, "bad.json", _mutated(base, edit))
    for form in ([], ["--md"]):
        assert main(["report", *form, path]) == 2
        err = capsys.readouterr().err
        assert path in err and msg in err, err
        assert "Unknown format code" not in err and "KeyError" not in err


def test_the_largest_finite_numbers_are_numbers(tmp_path, capsys):
    doc = {**_doc(DECODE), "roof_gb_s": 1e308}
    doc["rows"][0]["tokens_per_s"] = 1e308  # a row's finite number, which the reader once refused past 1e300
    path = _write(tmp_path, "big.json", doc)
    assert main(["report", path]) == 0


@pytest.mark.parametrize("path", [DECODE, TRAIN], ids=["decode", "train"])
def test_compare_says_what_it_compares(path, capsys):
    assert main(["compare", path, path]) == 2
    err = capsys.readouterr().err
    assert "judges repeated timing samples per shape" in err and "helios report" in err


def test_compare_refuses_a_shape_the_schema_refuses(tmp_path, capsys):
    bench = os.path.join(RESULTS, "h100-layout-7507abe")
    src = next(os.path.join(bench, f) for f in sorted(os.listdir(bench)) if f.endswith(".json"))
    doc = _doc(src)
    doc["rows"][0]["shape"] = "big"
    path = _write(tmp_path, "shape.json", doc)
    assert main(["compare", src, path]) == 2
    assert 'shape "big" is not MxNxK' in capsys.readouterr().err
