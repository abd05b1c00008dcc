"""Files Helios reads are untrusted and files it writes are never half-written:
result files, the tune and roof caches, the history store, external adapters'
output, --out targets and templates; hand-written cases for each defect found,
then generated inputs (hypothesis) over the one reader (helios.files), the one
writer's races and the append-only store."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_external import GOOD, run_suite, script

import helios
from helios import tune_cache
from helios.cli import main
from helios.files import read_json
from helios.harness.results.compare_load import CompareError, load
from helios.launcher import expand_out

HOSTILE_EXAMPLES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _cache_with(tmp_path, content: bytes):
    p = tmp_path / "tune.json"
    p.write_bytes(content)
    return p


json_trees = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=8) | st.integers(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=20,
)


FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def strict_json(path: Path) -> dict:
    """The file as a strict JSON reader sees it (a bare NaN or Infinity fails)."""

    def refuse(name: str) -> None:
        raise ValueError(f"{name} in {path}")

    return json.loads(path.read_text(), parse_constant=refuse)


def _roof_cache(device, tmp_path, entry) -> Path:
    from helios.tune_cache import device_key

    p = tmp_path / "roof.json"
    text = json.dumps({"schema": "helios-roof-cache/1", "devices": {device_key(device.info): entry}})
    p.write_text(text.replace('"NAN"', "NaN"))  # json.dumps cannot write a bare NaN itself
    return p


ROOF_ROW = {"shape": "8x8x8", "acc": "f32", "tflops_max": 1.0}


BAD_ROOFS = {
    "entry a string": "junk",
    "rows not objects": {"rows": [["x", 1, None]]},
    "tflops NaN": {"rows": [{**ROOF_ROW, "tflops": "NAN"}]},
    "tflops denormal": {"rows": [{**ROOF_ROW, "tflops": 5e-324}]},
    "tflops negative": {"rows": [{**ROOF_ROW, "tflops": -3.0}]},
    "tflops a string": {"rows": [{**ROOF_ROW, "tflops": "9"}]},
}


NEST = 100_000


ADAPTER_OUTPUTS = {
    "non-utf8 stdout": (f"sys.stdout.buffer.write(b'\\xff\\xfe junk\\n')\nprint(json.dumps({GOOD!r}))\n", "ok"),
    "non-utf8 stderr": (f"sys.stderr.buffer.write(b'\\xff\\xfe\\n')\nprint(json.dumps({GOOD!r}))\n", "ok"),
    "deep json": (f"print('{{\"a\":' * {NEST} + '1' + '}}' * {NEST})\n", "malformed JSON: JSON nested too deeply"),
    "npy claims 2^40": (
        "import numpy as np\n"
        "h = np.lib.format\n"
        "f = open(req['output'], 'wb'); h.write_array_header_1_0(f, {'descr': '<f2', 'fortran_order': False, "
        "'shape': (1 << 20, 1 << 20)}); f.close()\n"
        f"print(json.dumps({GOOD!r}))\n",
        "check failed",
    ),
    "peak memory 10**400": (
        f"g = {GOOD!r}\nprint(json.dumps(g)[:-1] + ', \"peak_memory_bytes\": 1' + '0' * 400 + '}}')\n",
        "malformed JSON",
    ),
    "40 MB of stdout": (f"sys.stdout.write('x' * (40 << 20) + '\\n')\nprint(json.dumps({GOOD!r}))\n", "ok"),
}


LINE = {"shape": "64x64x64", "helios_ms": 1.0, "cuda_ms": 0.5, "date": "2026-01-01", "commit": "a" * 40}


def _history(tmp_path, extra: bytes) -> Path:
    p = tmp_path / "h.jsonl"
    good = b"".join(json.dumps({**LINE, "date": f"2026-01-0{i}"}).encode() + b"\n" for i in (1, 2))
    p.write_bytes(good + extra)
    return p


BAD_LINES = {
    "torn last line": b'{"shape": "64x64x64", "helios_',
    "helios_ms a string": json.dumps({**LINE, "helios_ms": "1.0"}).encode() + b"\n",
    "helios_ms a list": json.dumps({**LINE, "helios_ms": [1]}).encode() + b"\n",
    "shape a dict": json.dumps({**LINE, "shape": {"m": 1}}).encode() + b"\n",
    "deep": b"[" * NEST + b"]" * NEST + b"\n",
    "not utf-8": b'{"shape": "\xff", "helios_ms": 1}\n',
    "NaN": b'{"shape": "64x64x64", "helios_ms": NaN}\n',
}


RESULT = Path(__file__).resolve().parents[1] / "results" / "h100-aa-236f2f6" / "aa-1.json"


RESULT_MUTATIONS = {
    "heliosMs a string": lambda d: d["rows"][0].__setitem__("heliosMs", "1.0"),
    "heliosMs a list": lambda d: d["rows"][0].__setitem__("heliosMs", [1]),
    "shape a dict": lambda d: d["rows"][0].__setitem__("shape", {"m": 1}),
    "interval a string": lambda d: d["rows"][0].__setitem__("speedup_ci95", "abc"),
    "kernel a string": lambda d: d["rows"][0].__setitem__("kernel", "abc"),
    "rows a dict": lambda d: d.__setitem__("rows", {"a": 1}),
    "a row a string": lambda d: d["rows"].__setitem__(0, "x"),
    "helios a string": lambda d: d.__setitem__("helios", "x"),
    "dtype a list": lambda d: d.__setitem__("dtype", [1]),
    "variant a list": lambda d: d["rows"][0].__setitem__("variant", [1]),
}


json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)


json_values = st.recursive(
    json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3), max_leaves=12
)


history_fields = st.sampled_from(["shape", "helios_ms", "cuda_ms", "date", "commit", "gpu", "dtype", "speedup"])


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe",
        b"{",
        b"[]",
        b"null",
        b"[" * 100000 + b"]" * 100000,
        json.dumps({"schema": tune_cache.SCHEMA, "devices": []}).encode(),
        json.dumps({"schema": tune_cache.SCHEMA, "devices": {"k": {"buckets": []}}}).encode(),
        json.dumps({"schema": tune_cache.SCHEMA, "devices": {"k": {"buckets": {"1x1x1": 5}}}}).encode(),
        json.dumps({"schema": tune_cache.SCHEMA, "devices": {"k": 3}}).encode(),
    ],
)
def test_a_bad_tune_cache_never_breaks_an_op(device, tmp_path, monkeypatch, content):
    p = _cache_with(tmp_path, content)
    monkeypatch.setenv("HELIOS_TUNE_CACHE", str(p))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with helios.Device() as d:
            # 16 rows: past the matrix-vector kernel's 8, where the tune cache is read
            c = d.matmul(np.ones((16, 4), np.float16), np.ones((4, 8), np.float16), out_dtype="float32")
    assert (c == 4).all()
    assert any("tune cache" in str(x.message) and str(p) in str(x.message) for x in w), [str(x.message) for x in w]


@HOSTILE_EXAMPLES
@given(st.binary(max_size=300))
def test_tune_cache_reader_on_any_bytes(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("c") / "t.json"
    p.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doc = tune_cache.load(p)
    assert doc["schema"] == tune_cache.SCHEMA and isinstance(doc["devices"], dict)


@HOSTILE_EXAMPLES
@given(st.dictionaries(st.sampled_from(["schema", "status", "rows", "helios", "device", "x"]), json_trees, max_size=5))
def test_compare_reader_on_generated_documents(tmp_path_factory, doc):
    """Any JSON object: a loaded comparable result or a CompareError, nothing else."""
    p = tmp_path_factory.mktemp("r") / "r.json"
    p.write_text(json.dumps(doc))
    try:
        load(str(p))
    except CompareError:
        pass


def test_bounded_reads_name_the_file(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ValueError, match="deep.json.*nested too deeply"):
        read_json(deep)
    with pytest.raises(ValueError, match="deep.json.*larger than"):
        read_json(deep, max_bytes=1 << 10)


@pytest.mark.parametrize("cmd", [["compare"], ["report"]])
def test_cli_readers_exit_2_without_traceback(tmp_path, capsys, cmd):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    args = cmd + [str(deep)] + ([str(deep)] if cmd == ["compare"] else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "deep.json" in err and "Traceback" not in err


def test_markdown_cells_are_escaped():
    from helios.harness.results.format import md_cell

    assert md_cell("a|b\nc") == "a\\|b\\nc"
    assert len(md_cell("x" * 1000)) == 200


@pytest.mark.parametrize("out", ["/proc/helios-r.json", "x" * 300 + ".json"])
def test_out_targets_are_probed_before_any_work(out, capsys):
    assert main(["bench", "--shapes=16x16x16", "--iters=1", "--warmup=0", f"--out={out}"]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "Traceback" not in err


def test_out_outside_the_dev_boxs_shared_folders_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    """Inside tools/dev only the checkout and /tmp reach the host (HELIOS_DEV_SHARED): a
    result file elsewhere would land inside the box, invisible; refused, nothing created."""
    monkeypatch.setenv("HELIOS_DEV_SHARED", f"{tmp_path / 'checkout'}:{tmp_path / 'tmp'}")
    target = tmp_path / "elsewhere" / "dir" / "x.json"
    assert main(["bench", "--shapes=16x16x16", "--iters=1", "--warmup=0", f"--out={target}"]) == 2
    err = capsys.readouterr().err
    assert "development box" in err and str(tmp_path / "checkout") in err and "Traceback" not in err
    assert not (tmp_path / "elsewhere").exists()
    inside = tmp_path / "tmp" / "x.json"
    from helios.cli.common import check_shared

    check_shared(inside, "--out")  # under a shared folder: accepted
    check_shared(tmp_path / "checkout", "--out")


@HOSTILE_EXAMPLES
@given(st.text(alphabet="{}abc_.x0/", max_size=24))
def test_out_templates_substitute_text_only(template):
    try:
        out = expand_out(template + ".json", "uuid", None)
    except ValueError as e:
        assert "--out" in str(e)
        return
    assert "{" not in out and "}" not in out and "<class" not in out


@pytest.mark.parametrize("cache_arg", ["DIR", "FILE/x.json", "/proc/h/t.json"])
def test_tune_cache_target_checked_before_timing(tmp_path, capsys, cache_arg):
    (tmp_path / "FILE").write_text("")
    (tmp_path / "DIR").mkdir()
    target = cache_arg if cache_arg.startswith("/") else str(tmp_path / cache_arg)
    assert main(["tune", "--shapes=16x16x16", "--iters=1", "--cache", target]) == 2
    err = capsys.readouterr().err
    assert "--cache" in err and "Traceback" not in err


def test_missing_candidates_file_is_a_usage_error(capsys):
    assert main(["tune", "--shapes=16x16x16", "--candidates=@/nonexistent/c.txt", "--dry-run"]) == 2
    assert "/nonexistent/c.txt" in capsys.readouterr().err


@pytest.mark.parametrize("entry", BAD_ROOFS.values(), ids=BAD_ROOFS.keys())
def test_a_bad_roof_cache_entry_is_ignored_with_a_warning(device, tmp_path, entry):
    from helios.roof import roof_fraction, roof_tflops

    path = _roof_cache(device, tmp_path, entry)
    with pytest.warns(UserWarning, match="roof cache .*roof.json ignored"):
        assert roof_tflops(device.info, "8x8x8", "f32", path) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        os.environ["HELIOS_ROOF_CACHE"] = str(path)
        try:
            assert roof_fraction(device.info, "x", 1.0, {"tm": 8, "tn": 8, "tk": 8, "acc": "f32"}) is None
        finally:
            del os.environ["HELIOS_ROOF_CACHE"]


def test_bench_with_a_corrupt_roof_cache_writes_its_results(device, tmp_path, monkeypatch, capsys):
    """The cache's device entry a string: bench ran every round, then died with an
    AttributeError and no file."""
    monkeypatch.setenv("HELIOS_ROOF_CACHE", str(_roof_cache(device, tmp_path, "junk")))
    out = tmp_path / "b.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(["bench", "--shapes=40x24x16", "--iters=2", "--warmup=0", "--ref=numpy", f"--out={out}"])
    assert rc == 0, capsys.readouterr().err
    assert strict_json(out)["rows"][0]["roofFraction"] is None


def test_roof_refuses_an_unwritable_cache_before_measuring(monkeypatch, capsys):
    import helios.roof

    monkeypatch.setenv("HELIOS_ROOF_CACHE", "/proc/helios-roof.json")
    monkeypatch.setattr(helios.roof, "mma_roof", lambda *a, **k: pytest.fail("measured before checking the cache"))
    assert main(["roof", "--iters", "8", "--reps", "1"]) == 2
    assert "roof cache" in capsys.readouterr().err


@pytest.mark.parametrize("body,status", ADAPTER_OUTPUTS.values(), ids=ADAPTER_OUTPUTS.keys())
def test_a_hostile_adapter_output_is_its_rows_status(tmp_path, body, status):
    rc, res = run_suite(tmp_path, "--adapter-cmd", f"x={script(tmp_path, 'x', body)}", "--adapter-timeout", "60")
    row = [r for r in res["rows"] if r["adapter"] == "x"][0]
    assert row["status"].startswith(status), row["status"]
    assert [r["status"] for r in res["rows"] if r["adapter"] == "helios"] == ["ok"]  # Helios's rows kept
    assert rc == (1 if status == "check failed" else 0)
    strict_json(tmp_path / "s.json")


def test_an_adapters_children_do_not_outlive_the_suite(tmp_path):
    """It answers and exits 0 while a child it started keeps stdout open: the row is
    ok (not a timeout) and the child is gone when the suite ends."""
    pidfile = tmp_path / "child.pid"
    body = (
        "import subprocess\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(c.pid))\n"
        f"print(json.dumps({GOOD!r}), flush=True)\n"
    )
    t0 = time.monotonic()
    rc, res = run_suite(tmp_path, "--adapter-cmd", f"x={script(tmp_path, 'x', body)}", "--adapter-timeout", "30")
    row = [r for r in res["rows"] if r["adapter"] == "x"][0]
    assert row["status"] == "ok" and "kept its output open" in row["note"] and time.monotonic() - t0 < 25
    pid = int(pidfile.read_text())
    for _ in range(50):  # killed; reaped by init
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        pytest.fail("the adapter's child outlived the suite")


@pytest.mark.parametrize("bad", BAD_LINES.values(), ids=BAD_LINES.keys())
def test_a_bad_history_line_is_skipped_and_named(tmp_path, capsys, bad):
    p = _history(tmp_path, bad)
    with pytest.warns(UserWarning, match=r"h\.jsonl: skipped 1 unreadable line.*h\.jsonl:3"):
        assert main(["report", "--history", str(p)]) == 0
    assert "2 points, 1 series" in capsys.readouterr().out


def test_a_history_that_is_not_a_file_is_refused_bounded(capsys):
    if not os.path.exists("/dev/zero"):
        pytest.skip("needs /dev/zero")
    assert main(["report", "--history", "/dev/zero"]) == 2
    assert "/dev/zero: a device, not a regular file" in capsys.readouterr().err


def test_appending_after_a_torn_line_starts_a_fresh_one(tmp_path):
    from helios.harness.results.history import append_history, read_history

    p = _history(tmp_path, BAD_LINES["torn last line"])
    result = {"helios": {"name": "gpu"}, "rows": [{"valid": True, "shape": "8x8x8", "heliosMs": 2.0}]}
    assert append_history(p, result, "b" * 40, "2026-02-01") == 1
    with pytest.warns(UserWarning, match="h.jsonl:3"):
        lines = read_history(p)
    assert [x["shape"] for x in lines] == ["64x64x64", "64x64x64", "8x8x8"]


def test_concurrent_appends_never_interleave(tmp_path):
    """Lines of 3 KB from 4 processes at once (longer than a pipe's atomic write): every
    line whole."""

    p = tmp_path / "h.jsonl"
    code = (
        "import json, sys\nfrom helios.files import append_lines\n"
        "for i in range(100):\n"
        "    append_lines(sys.argv[1], [json.dumps({'who': sys.argv[2], 'i': i, 'pad': 'x' * 3000})])\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(p), str(w)]) for w in range(4)]
    assert [q.wait() for q in procs] == [0] * 4
    lines = p.read_text().splitlines()
    assert len(lines) == 400 and all(json.loads(x)["pad"] for x in lines)


def test_a_result_without_its_helios_block_is_named(tmp_path, capsys):
    p = tmp_path / "nohelios.json"
    p.write_text(json.dumps({"schema": "helios-bench/1", "rows": []}))
    assert main(["compare", str(p), str(p)]) == 2
    err = capsys.readouterr().err
    assert "nohelios.json" in err and "KeyError" not in err


@pytest.mark.parametrize("mutate", RESULT_MUTATIONS.values(), ids=RESULT_MUTATIONS.keys())
@pytest.mark.parametrize("cmd", [["report"], ["report", "--md"], ["compare", str(RESULT)], ["report", "--html", "H"]])
def test_a_result_field_of_the_wrong_type_is_refused_naming_it(tmp_path, capsys, mutate, cmd):
    """Every reader of result files reads through one typed check: exit 2 naming the
    file (TypeError, 'unhashable type' or an internal error before)."""
    doc = json.loads(RESULT.read_text())
    mutate(doc)
    p = tmp_path / "mutated.json"
    p.write_text(json.dumps(doc))
    argv = [str(tmp_path / "html") if a == "H" else a for a in cmd]
    assert main([*argv, str(p)]) == 2
    err = capsys.readouterr().err
    assert "mutated.json" in err and "internal error" not in err and "Error:" not in err, err


def test_a_file_that_appears_during_the_run_is_not_replaced(tmp_path):
    """Two runs with the same --out: the second to finish keeps the first's file and
    writes beside it, saying where."""
    from helios.cli.common import out_paths, write_results

    p = tmp_path / "same.json"
    out = out_paths(str(p), False)
    p.write_text('{"the other run": 1}')  # another rank finished first
    written, why = write_results(out, {"mine": 1}, "table\n")
    assert json.loads(p.read_text()) == {"the other run": 1}
    assert written == tmp_path / "same.1.json" and json.loads(written.read_text()) == {"mine": 1}
    assert (tmp_path / "same.1.md").read_text() == "table\n" and "appeared during the run" in why


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch, capsys):
    """report --html on a full disk left a 0-byte index.html: the write is atomic."""
    import errno

    page = tmp_path / "site" / "index.html"
    page.parent.mkdir()
    page.write_text("OLD")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    assert main(["report", "--html", str(page.parent), "--history", str(_history(tmp_path, b""))]) == 2
    assert page.read_text() == "OLD" and [q.name for q in page.parent.iterdir()] == ["index.html"]
    assert "No space left" in capsys.readouterr().err


def test_non_finite_values_are_written_as_null():
    from helios.files import dumps

    with pytest.warns(UserWarning, match=r"rows\[0\]\.roofFraction"):
        text = dumps({"rows": [{"roofFraction": math.inf, "ok": 1.5}]})
    assert json.loads(text) == {"rows": [{"roofFraction": None, "ok": 1.5}]}


def test_train_trace_target_is_probed_before_training(capsys):
    pytest.importorskip("torch")
    assert main(["suite", "train", "--tiny", "--trace=/proc/helios-x"]) == 2
    assert "--trace" in capsys.readouterr().err


@FAST
@given(st.lists(st.binary(max_size=60) | st.dictionaries(history_fields, json_values, max_size=6), max_size=6))
def test_history_reader_on_generated_lines(tmp_path_factory, lines):
    """Any mix of byte strings and objects: the lines that pass the declared types,
    each as written, and nothing raised."""
    from helios.files import FileError, check
    from helios.harness.results.history import LINE_FIELDS, read_history

    p = tmp_path_factory.mktemp("h") / "h.jsonl"
    raw = [x if isinstance(x, bytes) else json.dumps(x).encode() for x in lines]
    p.write_bytes(b"\n".join(r.replace(b"\n", b" ") for r in raw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            got = read_history(p)
        except FileError as e:  # not one line readable: the file is refused, named
            assert "no line could be read" in str(e) and str(p) in str(e)
            got = []
    for item in got:
        check(item, LINE_FIELDS, "x")  # every line read has the declared types
        assert math.isfinite(item["helios_ms"]) and item["helios_ms"] > 0
    expected = 0
    for x in lines:
        if isinstance(x, dict):
            try:
                check(json.loads(json.dumps(x)), LINE_FIELDS, "x")
                expected += 1
            except (FileError, ValueError):
                pass
    assert len(got) >= expected


@FAST
@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_parse_json_raises_only_file_errors(data):
    from helios.files import FileError, parse_json

    try:
        parse_json(data, "gen")
    except FileError as e:
        assert str(e).startswith("gen: ")


@FAST
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=3) | json_values)
def test_roof_cache_reader_on_generated_entries(tmp_path_factory, entry):
    from helios.roof import roof_tflops
    from helios.tune_cache import device_key

    info = {"name": "x", "vendor_id": 1, "device_id": 2, "driver_version": 3, "cooperative_matrix_properties": []}
    p = tmp_path_factory.mktemp("r") / "roof.json"
    p.write_text(json.dumps({"schema": "helios-roof-cache/1", "devices": {device_key(info): entry}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = roof_tflops(info, "8x8x8", "f32", p)
    assert got is None or (math.isfinite(got) and got > 0)


@FAST
@given(st.lists(st.sampled_from(["create", "modify", "delete", "none"]), min_size=1, max_size=3), st.booleans())
def test_writer_races(tmp_path_factory, events, existed):
    """Whatever happens at the path between the probe and the write: the text lands
    whole somewhere it names, and a file another writer put there is never replaced."""
    from helios.files import Target

    d = tmp_path_factory.mktemp("w")
    p = d / "r.json"
    if existed:
        p.write_text("before")
    t = Target(p, "--out", replace=existed)
    theirs = None
    for e in events:
        if e in ("create", "modify"):
            theirs = f"theirs-{e}-{time.monotonic_ns()}"
            p.write_text(theirs)
        elif e == "delete":
            p.unlink(missing_ok=True)
            theirs = None
    written = t.write("mine")
    assert written.read_text() == "mine"
    if theirs is not None and not existed:
        assert p.read_text() == theirs and written != p
    assert not [q for q in d.iterdir() if ".tmp-" in q.name]


def test_the_readers_of_helios_all_go_through_files():
    """No module of the package parses JSON, reads or writes a file but helios.files,
    unless the line says why (`# files: ...`, e.g. a build log): the one reader and writer."""
    import re

    root = Path(__file__).resolve().parents[1] / "python" / "helios"
    allowed = {"files.py"}
    pattern = re.compile(r"json\.loads?\(|np\.load\(|\.(write|read)_(text|bytes)\(|(?<![\w.])open\(|\.open\(")
    found = []
    for f in sorted(root.rglob("*.py")):
        if f.name in allowed:
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if pattern.search(line) and "# files: " not in line:
                found.append(f"{f.relative_to(root)}:{i}: {line.strip()}")
    assert not found, "\n".join(found)
