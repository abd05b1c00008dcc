"""The signal policy over a command's whole life (helios/signals.py): SIGTERM is
Ctrl-C, a second signal never cuts the write of what was measured, and SIGINT or
SIGTERM in any phase after the first measurement keeps what was measured —
during the rounds, while the rows are assembled, during their extras (kernel
identity, energy windows) and while the files are written; tune keeps every pick
it finished; bisect says where its steps are; and a wait on a long submission
wakes up for the signal instead of holding it for minutes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from test_results import _bench

from helios.cli import main


def test_sigterm_keeps_what_was_measured(device, tmp_path, monkeypatch):
    """SIGTERM (Slurm, CI runners) in the second round: the complete round is written,
    status interrupted, exit 143 (it used to kill the bench with everything it measured)."""
    from helios.harness.protocol import rounds as protocol

    calls = {"n": 0}
    real = protocol.gpu_state

    def terminated(*a, **k):
        calls["n"] += 1
        if calls["n"] == 5:  # round 2's first shape
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*a, **k)

    monkeypatch.setattr(protocol, "gpu_state", terminated)
    rc, out = _bench(tmp_path, "b.json", "--repeats=3")
    assert rc == 143
    res = json.loads(out.read_text())
    assert res["status"] == "interrupted" and res["rows"]
    assert all(len(r["helios"]["samples_ms"]) >= 1 for r in res["rows"])
    assert signal.getsignal(signal.SIGTERM) is not None  # the handler is given back


def test_a_second_signal_does_not_cut_the_write(device, tmp_path, monkeypatch, capsys):
    """Two signals close together used to lose the completed rounds ("nothing written"):
    the second, arriving while the result is written, only says so."""
    from helios.cli import common
    from helios.harness.protocol import rounds as protocol

    calls = {"n": 0}
    real_state, real_write = protocol.gpu_state, common.write_results

    def interrupted(*a, **k):
        calls["n"] += 1
        if calls["n"] == 5:
            os.kill(os.getpid(), signal.SIGINT)
        return real_state(*a, **k)

    def write_under_fire(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)  # the second signal, while writing
        return real_write(*a, **k)

    monkeypatch.setattr(protocol, "gpu_state", interrupted)
    monkeypatch.setattr(common, "write_results", write_under_fire)
    rc, out = _bench(tmp_path, "b.json", "--repeats=3")
    assert rc == 130
    assert json.loads(out.read_text())["status"] == "interrupted"
    assert "SIGTERM again" in capsys.readouterr().err


# (module, attribute) the bench calls in each phase after its rounds (the workload's
# rows, the driver's extras, the command's files); the signal is sent at that call's start.
PHASES = {
    "row assembly": ("helios.harness.workloads.matmul", "_row"),
    "kernel identity": ("helios.harness.workloads.bench", "kernel_identity"),
    "energy windows": ("helios.harness.workloads.bench", "energy_of_rows"),
    "writing the files": ("helios.cli.common", "write_results"),
}


def _signal_at(monkeypatch, module: str, name: str, sig: int, once: bool = True) -> None:
    import importlib

    mod = importlib.import_module(module)
    real = getattr(mod, name)
    sent = []

    def hooked(*a, **k):
        if not (once and sent):
            sent.append(sig)
            os.kill(os.getpid(), sig)
        return real(*a, **k)

    monkeypatch.setattr(mod, name, hooked)


@pytest.mark.parametrize("phase", list(PHASES))
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_in_any_phase_after_the_rounds_keeps_every_row(device, tmp_path, monkeypatch, capsys, phase, sig):
    """Before, only the round loop caught it: a signal in the later phases printed
    'nothing written' and lost every round."""
    _signal_at(monkeypatch, *PHASES[phase], sig)
    rc, out = _bench(tmp_path, "b.json", "--repeats=2")
    err = capsys.readouterr().err
    assert rc == 128 + sig, err
    assert "nothing written" not in err
    res = json.loads(out.read_text())
    assert [r["shape"] for r in res["rows"]] == ["16x16x16", "24x8x40"]
    assert all(len(r["helios"]["samples_ms"]) == 2 for r in res["rows"])  # both rounds, every row
    assert out.with_suffix(".md").exists()
    if phase == "writing the files":  # everything was done: the file is whole, the exit says the signal
        assert res["status"] == "ok"
        return
    named = "SIGTERM" if sig == signal.SIGTERM else "Ctrl-C"
    assert res["status"] == "interrupted"
    assert named in res["failure"] and named in err  # the signal as it was, not always "Ctrl-C"


def test_a_signal_in_the_extras_leaves_rows_without_them_marked(device, tmp_path, monkeypatch):
    _signal_at(monkeypatch, *PHASES["kernel identity"], signal.SIGTERM)
    rc, out = _bench(tmp_path, "b.json")
    res = json.loads(out.read_text())
    assert rc == 143 and "kernel identity and energy windows are missing" in res["failure"]
    assert all(r["energy"] == {"status": "not measured: interrupted"} for r in res["rows"])


def test_tune_keeps_every_pick_it_finished(device, tmp_path, monkeypatch, capsys):
    """SIGTERM after the first of four shapes (four buckets): that pick is in the cache,
    exit 143 (before: zero picks)."""
    from helios import tune

    real = tune.Eta.done

    def after_first(self, i):
        if i == 0:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(self, i)

    monkeypatch.setattr(tune.Eta, "done", after_first)
    cache = tmp_path / "tune.json"
    v = device.default_variant(16, 16, 16)
    rc = main(
        [
            "tune",
            "--shapes=16x16x16,200x16x16,16x200x16,16x16x200",
            f"--candidates={v}",
            "--iters=1",
            "--warmup=0",
            "--warmup-ms=0",
            f"--cache={cache}",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 143, err
    buckets = [b for d in json.loads(cache.read_text())["devices"].values() for b in d["buckets"]]
    assert len(buckets) >= 1, err
    assert "picks finished are in" in err


def test_bisect_interrupted_says_where_its_steps_are(tmp_path, monkeypatch, capsys):
    from helios.harness.runs import bisect

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(bisect, "run_bisect", interrupted)
    assert main(["bisect", "HEAD~1", "HEAD", f"--out={tmp_path}"]) == 130
    err = capsys.readouterr().err
    assert "nothing written" not in err and "bisect.json" in err and "resume" in err


LONG_PRODUCT = r"""
import os, sys, time
import numpy as np, helios
from helios.signals import SignalPolicy
n = int(sys.argv[1])
with SignalPolicy() as stop:
    dev = helios.Device()
    v = dev.default_variant(n, n, n)
    dev.matmul(np.ones((8, 8), np.float16), np.ones((8, 8), np.float16), variant=v)  # compiled before
    x = np.ones((n, n), np.float16)
    print("waiting", flush=True)
    t0 = time.monotonic()
    try:
        dev.matmul(x, x, variant=v)
        print(f"finished {time.monotonic() - t0:.1f}", flush=True)
    except KeyboardInterrupt:
        print(f"interrupted {time.monotonic() - t0:.1f}", flush=True)
    dev.close()
sys.exit(stop.status if stop.first else 0)
"""


# The same product recorded into a capture and replayed (a training step's submission):
# the replay's wait wakes for the signal too, and the device is usable after it (the
# next operation waits for the abandoned replay, then runs).
LONG_CAPTURE = r"""
import os, sys, time
import numpy as np, helios
from helios.signals import SignalPolicy
n = int(sys.argv[1])
with SignalPolicy() as stop:
    dev = helios.Device()
    a = dev.upload(np.ones((n, n), np.float16))
    c = dev.empty((n, n))
    small = dev.upload(np.ones((8, 8), np.float16))
    dev.matmul(small, small)  # the small product's pipeline compiled before
    with dev.capture() as step:
        dev.matmul(a, a, out=c)
    print("waiting", flush=True)
    t0 = time.monotonic()
    try:
        step.replay()
        print(f"finished {time.monotonic() - t0:.1f}", flush=True)
    except KeyboardInterrupt:
        print(f"interrupted {time.monotonic() - t0:.1f}", flush=True)
    r = dev.matmul(np.ones((8, 8), np.float16), np.ones((8, 8), np.float16))
    print("usable" if float(np.asarray(r)[0, 0]) == 8.0 else "wrong", flush=True)
    dev.close()
sys.exit(stop.status if stop.first else 0)
"""


def _sigterm_during_a_long_product(tmp_path, env: dict, source: str = LONG_PRODUCT) -> tuple[str, str, int, float]:
    script = tmp_path / "long.py"
    script.write_text(source)
    p = subprocess.Popen(
        [sys.executable, *(["-S"] if sys.flags.no_site else []), str(script), "4096"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "waiting"
        time.sleep(1.0)
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
        stopped = time.monotonic() - t0
    finally:
        p.kill()
    return out, err, p.returncode, stopped


@pytest.mark.timing
def test_a_long_submission_stops_within_seconds_of_sigterm(device, tmp_path):
    """On lavapipe a 4096^3 product takes ~15 s on two cores; its wait used to hold
    SIGINT and SIGTERM until the GPU finished (minutes for a suite). Now the wait wakes
    up for the signal, the device leaves the work to finish on its own, and the process
    exits within seconds."""
    if device.info["device_type"] != "cpu":
        pytest.skip("a product long enough to interrupt by hand needs a CPU Vulkan device (on a GPU it takes ms)")
    out, err, rc, stopped = _sigterm_during_a_long_product(tmp_path, {})
    assert out.startswith("interrupted"), out + err
    assert rc == 143, err
    assert stopped < 6.0, f"took {stopped:.1f} s after SIGTERM to exit"


@pytest.mark.timing
def test_a_long_replay_stops_within_seconds_of_sigterm_and_the_device_goes_on(device, tmp_path):
    """A capture's replay (a whole training step) waits as a product does: SIGTERM wakes
    it within seconds, and the next operation on the device runs (after the abandoned
    replay finishes) and is right."""
    if device.info["device_type"] != "cpu":
        pytest.skip("a replay long enough to interrupt by hand needs a CPU Vulkan device (on a GPU it takes ms)")
    out, err, rc, stopped = _sigterm_during_a_long_product(tmp_path, {}, LONG_CAPTURE)
    assert out.startswith("interrupted") and "usable" in out, out + err
    assert rc == 143, err
    assert float(out.split()[1]) < 6.0, out  # the replay gave up its wait within seconds of the signal


@pytest.mark.timing
def test_the_kill_switch_lets_the_wait_run_to_its_end(device, tmp_path):
    """HELIOS_DISABLE_INTERRUPT=1: the wait does not wake; the product runs to its end,
    then the signal is handled (as before the interrupt check existed)."""
    if device.info["device_type"] != "cpu":
        pytest.skip("a product long enough to interrupt by hand needs a CPU Vulkan device (on a GPU it takes ms)")
    out, err, rc, stopped = _sigterm_during_a_long_product(tmp_path, {"HELIOS_DISABLE_INTERRUPT": "1"})
    seconds = out.split()[1]
    assert float(seconds) > 4.0 and stopped > 3.0, out + err  # the product's whole time, not the signal's 1 s
    assert rc == 143, err


ATTENTION_PHASES = {
    k: ("helios.harness.workloads.attention", v[1]) if k == "row assembly" else v
    for k, v in PHASES.items()
    if k != "writing the files"
}


@pytest.mark.parametrize("phase", list(ATTENTION_PHASES))
def test_the_attention_bench_keeps_every_row_too(device, tmp_path, monkeypatch, capsys, phase):
    """The attention workload's phases after its rounds, under SIGTERM (the same
    protocol: row_extras, then emit)."""
    _signal_at(monkeypatch, *ATTENTION_PHASES[phase], signal.SIGTERM)
    out = tmp_path / "a.json"
    shapes = "1x1x16x16,1x2x24x16"
    rc = main(
        ["bench", "--workload=attention", f"--shapes={shapes}", "--iters=2", "--warmup=0", "--warmup-ms=0"]
        + ["--ref=numpy", "--repeats=2", f"--out={out}"]
    )
    err = capsys.readouterr().err
    assert rc == 143, err
    res = json.loads(out.read_text())
    assert res["status"] == "interrupted" and "SIGTERM" in res["failure"]
    assert len(res["rows"]) == 2 and all(len(r["helios"]["samples_ms"]) == 2 for r in res["rows"])
