"""Every reader refuses what is not a file before reading it, reads bounded, and
checks every field it uses where it reads it: a FIFO or a device named wherever
Helios reads a file is refused at once (it hung), the machine-code reader is
bounded in memory and time, and every field compare, report, bisect and the
energy readers use is checked with a message naming the file and the field."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_control import bench

from helios.cli import main

# ---- a FIFO wherever Helios reads a file ------------------------------------------------------------


def _result_file(tmp_path: Path) -> str:
    p = tmp_path / "a.json"
    p.write_text(json.dumps(bench(0, 1.0, 0.5)))
    return str(p)


def _tune_cache_env(fifo: str, monkeypatch) -> None:
    from helios import tune_cache

    monkeypatch.setenv("HELIOS_TUNE_CACHE", fifo)
    with pytest.warns(UserWarning, match="not a regular file"):
        assert tune_cache.load() == tune_cache.empty()


def _roof_cache_env(fifo: str, monkeypatch) -> None:
    from helios import roof

    monkeypatch.setenv("HELIOS_ROOF_CACHE", fifo)
    with pytest.warns(UserWarning, match="not a regular file"):
        roof._load(roof.cache_path())


# name -> (the call; what it must return) with FIFO standing for the FIFO's path
READERS = {
    "compare A FIFO": lambda f, a, d, mp: main(["compare", a, f]) == 2,
    "compare --old A --new FIFO": lambda f, a, d, mp: main(["compare", "--old", a, "--new", f]) == 2,
    "report FIFO": lambda f, a, d, mp: main(["report", f]) == 2,
    "report --history FIFO": lambda f, a, d, mp: main(["report", "--history", f]) == 2,
    "report --html DIR FIFO": lambda f, a, d, mp: main(["report", "--html", d, f]) == 2,
    "tune --candidates=@FIFO": lambda f, a, d, mp: main(["tune", "--shapes=8x8x8", f"--candidates=@{f}"]) == 2,
    "tune --cache=FIFO": lambda f, a, d, mp: main(["tune", "--shapes=8x8x8", f"--cache={f}"]) == 2,
    "HELIOS_TUNE_CACHE=FIFO": lambda f, a, d, mp: _tune_cache_env(f, mp) is None,
    "HELIOS_ROOF_CACHE=FIFO": lambda f, a, d, mp: _roof_cache_env(f, mp) is None,
}


def _files_api(fifo: str) -> bool:
    from helios import files

    for read in (
        lambda: files.read_json(fifo),
        lambda: files.read_lines(fifo, {}),
        lambda: files.read_npy(fifo, 1 << 20),
        lambda: files.read_text(fifo, 1 << 20, "a list"),
    ):
        with pytest.raises(files.FileError, match="FIFO, not a regular file"):
            read()
    return True


READERS["files: read_json, read_lines, read_npy, read_text"] = lambda f, a, d, mp: _files_api(f)


@pytest.mark.parametrize("reader", list(READERS))
def test_a_fifo_is_refused_at_once_by_every_reader(reader, tmp_path, monkeypatch, capsys):
    """Each used to block in open() for a writer that never comes."""
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    done: list = []
    call = READERS[reader]

    def run() -> None:
        try:
            done.append(call(fifo, _result_file(tmp_path), str(tmp_path / "html"), monkeypatch))
        except BaseException as e:  # noqa: BLE001 - reported below, in the test's thread
            done.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20.0)
    if t.is_alive():  # unblock the reader: open the FIFO's other end, then fail
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(5.0)
        pytest.fail(f"{reader}: blocked on the FIFO")
    if isinstance(done[0], BaseException):
        raise done[0]
    assert done[0] is True, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "internal error" not in err


def test_a_device_file_is_refused_before_reading(capsys):
    if not os.path.exists("/dev/zero"):
        pytest.skip("needs /dev/zero")
    from helios import files

    with pytest.raises(files.FileError, match="/dev/zero: a device, not a regular file"):
        files.read_json("/dev/zero")


# ---- the machine-code reader -------------------------------------------------------------------------


def _nvidia_cache(body: bytes) -> bytes:
    import struct

    return struct.pack("<3I", 32, 1, 0x10DE) + bytes(20) + body


def test_a_decompression_bomb_is_read_in_bounded_memory(tmp_path):
    """A 1 GiB frame of zeros (a few KB compressed) took 1 GiB of memory; now a frame
    larger than the reader's bound is not inflated past it."""
    zstandard = pytest.importorskip("zstandard")
    c = zstandard.ZstdCompressor(level=1).compressobj()
    zeros = bytes(64 << 20)
    frame = b"".join(c.compress(zeros) for _ in range(16)) + c.flush()
    path = tmp_path / "bomb.bin"
    path.write_bytes(_nvidia_cache(frame))
    # VmHWM: this process's peak (ru_maxrss would carry the forking worker's over exec)
    code = (
        "from helios.machine_code import identify; "
        f"r = identify(open({str(path)!r}, 'rb').read()); print(r.get('status')); "
        "print(next(x.split()[1] for x in open('/proc/self/status') if x.startswith('VmHWM')))"
    )
    py = [sys.executable, *(["-S"] if sys.flags.no_site else [])]  # this interpreter's own helios
    out = subprocess.run([*py, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    status, rss_kib = out.stdout.split("\n")[:2]
    assert "no NVIDIA shader container" in status
    assert int(rss_kib) < 450 * 1024, f"{int(rss_kib) >> 10} MiB"


def test_many_frame_magics_are_scanned_in_bounded_time():
    """1 MiB of zstd magics took 5.6 s (every candidate copied the rest of the data)."""
    pytest.importorskip("zstandard")
    from helios.machine_code import ZSTD_MAGIC, identify

    data = _nvidia_cache(ZSTD_MAGIC * (1 << 18))
    t0 = time.monotonic()
    assert "status" in identify(data)
    assert time.monotonic() - t0 < 2.0


def test_the_reader_takes_any_bytes_like_and_refuses_the_rest():
    from helios.machine_code import identify

    data = _nvidia_cache(b"")
    assert identify(memoryview(data)) == identify(bytearray(data)) == identify(data)
    with pytest.raises(TypeError, match="bytes"):
        identify("not bytes")  # type: ignore[arg-type]


# ---- compare: every field it reads is checked where it is read ----------------------------------------


def _set(doc: dict, path: str, value) -> dict:
    doc = copy.deepcopy(doc)
    node = doc
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node.setdefault(k, {})
    node[keys[-1]] = value
    return doc


BAD_FIELDS = {
    "rows.0.kernel.code_digest": ["x"],
    "rows.0.kernel.machine_code.digest": ["x"],
    "rows.0.kernel": "junk",
    "helios.driver_version": [580],
    "cuda.torch_version": ["2.11"],
    "reference": ["torch"],
    "cuda.reference": {"a": 1},
}


@pytest.mark.parametrize("field", list(BAD_FIELDS))
def test_compare_refuses_a_mistyped_identity_field_naming_it(field, tmp_path, capsys):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(bench(0, 1.0, 0.5)))
    b = tmp_path / "b.json"
    b.write_text(json.dumps(_set(bench(1, 1.0, 0.5), field, BAD_FIELDS[field])))
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "b.json" in err and field.split(".")[-1] in err and "internal error" not in err


def test_compare_refuses_reference_samples_that_are_not_numbers(tmp_path, capsys):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(bench(0, 1.0, 0.5)))
    bad = bench(1, 1.0, 0.5)
    bad["rows"][0]["cuda"]["samples_ms"] = [["fast"] * 3] * len(bad["rows"][0]["cuda"]["samples_ms"])
    b = tmp_path / "b.json"
    b.write_text(json.dumps(bad))
    assert main(["compare", "--gate", "normalized", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "b.json" in err and "cuda.samples_ms" in err and "ufunc" not in err


def test_compare_refuses_samples_outside_any_duration(tmp_path, capsys):
    """1e-300 ms against 1e300 ms overflowed in the interval arithmetic."""
    a, b = bench(0, 1.0, 0.5), bench(1, 1.0, 0.5)
    a["rows"][0]["helios"]["samples_ms"] = [[1e-300] * 3] * 6
    b["rows"][0]["helios"]["samples_ms"] = [[1e300] * 3] * 6
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err
    assert "a.json" in err and "samples" in err and "internal error" not in err


@pytest.mark.parametrize("old,new", [(5e-324, 1e308), (1e308, 5e-324)])
def test_extreme_but_valid_energy_is_judged_not_crashed(tmp_path, capsys, old, new):
    sides = []
    for i, j in enumerate((old, new)):
        files = []
        for s in range(3):
            d = bench(10 * i + s, 1.0, 0.5)
            d["rows"][0]["energy"] = {"helios": {"status": "ok", "joules_per_op": j}}
            p = tmp_path / f"s{i}-{s}.json"
            p.write_text(json.dumps(d))
            files.append(str(p))
        sides.append(files)
    rc = main(["compare", "--old", *sides[0], "--new", *sides[1]])
    err = capsys.readouterr().err
    assert rc in (0, 1) and "internal error" not in err and "OverflowError" not in err


# ---- report --history: nulls the format allows ---------------------------------------------------------


def test_a_history_with_a_cpu_reference_is_reported(tmp_path, capsys):
    """cuda_ms null (a CPU reference) failed every history with a format error."""
    h = tmp_path / "h.jsonl"
    lines = [
        {"shape": "64x64x64", "helios_ms": 0.5, "cuda_ms": None, "commit": "a" * 40, "date": "2026-11-01"},
        {"shape": "64x64x64", "helios_ms": 0.6, "cuda_ms": None, "commit": "b" * 40, "date": "2026-11-02"},
        {"shape": "32x32x32", "helios_ms": 0.1},  # the required fields only
    ]
    h.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main(["report", "--history", str(h)]) == 0
    out = capsys.readouterr().out
    assert "3 points, 2 series" in out and "0.6000" in out


# ---- bisect.json: another range, a torn record, malformed steps ------------------------------------------

COMMITS = ["c" * 40, "d" * 40, "e" * 40]
CONFIG = {"shapes": "canonical"}


def _record(**over) -> dict:
    step = {
        "commit": COMMITS[2],
        "index": 2,
        "verdict": "SLOWER",
        "mde_pct": 4.0,
        "shapes": [{"shape": "64x64x64", "verdict": "SLOWER", "change_pct": 9.0}],
    }
    doc = {"schema": "helios-bisect/1", "good": "a" * 40, "bad": "b" * 40, "config": CONFIG, "steps": [step]}
    for k, v in over.items():
        if k.startswith("step."):
            step[k[5:]] = v
        else:
            doc[k] = v
    return doc


def _resume(tmp_path: Path, doc, replace: bool = False):
    from helios.harness.runs.bisect import _resume as resume

    p = tmp_path / "bisect.json"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return resume(p, "a" * 40, "b" * 40, CONFIG, COMMITS, replace)


def test_a_record_of_this_bisection_resumes(tmp_path):
    assert _resume(tmp_path, _record())[0]["commit"] == COMMITS[2]


@pytest.mark.parametrize(
    "doc,why",
    [
        (_record(good="f" * 40), "another bisection"),
        (_record(config={"shapes": "large"}), "another bisection"),
        ('{"schema": "helios-bisect/1", "steps": [', "not valid JSON"),
        ({"schema": "helios-sweep/2"}, "not a helios-bisect/1 record"),
    ],
)
def test_a_record_that_is_not_this_bisection_is_never_replaced_silently(tmp_path, doc, why):
    from helios.harness.runs.ci import CiError

    with pytest.raises(CiError, match=why) as e:
        _resume(tmp_path, doc)
    assert "bisect.json" in str(e.value) and "--force" in str(e.value)
    assert _resume(tmp_path, doc, replace=True) is None


@pytest.mark.parametrize(
    "over,field",
    [
        ({"steps": ["x"]}, "steps[0]"),
        ({"step.commit": None}, "'commit'"),
        ({"step.shapes": "64x64x64"}, "'shapes'"),
        ({"step.mde_pct": "4%"}, "'mde_pct'"),
        ({"step.shapes": [{"shape": "64x64x64", "verdict": "SLOWER", "change_pct": None}]}, "'change_pct'"),
        ({"step.index": "2"}, "'index'"),
        ({"step.index": 1}, "is not commit 1"),
        ({"step.verdict": "MAYBE"}, "'verdict'"),
    ],
)
def test_a_malformed_step_is_named_with_its_file(tmp_path, over, field):
    """Each was a different Python error (string indices, KeyError, format codes)."""
    from helios.harness.runs.ci import CiError

    with pytest.raises(CiError) as e:
        _resume(tmp_path, _record(**over))
    assert "bisect.json" in str(e.value) and field in str(e.value)


def test_bisect_stopped_inconclusive_at_bad_exits_3():
    """The case more runs would decide: exit 3 as documented, not 1 ("not found")."""
    from helios.cli.bisect import exit_status
    from helios.harness.runs.bisect import Judgment, search

    record = search(COMMITS, lambda c, s: Judgment("INCONCLUSIVE", [], 30.0), 5, {})
    assert "INCONCLUSIVE" in record["status"] and "more --runs" in record["status"]
    assert exit_status(record["status"]) == 3
    not_slower = search(COMMITS, lambda c, s: Judgment("NOT SLOWER", [], 3.0), 5, {})
    assert exit_status(not_slower["status"]) == 1


# ---- energy readers on junk ---------------------------------------------------------------------------

JUNK_ENERGY = [
    "junk",
    {"status": "ok"},
    {"helios": "junk"},
    {"helios": {"status": "ok"}},
    {"helios": {"status": "ok", "joules_per_op": "x", "watts": 1, "tflops_per_watt": 1}},
    {"helios": {"status": "ok", "joules_per_op": 1, "watts": 1, "tflops_per_watt": 1}, "reference": 7},
]


@pytest.mark.parametrize("energy", JUNK_ENERGY, ids=range(len(JUNK_ENERGY)))
def test_energy_readers_take_junk_as_no_window(energy):
    from helios.harness.results.energy import energy_lines, energy_rounds

    rows = [{"shape": "8x8x8", "valid": True, "energy": energy}]
    lines = energy_lines(rows, "torch")
    assert all(isinstance(x, str) for x in lines)
    assert isinstance(energy_rounds([{"rows": rows}]), dict)


@pytest.mark.parametrize("energy", JUNK_ENERGY, ids=range(len(JUNK_ENERGY)))
def test_plot_energy_takes_junk_as_no_point(energy):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from helios.harness.results.report import plot_energy

    ax = plot_energy([{"rows": [{"shape": "8x8x8", "energy": energy}]}])
    assert ax is not None
    assert math.isfinite(len(ax.collections))
