"""Defects a new user or a hostile input found: each test
fails on the old behaviour. Generated inputs (hypothesis) cover the readers of
files Helios did not write, the --out templates and the numeric flags."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import helios
from helios import tune_cache
from helios.cli import main
from helios.files import read_json
from helios.harness.results.compare_load import CompareError, load
from helios.launcher import expand_out

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# ---- the assert helper ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad", [np.full(4, np.nan, np.float16), np.array([1, 1, np.inf, 1], np.float16), np.array([1, 1, 1, 2], np.float16)]
)
def test_check_close_truth_is_its_verdict(bad):
    r = helios.check_close(bad, np.ones(4))
    assert not r and not r.passed
    with pytest.raises(AssertionError, match="not close"):
        helios.assert_close(bad, np.ones(4))
    assert helios.check_close(np.ones(4, np.float16), np.ones(4))


def test_check_close_refuses_a_shape_mismatch_and_bad_tolerances():
    with pytest.raises(ValueError, match="shape"):
        helios.check_close(np.ones(4), np.ones(5))
    with pytest.raises(ValueError, match="finite"):
        helios.check_close(np.ones(4), np.ones(4), atol=float("nan"))


# ---- files Helios reads --------------------------------------------------------------------------


def _cache_with(tmp_path, content: bytes):
    p = tmp_path / "tune.json"
    p.write_bytes(content)
    return p


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


@FAST
@given(st.binary(max_size=300))
def test_tune_cache_reader_on_any_bytes(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("c") / "t.json"
    p.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doc = tune_cache.load(p)
    assert doc["schema"] == tune_cache.SCHEMA and isinstance(doc["devices"], dict)


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=8) | st.integers(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=20,
)


@FAST
@given(st.dictionaries(st.sampled_from(["schema", "status", "rows", "helios", "device", "x"]), json_values, max_size=5))
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


# ---- paths and names Helios writes ---------------------------------------------------------------


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


@FAST
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


# ---- flags ---------------------------------------------------------------------------------------

BAD_FLAGS = [
    ["bench", "--warmup-ms=nan"],
    ["bench", "--warmup-ms=-5"],
    ["bench", "--warmup-ms=inf"],
    ["bench", "--atol=nan"],
    ["bench", "--suite=bogus"],
    ["bench", "--seed=-1"],
    ["bench", "--iters=0"],
    ["bench", "--shapes=99999999999999999999x1x1"],
    ["tune", "--warmup-ms=nan"],
    ["compare", "--fail-on-regression=-5", "a.json", "b.json"],
    ["compare", "--run-noise=nan", "a.json", "b.json"],
    ["compare", "--level=1.5", "a.json", "b.json"],
    ["check", "--max-dim=0"],
    ["check", "--seed=-1"],
]


@pytest.mark.parametrize("argv", BAD_FLAGS, ids=lambda a: " ".join(a))
def test_bad_flags_exit_2_before_any_work(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    flag = argv[1].split("=")[0]
    assert flag in err and "Traceback" not in err


@FAST
@given(
    st.sampled_from(["--warmup-ms", "--atol", "--rtol"]),
    st.one_of(st.floats(), st.text(alphabet="0123456789.e-+naif", max_size=6)),
)
def test_numeric_flags_are_finite_or_refused(flag, value):
    from helios.cli import build_parser

    parser = build_parser()
    try:
        args = parser.parse_args(["bench", f"{flag}={value}"])
    except SystemExit as e:
        assert e.code == 2
        return
    v = getattr(args, flag.lstrip("-").replace("-", "_"))
    assert math.isfinite(v) and v >= 0


@pytest.mark.parametrize(
    "kwargs,err",
    [
        ({"device": "x"}, TypeError),
        ({"alpha": "2"}, TypeError),
        ({"alpha": True}, TypeError),
        ({"alpha": float("nan")}, ValueError),
        ({"alpha": 10**400}, ValueError),
        ({"trans_a": "yes"}, TypeError),
        ({"c": np.ones((4, 4), np.complex64), "beta": 1.0}, TypeError),
        ({"c": np.ones((4, 4), np.int64), "beta": 1.0}, TypeError),
    ],
)
def test_api_arguments_are_checked(device, kwargs, err):
    a = np.ones((4, 4), np.float16)
    kw = dict(kwargs)
    if "device" not in kw:
        kw["device"] = device
    with pytest.raises(err) as e:
        helios.matmul(a, a, **kw)
    name = [k for k in kwargs if k != "beta"][0]
    assert name in str(e.value) or name == "device"


@pytest.mark.parametrize("shape", [(3.9, 2), (True, 2), ("a", 2)])
def test_empty_refuses_non_integer_dims(device, shape):
    with pytest.raises(TypeError, match="shape"):
        device.empty(shape)


@pytest.mark.parametrize("x", [np.ones(4, np.int32), np.ones(4, np.complex64), np.ones(4, object), np.ones(4, bool)])
def test_one_conversion_rule_for_uploads(device, x):
    with pytest.raises(TypeError, match="floating-point"):
        device.upload(x)
    with pytest.raises(TypeError, match="floating-point"):
        helios.from_dlpack(x, device=device)


def test_float64_is_rounded_everywhere_alike(device):
    x = np.full((4, 4), 1 / 3)
    assert device.upload(x).numpy().dtype == np.float16
    assert np.array_equal(device.upload(x).numpy(), x.astype(np.float16))


def test_attention_flags_and_aliases(device):
    q = np.random.default_rng(0).standard_normal((1, 1, 8, 16)).astype(np.float16)
    for bad in ("yes", None):
        with pytest.raises(TypeError, match="causal"):
            device.attention(q, q, q, causal=bad)
    a = device.attention(q, q, q, is_causal=True)
    b = device.attention(q, q, q, causal=True)
    assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="disagree"):
        device.attention(q, q, q, causal=True, is_causal=False)


def test_variant_strings_with_nul_are_refused(device):
    with pytest.raises(ValueError, match="NUL"):
        helios.canonical_variant("scalar:tile64x64x16:acc=f32\0junk")
    q = np.ones((1, 1, 8, 16), np.float16)
    with pytest.raises(ValueError, match="NUL"):
        device.attention(q, q, q, variant="fa-scalar\0x")


def test_chain_output_before_run_raises(device):
    x = device.upload(np.ones((8, 8), np.float16))
    ch = device.chain()
    y = ch.matmul(x, x)
    with pytest.raises(RuntimeError, match="has not run"):
        y.numpy()
    ch.run()
    assert (y.numpy() == 8).all()
    with pytest.raises(ValueError):
        ch.time(iters=0)


@pytest.mark.parametrize("value", ["garbage", "buffer:-1", "BUFFER:1", "buffer:1 ", "buffer:" + "9" * 70])
def test_malformed_fault_settings_are_reported_not_misfired(value):
    code = (
        "import numpy as np, helios\n"
        "with helios.Device() as d:\n"
        "    print((d.matmul(np.ones((4,4),np.float16), np.ones((4,4),np.float16)) == 4).all())\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, HELIOS_FAULT=value),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "True" in r.stdout, r.stderr
    assert "HELIOS_FAULT" in r.stderr and "ignored" in r.stderr


# ---- the CLI's exit codes -------------------------------------------------------------------------


def test_broken_pipe_is_not_a_traceback():
    r = subprocess.run(
        f"{sys.executable} -m helios info --json | head -1", shell=True, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr


def test_internal_error_is_one_line_and_exit_2(monkeypatch, capsys):
    import helios.cli.info as info_cmd

    def boom(args):
        raise KeyError("planted")

    monkeypatch.setattr(info_cmd, "cmd_info", boom)
    from helios.cli import build_parser

    args = build_parser().parse_args(["info"])
    args.func = boom
    monkeypatch.setattr(
        "helios.cli.build_parser", lambda: type("P", (), {"parse_known_args": lambda s, a: (args, [])})()
    )
    assert main(["info"]) == 2
    err = capsys.readouterr().err
    assert "internal error" in err and "KeyError" in err and "Traceback" not in err


def test_version_names_the_build(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert helios.__version__ in out and helios._helios.BUILD_COMMIT in out


def test_device_count_without_a_loader_is_zero():
    env = dict(os.environ, HELIOS_VULKAN_LOADER="/nonexistent/libvulkan.so.1")
    r = subprocess.run(
        [sys.executable, "-c", "import helios; print(helios.device_count())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.stdout.strip() == "0", r.stderr


def test_empty_batch_gives_numpys_answer(device):
    a, b = np.ones((0, 17, 23), np.float16), np.ones((23, 9), np.float16)
    r = device.matmul(a, b)
    assert r.shape == np.matmul(a, b).shape == (0, 17, 9)


def test_rows_of_minus_inf_scores_are_zero_everywhere(device):
    """Every key scored -inf: each attention variant and the float64 reference give 0 (torch's math
    backend's answer), never NaN."""
    rng = np.random.default_rng(1)
    q = np.abs(rng.standard_normal((1, 2, 5, 16))).astype(np.float16) + np.float16(0.1)
    k = np.full((1, 2, 7, 16), -np.inf, np.float16)
    v = rng.standard_normal((1, 2, 7, 16)).astype(np.float16)
    ref = helios.reference_attention(q, k, v)
    assert np.array_equal(ref, np.zeros_like(ref))
    # Both kernels (the coop one at its default and another tiling, and the scalar fallback);
    # every coop variant is the same softmax code with other tile constants.
    variants = device.attention_variants(16)
    for variant in sorted({variants[0], variants[-1], "fa-scalar"}):
        out = device.attention(q, k, v, variant=variant)
        assert np.array_equal(out, np.zeros_like(out)), variant


@pytest.mark.skipif(not os.environ.get("HELIOS_TOP"), reason="runs inside tools/dev only (it sets HELIOS_TOP)")
def test_the_dev_roots_dev_is_its_own():
    """Inside tools/dev, /dev is a private tmpfs with only the nodes programs need: a file written
    there (helios bench --out=/dev/x.json) never reaches the host's /dev."""
    mounts = [ln.split() for ln in open("/proc/self/mounts")]
    assert any(m[1] == "/dev" and m[2] == "tmpfs" and m[0] == "helios-dev" for m in mounts), mounts
    assert os.path.exists("/dev/null") and not os.path.exists("/dev/sda") and not os.path.exists("/dev/vda")
