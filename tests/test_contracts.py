"""What a user meets first, held to the rules everywhere: the torch custom ops'
fake implementations refuse what the ops refuse (one check for both), DLPack's
arguments as the standard has them, torch users' hints, messages that name the
operand, the flag or the signal, figures in significant digits, sizes that fit
the device by default, the development box's own folders, and a distribution
name (and install lines) of this project's own."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import numpy as np
import pytest

import helios
from helios.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]

# ---- the torch custom ops: the fake refuses what the op refuses ----------------------------------------

torch = pytest.importorskip("torch")
from helios.torch import _library  # noqa: E402


def meta(*shape, dtype=torch.float16):
    return torch.empty(*shape, device="meta", dtype=dtype)


FAKE_CASES = {
    "mm 8x16 @ 8x16": (lambda: torch.ops.helios.mm(meta(8, 16), meta(8, 16), False, False), ValueError, "chain"),
    "mm 1-D": (lambda: torch.ops.helios.mm(meta(16), meta(16, 4), False, False), ValueError, "dimensions"),
    "mm 3-D": (lambda: torch.ops.helios.mm(meta(2, 8, 16), meta(16, 4), False, False), ValueError, "dimensions"),
    "mm int32": (
        lambda: torch.ops.helios.mm(meta(8, 16, dtype=torch.int32), meta(16, 4), False, False),
        TypeError,
        "int32",
    ),
    "mm float16 @ float32": (
        lambda: torch.ops.helios.mm(meta(8, 16), meta(16, 4, dtype=torch.float32), False, False),
        TypeError,
        "float32",
    ),
    "mm2 second pair": (
        lambda: torch.ops.helios.mm2(meta(8, 16), meta(16, 4), False, False, meta(8, 16), meta(8, 4), False, False),
        ValueError,
        "chain",
    ),
    "attention head dims differ": (
        lambda: torch.ops.helios.attention(meta(1, 2, 8, 16), meta(1, 2, 8, 8), meta(1, 2, 8, 8), False, None),
        ValueError,
        "d",
    ),
    "attention 3-D q": (
        lambda: torch.ops.helios.attention(meta(2, 8, 16), meta(1, 2, 8, 16), meta(1, 2, 8, 16), False, None),
        ValueError,
        "dimensions",
    ),
    "linear bias of length 3": (
        lambda: torch.ops.helios.linear(meta(8, 16), meta(4, 16), meta(3), None),
        ValueError,
        "bias",
    ),
    "linear unknown activation": (
        lambda: torch.ops.helios.linear(meta(8, 16), meta(4, 16), None, "tanh"),
        ValueError,
        "activation",
    ),
    "attention_backward k of another batch": (
        lambda: torch.ops.helios.attention_backward(
            meta(1, 2, 8, 16), meta(2, 2, 8, 16), meta(2, 2, 8, 16), meta(1, 2, 8, 16), meta(1, 2, 8, 16),
            meta(1, 2, 8, dtype=torch.float32), False, None,
        ),
        ValueError,
        "q's B, H and d",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(FAKE_CASES))
def test_a_fake_refuses_what_its_op_refuses(case):
    """Traced with meta tensors (what torch.compile does), each gave an output shape;
    a compiled graph then failed only at run time."""
    call, exc, words = FAKE_CASES[case]
    with pytest.raises(exc, match=words):
        call()


def test_the_fake_and_the_op_share_one_check():
    """The op runs the same check (check_mm) before it stages anything: on CPU tensors
    it refuses the device first, on CUDA meta shapes the shapes."""
    with pytest.raises(TypeError, match="CUDA tensor"):
        _library.check_mm("mm", torch.ones(8, 16, dtype=torch.float16), torch.ones(16, 4, dtype=torch.float16), 0, 0)
    with pytest.raises(ValueError, match="chain") as fake:
        torch.ops.helios.mm(meta(8, 16), meta(8, 16), False, False)
    with pytest.raises(ValueError) as shared:
        _library.check_mm("mm", meta(8, 16), meta(8, 16), False, False, cuda=False)
    assert str(fake.value) == str(shared.value)


def test_valid_fakes_still_give_their_shapes():
    assert torch.ops.helios.mm(meta(5, 3), meta(7, 3), False, True).shape == (5, 7)
    o, lse = torch.ops.helios.attention(meta(2, 3, 4, 8), meta(2, 3, 6, 8), meta(2, 3, 6, 8), False, None)
    assert o.shape == (2, 3, 4, 8) and lse.shape == (2, 3, 4)
    assert torch.ops.helios.linear(meta(5, 3), meta(7, 3), meta(7, dtype=torch.float32), "relu").shape == (5, 7)


# ---- DLPack as the standard has it -----------------------------------------------------------------------


@pytest.fixture
def host_tensor(device):
    return device.upload(np.arange(12, dtype=np.float16).reshape(3, 4))


def test_a_host_export_refuses_copy_false(host_tensor):
    with pytest.raises(BufferError, match="copy=False"):
        host_tensor.__dlpack__(copy=False)
    assert np.array_equal(np.from_dlpack(host_tensor), host_tensor.numpy())  # a copy where one is allowed


@pytest.mark.parametrize("dl_device,exc", [((2, 0), BufferError), ((99, 7), BufferError), ("junk", TypeError)])
def test_dl_device_is_checked(host_tensor, dl_device, exc):
    with pytest.raises(exc, match="dl_device"):
        host_tensor.__dlpack__(dl_device=dl_device)
    host_tensor.__dlpack__(dl_device=(1, 0))  # where it is: taken


@pytest.mark.parametrize("stream,exc", [("junk", TypeError), (1.5, TypeError), (1, BufferError)])
def test_a_host_copy_takes_no_stream(host_tensor, stream, exc):
    """stream junk surfaced as NumPy's 'NumPy only supports stream=None'."""
    with pytest.raises(exc, match="stream"):
        host_tensor.__dlpack__(stream=stream)


# ---- torch users' hints ------------------------------------------------------------------------------------


def test_a_tensor_that_requires_grad_gets_the_detach_hint():
    x = torch.ones(4, 8).float().requires_grad_()
    with pytest.raises(TypeError, match=r"a\.detach\(\)"):
        helios.matmul(x, np.ones((8, 2), np.float16))


def test_attention_takes_torch_neutral_keywords_and_refuses_the_rest(device):
    q = np.random.default_rng(0).standard_normal((1, 1, 8, 16)).astype(np.float16)
    o = device.attention(q, q, q, attn_mask=None, dropout_p=0.0)
    assert np.array_equal(o, device.attention(q, q, q))
    with pytest.raises(ValueError, match="attn_mask"):
        helios.attention(q, q, q, attn_mask=np.ones((8, 8), bool), device=device)
    with pytest.raises(ValueError, match="dropout_p"):
        helios.attention(q, q, q, dropout_p=0.1, device=device)


def test_to_cuda_says_how_to_reach_torch(host_tensor):
    with pytest.raises(ValueError, match="from_dlpack"):
        host_tensor.to("cuda")
    with pytest.raises(ValueError, match="from_dlpack"):
        host_tensor.to("cuda:0")


# ---- messages ------------------------------------------------------------------------------------------------


def test_a_buffer_past_the_device_limits_names_the_operand(device):
    limit = int(device.info["max_storage_buffer_range"])
    rows = limit // (2 * 1024) + 8  # a float16 (rows, 1024) A just past one buffer
    if rows * 1024 * 2 > 1 << 33:
        pytest.skip(f"this device's buffers ({limit} bytes) are too large to exceed in a test")
    a = np.ones((rows, 1024), np.float16)
    with pytest.raises(helios.DeviceMemoryError, match=rf"operands a \({rows}, 1024\)"):
        device.matmul(a, np.ones((1024, 8), np.float16))
    with pytest.raises(helios.DeviceMemoryError, match=rf"Tensor of shape \({rows}, 1024\)"):
        device.upload(a)


def test_an_unknown_flag_is_named_even_where_it_took_a_positional(capsys):
    """`helios bisect --foo bad` said only 'the following arguments are required: bad'."""
    with pytest.raises(SystemExit) as e:
        main(["bisect", "--foo", "bad"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--foo" in err and "helios bisect" in err


@pytest.mark.parametrize("command", [["ci"], ["bisect", "HEAD~1", "HEAD"]])
def test_work_that_is_a_file_is_refused_before_any_build(command, tmp_path, capsys):
    """`helios ci` ended with an internal FileExistsError; bisect built first, then
    failed with NotADirectoryError."""
    work = tmp_path / "work"
    work.write_text("a file")
    assert main([*command, f"--work={work}", f"--out={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err
    assert "--work" in err and "not a directory" in err and "internal error" not in err
    assert not (tmp_path / "out" / "site-base").exists()


def test_driver_statistics_are_shown_in_their_units():
    from helios.cli.info import stat_text

    info = {"device_local_bytes": 141 << 30}  # an H200: 2^36 is less than its memory, still no thread's
    assert stat_text("Local Memory Size", float(2**36), info).endswith("more than a thread's 512 KiB)")
    assert stat_text("Stack Size", 1024.0, info) == "Stack Size 1 KiB"
    assert stat_text("Binary Size", float(2**40), info).endswith("more than the device's memory)")
    assert stat_text("Binary Size", 177152.0, info) == "Binary Size 173 KiB"
    assert stat_text("Register Count", 238.0, info) == "Register Count 238"
    assert stat_text("Shared Memory Size", 0.0, info) == "Shared Memory Size 0 B"


def test_scaled_defaults_name_only_what_was_scaled(device, capsys):
    """`bench --shapes=12x12` listed the user's own --shapes among the defaults scaled."""
    if device.info["device_type"] != "cpu":
        pytest.skip("defaults are scaled on a CPU device only")
    from helios.cli.bench import scale_defaults

    args = argparse.Namespace(shapes="12x12x12", iters=None, warmup=None, device=None, disable_coop=False)
    scale_defaults(args)
    err = capsys.readouterr().err
    assert "--iters=10 --warmup=3" in err and "--shapes" not in err


def test_the_suite_sizes_its_mlp_to_the_device(device, capsys):
    """On a CPU device `suite mlp` started the H100-size block (d=4096, hidden 14336:
    hours there), and --tiny applied to train only."""
    from helios.cli.suite import SUITES, workload_base
    from helios.harness.workloads.mlp import MlpConfig

    mlp = SUITES["mlp"]
    cpu = device.info["device_type"] == "cpu"
    cfg = MlpConfig(**workload_base(build_parser().parse_args(["suite", "mlp"]), mlp))
    got = {k: getattr(cfg, k) for k in mlp.fields}
    assert got == (dict(mlp.small) if cpu else {"tokens": [512, 1024, 2048, 4096], "d_model": 4096,
                                                 "hidden": 14336, "iters": 50, "warmup": 10})  # fmt: skip
    capsys.readouterr()
    tiny = workload_base(build_parser().parse_args(["suite", "mlp", "--tiny", "--hidden=512"]), mlp)
    assert tiny["d_model"] == mlp.small["d_model"] and tiny["hidden"] == 512
    err = capsys.readouterr().err
    assert "helios suite mlp: --tiny: defaults scaled to --tokens=16,64 --d-model=256 --iters=5" in err
    assert "--hidden" not in err


def test_an_adapter_that_raises_is_failed_not_skipped():
    from helios.harness.workloads.mlp import UNAVAILABLE

    assert issubclass(helios.UnsupportedError, UNAVAILABLE) and not issubclass(RuntimeError, UNAVAILABLE)
    src = (ROOT / "python/helios/harness/workloads/mlp.py").read_text()
    assert 'f"failed: {type(e).__name__}' in src and "skipped: torch.compile failed" not in src


def test_cmake_without_vulkan_points_to_the_development_box(tmp_path):
    import shutil
    import subprocess

    if not shutil.which("cmake"):
        pytest.skip("needs cmake")
    r = subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(tmp_path), "-DVulkan_INCLUDE_DIR=/nonexistent", "-DVulkan_LIBRARY="],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode != 0
    assert "development box" in r.stderr and "make wheel" in r.stderr


# ---- figures in significant digits --------------------------------------------------------------------------


def test_report_shows_a_cpu_devices_rates_not_zero(device, tmp_path, capsys):
    """Plain, --md and --html printed every CPU-device TF/s as 0.0 (bench's own table
    had 0.00297)."""
    import json

    from test_results import _bench

    from helios.harness.results.format import fmt_rate

    rc, out = _bench(tmp_path, "b.json")
    assert rc == 0
    rates = [fmt_rate(r["heliosTflops"]) for r in json.loads(out.read_text())["rows"]]
    capsys.readouterr()
    for flags in ([], ["--md"]):
        assert main(["report", *flags, str(out)]) == 0
        shown = capsys.readouterr().out
        assert all(x in shown for x in rates), (rates, shown)
    assert main(["report", "--html", str(tmp_path / "html"), str(out)]) == 0
    page = (tmp_path / "html" / "index.html").read_text()
    assert all(f">{x}</td>" in page for x in rates)


def test_peak_memory_under_a_mib_is_shown():
    from helios.harness.results.format import fmt_mib

    assert fmt_mib(256 << 10) == "0.25" and fmt_mib(14 << 30) == "14336.0"
    assert fmt_mib(None) == "-"


# ---- the development box's own folders -----------------------------------------------------------------------


def test_the_box_shares_its_caches_with_the_host(monkeypatch):
    """`tools/dev helios tune` and `tools/dev helios roof` with their defaults refused
    their own cache: it is bind-mounted from the host."""
    if not os.environ.get("HELIOS_DEV_SHARED"):
        pytest.skip("runs inside the development box (tools/dev), which sets HELIOS_DEV_SHARED")
    from helios import roof
    from helios.cli.common import target
    from helios.tune_cache import cache_path

    monkeypatch.delenv("HELIOS_TUNE_CACHE", raising=False)  # the defaults, under XDG_CACHE_HOME
    monkeypatch.delenv("HELIOS_ROOF_CACHE", raising=False)
    assert str(cache_path()).startswith("/var/cache/helios-dev-cache/")
    target(cache_path(), "--cache")  # refused before: UsageError
    target(roof.cache_path(), "--cache")


def test_a_symlinked_parent_is_followed_to_where_the_file_lands(tmp_path, monkeypatch):
    from helios.cli.common import UsageError, check_shared

    shared, outside = tmp_path / "shared", tmp_path / "outside"
    shared.mkdir()
    outside.mkdir()
    (shared / "link").symlink_to(outside)
    monkeypatch.setenv("HELIOS_DEV_SHARED", str(shared))
    check_shared(shared / "x.json", "--out")
    with pytest.raises(UsageError, match="would stay inside the box"):
        check_shared(shared / "link" / "x.json", "--out")


def test_the_box_runs_from_a_folder_outside_the_checkout():
    """tools/dev refused `cd /tmp && tools/dev ...`: it mounts the caller's folder."""
    text = (ROOT / "tools/dev").read_text()
    assert 'die "run it from inside the checkout' not in text
    assert 'mount --bind "$W" "$R$W"' in text and "/var/cache/helios-dev-cache" in text.split("SHARED=")[1][:120]


# ---- a distribution name of our own --------------------------------------------------------------------------


def test_the_distribution_is_not_pypis_helios():
    """`helios` on PyPI is an unrelated package: `pip install 'helios[all]'` installed it."""
    text = (ROOT / "pyproject.toml").read_text()
    name = re.search(r'^name = "([^"]+)"', text, re.M)
    assert name and name.group(1) == "helios-vulkan"
    assert 'all = ["helios-vulkan[' in text


def test_every_install_line_installs_this_project(monkeypatch):
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    bad = []
    for p in docs:
        for n, line in enumerate(p.read_text().splitlines(), 1):
            for m in re.finditer(r"pip install\s+([^\s`#]+)", line):
                arg = m.group(1).strip("'\"")
                if re.fullmatch(r"helios(\[.*\])?", arg):
                    bad.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, bad
    from helios import optional

    monkeypatch.setitem(optional.EXTRAS, "helios_no_such_module_x", "stats")
    with pytest.raises(optional.MissingDependencyError, match=r"helios-vulkan\[stats\]"):
        optional.require("helios_no_such_module_x", "a test")


# ---- docs that agree with behaviour ----------------------------------------------------------------------------


def test_the_docs_say_what_the_commands_do():
    readme = (ROOT / "README.md").read_text()
    assert "goes before or after the command" in readme
    python_guide = (ROOT / "docs/guide/python.md").read_text()
    assert "Operands are 2-D or 3-D NumPy" not in python_guide and "1-D" in python_guide
    times = {
        p: re.findall(r"(\d) to (\d) minutes", (ROOT / p).read_text())
        for p in ("README.md", "docs/install.md", "tools/dev")
    }
    assert all(t == [("2", "4")] for t in times.values()), times
    assert "helios info --json | head -1`)" not in (ROOT / "docs/guide/compare-ci.md").read_text()
