"""The row types are the one description of a result row: the reader's check
(ROW_FIELDS) and the published JSON Schema come from them, a row cannot be built
without a required field or with one the type does not declare, and the committed
schema file is what the type generates."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helios.files import FileError, check
from helios.harness.results.rows import ROW_FIELDS, BenchRow, SweepRow, TimeRow
from helios.harness.results.schema import ABSENT, col, json_schema, reader_fields, to_row

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILE = ROOT / "docs" / "reference" / "helios-bench-1.schema.json"


def _bench_row(**over) -> BenchRow:
    base = dict(
        shape="64x64x64", heliosMs=1.0, heliosTflops=0.5, cudaMs=None, cudaTflops=None, referenceMs=2.0,
        referenceTflops=0.25, speedup=2.0, speedup_ci95=[1.9, 2.1], valid=True, throttled=False,
        variant="coop:64x64x32", reference="numpy", helios={}, cuda={}, gpu_state=[],
    )  # fmt: skip
    return BenchRow(**{**base, **over})


def test_the_committed_schema_files_are_what_the_types_generate():
    committed = json.loads(SCHEMA_FILE.read_text())
    assert committed["$defs"]["row"] == json_schema(BenchRow), "stale: run python3 tools/result_schemas.py"
    time_file = json.loads((ROOT / "docs" / "reference" / "helios-time-1.schema.json").read_text())
    assert time_file["$defs"]["row"] == json_schema(TimeRow), "stale: run python3 tools/result_schemas.py"


def test_the_schema_tool_reports_a_stale_file(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import result_schemas
    finally:
        sys.path.pop(0)
    stale = json.loads(SCHEMA_FILE.read_text())
    del stale["$defs"]["row"]["properties"]["low_clock"]
    fake, fake_time = tmp_path / "schema.json", tmp_path / "time.json"
    fake.write_text(json.dumps(stale, indent=2) + "\n")
    monkeypatch.setattr(result_schemas, "BENCH", fake)
    monkeypatch.setattr(result_schemas, "TIME", fake_time)  # missing: stale too
    assert result_schemas.main(["--check"]) == 1
    assert result_schemas.main([]) == 0 and result_schemas.main(["--check"]) == 0


def test_a_field_added_to_the_type_reaches_both_descriptions():
    """Adding a measurement field is one declaration: the reader's kinds and the JSON
    Schema both carry it (a drift the committed-file test would then catch)."""

    @dataclasses.dataclass(slots=True, kw_only=True)
    class Wider(BenchRow):
        l2_hit_rate: float = col("number?", "a new measurement", default=ABSENT)

    assert reader_fields(Wider)["l2_hit_rate"] == "number?"
    assert "l2_hit_rate" in json_schema(Wider)["properties"]
    assert json_schema(Wider) != json.loads(SCHEMA_FILE.read_text())["$defs"]["row"]


def test_the_reader_checks_every_declared_field():
    assert ROW_FIELDS == reader_fields(BenchRow, TimeRow, SweepRow)
    with pytest.raises(FileError, match="'head_dim' must be an integer >= 0"):
        check({"head_dim": -1}, ROW_FIELDS, "f.json: rows[0]")
    with pytest.raises(FileError, match="'kernel' must be an object"):
        check({"kernel": "sha"}, ROW_FIELDS, "f.json: rows[0]")


def test_two_types_declaring_one_field_differently_are_refused():
    @dataclasses.dataclass(kw_only=True)
    class Other:
        shape: int = col("int", "a shape as a number")

    with pytest.raises(TypeError, match="'shape'"):
        reader_fields(BenchRow, Other)


def test_a_row_needs_its_required_fields_and_no_others():
    with pytest.raises(TypeError, match="variant"):
        BenchRow(**{k: v for k, v in dataclasses.asdict(_bench_row()).items() if k not in ("variant", "batch")})
    with pytest.raises(TypeError, match="heliosMilliseconds"):
        _bench_row(heliosMilliseconds=1.0)
    row = _bench_row()
    with pytest.raises(AttributeError):
        row.undeclared = 1  # slots: an attribute the type does not declare


def test_absent_fields_stay_out_of_the_json_and_null_ones_stay_in():
    d = to_row(_bench_row())
    assert "batch" not in d and "kernel" not in d and "roofFraction" not in d
    assert d["cudaMs"] is None and d["low_clock"] is False
    assert to_row(_bench_row(batch=2, causal=True))["batch"] == 2


def test_a_built_row_validates_against_the_published_schema():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed: schema not validated here")
    schema = json.loads(SCHEMA_FILE.read_text())
    row_schema = {"$defs": schema["$defs"], **schema["$defs"]["row"]}
    side = {"stats": None, "samples_ms": [[1.0]], "batch_ms": [], "round_medians_ms": [1.0], "check": []}
    good = to_row(_bench_row(helios={**side, "telemetry": None}, cuda=side, shape="1x2x97x64-causal"))
    good["helios"]["stats"] = good["cuda"]["stats"] = {
        "median": 1, "mean": 1, "min": 1, "max": 1, "p95": 1, "p99": 1, "cv": 0, "n": 1, "median_ci95": [1, 1]
    }  # fmt: skip
    jsonschema.validate(good, row_schema)
    for bad in ({"shape": "64x64"}, {"heliosMs": 0}, {"speedup_ci95": [1.0]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**good, **bad}, row_schema)


def test_the_tool_runs_as_documented():
    rc = subprocess.run([sys.executable, str(ROOT / "tools" / "result_schemas.py"), "--check"], cwd=ROOT)
    assert rc.returncode == 0


def test_a_file_is_checked_with_its_own_row_type(tmp_path):
    """helios-time/1 rows by TimeRow's kinds, helios-suite/1 rows by SuiteRow's (a
    suite's gpu_state is an object, a bench's a list)."""
    from helios.harness.results.rows import read_result

    def doc(schema: str, row: dict) -> Path:
        p = tmp_path / f"{len(list(tmp_path.iterdir()))}.json"
        p.write_text(json.dumps({"schema": schema, "rows": [row]}))
        return p

    with pytest.raises(FileError, match="'heliosSamplesMs' must be a list of finite numbers"):
        read_result(doc("helios-time/1", {"heliosSamplesMs": "abc"}))
    with pytest.raises(FileError, match="'gpu_state' must be a list"):
        read_result(doc("helios-bench/1", {"gpu_state": {"before": None}}))
    assert read_result(doc("helios-suite/1", {"adapter": "helios", "gpu_state": {"before": None}}))["rows"]


def test_a_time_file_validates_against_its_published_schema(tmp_path, device):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed: schema not validated here")
    from helios.cli import main

    out = tmp_path / "t.json"
    assert main(["time", "--shapes=8x8x8,16x16x32", "--no-cuda", "--iters=3", "--warmup=1", f"--out={out}"]) == 0
    schema = json.loads((ROOT / "docs" / "reference" / "helios-time-1.schema.json").read_text())
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, schema)
    doc["rows"][0]["heliosMs"] = -1.0  # the schema must be able to fail
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


def test_a_row_read_back_has_every_declared_field():
    """read_row: the file's fields as attributes; one the file lacks reads as its
    default (None where the field has none or is left out); undeclared keys are not read."""
    from helios.harness.results.rows import bench_rows, read_row

    row = read_row(BenchRow, {"shape": "8x8x8", "heliosMs": 0.5, "valid": True, "extra": 1})
    assert (row.shape, row.heliosMs, row.valid) == ("8x8x8", 0.5, True)
    assert row.low_clock is False  # its declared default
    assert row.roofFraction is None and row.kernel is None and row.cudaMs is None  # ABSENT / no default
    assert not hasattr(row, "extra")
    assert [r.shape for r in bench_rows({"rows": [{"shape": "1x2x3"}, {"shape": "4x5x6"}]})] == ["1x2x3", "4x5x6"]
    assert bench_rows({}) == []


def committed_results(into: Path) -> list[Path]:
    """Every committed JSON result: those in place, and those packed into a set's
    raw.tar.xz (tools/pack_results.py), unpacked under `into`."""
    import tarfile

    paths = sorted((ROOT / "results").rglob("*.json"))
    for archive in sorted((ROOT / "results").rglob("raw.tar.xz")):
        to = into / archive.parent.relative_to(ROOT / "results")
        with tarfile.open(archive) as tar:
            tar.extractall(to, filter="data")
        paths += sorted(to.rglob("*.json"))
    return paths


def test_suite_and_decode_rows_are_written_through_their_types(tmp_path):
    """A suite's row is built field by field and checked against its type before it is
    written: an undeclared field (a typo, a field no reader knows) or a missing required
    one is a TypeError; every committed suite and decode result fits its type."""
    from helios.harness.results.rows import SWEEP_SCHEMAS, DecodeRow, SuiteRow, TrainRow, read_result
    from helios.harness.results.schema import written_row

    row = {"adapter": "helios", "tokens": 16, "latency_ms": {"p50": 0.2}}
    assert written_row(SuiteRow, row) is row
    with pytest.raises(TypeError, match="latncy_ms"):
        written_row(SuiteRow, {"adapter": "helios", "latncy_ms": {}})
    with pytest.raises(TypeError, match="status"):
        written_row(DecodeRow, {"adapter": "helios_plan"})
    jsonschema = pytest.importorskip("jsonschema", reason="validates files against the published schemas")
    types = {"helios-suite/1": SuiteRow, "helios-decode/1": DecodeRow, "helios-train/1": TrainRow}
    published = {
        s: json.loads((ROOT / "docs" / "reference" / f"{s.replace('/', '-')}.schema.json").read_text()) for s in types
    }
    for s, t in types.items():
        assert published[s]["$defs"]["row"] == json_schema(t), "stale: run python3 tools/result_schemas.py"
    seen = 0
    for path in committed_results(tmp_path):
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and doc.get("schema") in types:
            read_result(path)  # the reader's kinds, from the same type
            for r in doc["rows"]:
                written_row(types[doc["schema"]], r)
            jsonschema.validate(doc, published[doc["schema"]])
            seen += 1
        elif isinstance(doc, dict) and doc.get("schema") in SWEEP_SCHEMAS:  # tools/kernel/sweep.py's rows
            read_result(path)
            for r in doc["rows"]:
                written_row(SweepRow, r)
            seen += 1
    assert seen >= 4
