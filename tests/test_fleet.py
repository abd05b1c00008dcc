"""Every GPU of a host and fleets: --devices runs one pinned bench per
device and summarizes them; ranks started by a launcher (as Slurm, torchrun or
mpirun start them: here local processes with their environment) take their
device from the launcher, name their results by host/UUID/rank, and
`helios report DIR` merges them into one fleet table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from test_compare import fake_result

from helios.cli import main
from helios.harness.runs.fleet import device_indices, fleet_markdown, strip_args, summarize
from helios.launcher import expand_out, launcher_device, launcher_info


def test_device_indices():
    infos = [{"device_type": "discrete_gpu"}, {"device_type": "cpu"}, {"device_type": "discrete_gpu"}]
    assert device_indices("all", infos) == [0, 2]
    assert device_indices("all", [{"device_type": "cpu"}]) == [0]
    assert device_indices("2,0", infos) == [2, 0]
    for bad in ("3", "0,0", "x", ""):
        with pytest.raises(ValueError, match="--devices"):
            device_indices(bad, infos)


def test_strip_args():
    argv = ["--shapes=8x8x8", "--out", "f.json", "--devices=all", "--devices-serial", "--force", "--iters=2"]
    assert strip_args(argv, ["--devices", "--devices-serial", "--out", "--force"]) == ["--shapes=8x8x8", "--iters=2"]


def test_summary_flags_the_slow_gpu():
    rng = np.random.default_rng(0)

    def gpu(level):
        return fake_result(
            {"4096x4096x4096": [rng.normal(level, 0.002, 30) for _ in range(6)]}, runs=[0, 0, 1, 1, 2, 2]
        )

    results = [gpu(1.0), gpu(1.0), gpu(1.0), gpu(1.25)]
    s = summarize(results, ["g0", "g1", "g2", "g3"])
    shape = s["shapes"][0]
    assert shape["outliers"] == ["g3"]
    assert shape["spread_pct"] == pytest.approx(25, abs=2)
    assert [g["verdict_vs_peers"] for g in shape["gpus"]][:3] != ["SLOWER"] * 3
    assert "outliers: g3" in fleet_markdown(s)


def test_a_numpy_reference_is_never_labelled_cuda():
    """The fleet table's reference column held NumPy times under "cuda ms": it names the
    reference, and cuda_ms stays null unless the reference ran on CUDA."""
    res = fake_result({"64x64x64": [[1.0, 1.0]]})
    res["reference"] = "numpy"
    res["rows"][0].update(referenceMs=3.0, cudaMs=None)
    s = summarize([res], ["cpu0"])
    g = s["shapes"][0]["gpus"][0]
    assert g["cuda_ms"] is None and g["reference_ms"] == 3.0 and g["reference"] == "numpy"
    table = fleet_markdown(s)
    assert "cuda ms" not in table and "3.0000 (numpy)" in table


def test_launcher_env(monkeypatch):
    for v in (
        "SLURM_LOCALID",
        "LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_PROCID",
        "RANK",
        "OMPI_COMM_WORLD_RANK",
        "CUDA_VISIBLE_DEVICES",
    ):
        monkeypatch.delenv(v, raising=False)
    assert launcher_info() is None
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("RANK", "5")
    info = launcher_info()
    assert info["local_rank"] == 1 and info["rank"] == 5 and info["source"] == "LOCAL_RANK"
    ids = [{"uuid": "a", "device_type": "discrete_gpu"}, {"uuid": "b", "device_type": "discrete_gpu"}]
    assert launcher_device(ids) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a")  # the GPU the launcher bound wins
    assert launcher_device(ids) == 0
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("LOCAL_RANK", "2")
    with pytest.raises(ValueError, match="LOCAL_RANK=2: this host has 2 Vulkan GPUs"):
        launcher_device(ids)
    assert launcher_device([{"uuid": "c", "device_type": "cpu"}]) == 0  # lavapipe: ranks share it
    monkeypatch.setenv("LOCAL_RANK", "x")
    with pytest.raises(ValueError, match="not an integer"):
        launcher_info()
    assert expand_out("r/{host}-{rank}.json", "u", {"rank": 3, "local_rank": 1}).endswith("-3.json")
    with pytest.raises(ValueError, match="placeholder"):
        expand_out("r/{gpu}.json", "u", None)


def test_devices_all_writes_a_fleet(device, tmp_path, capsys):
    out = tmp_path / "fleet.json"
    rc = main(
        [
            "bench",
            "--shapes=16x16x16",
            "--iters=3",
            "--warmup=0",
            "--check-shape=16x16x16",
            "--ref=numpy",
            "--devices=all",
            f"--out={out}",
        ]
    )
    assert rc == 0, capsys.readouterr()
    fleet = json.loads(out.read_text())
    assert fleet["schema"] == "helios-fleet/1" and fleet["devices"][0]["rc"] == 0
    per = json.loads((tmp_path / "fleet-dev0.json").read_text())
    assert per["helios"]["uuid"] == fleet["devices"][0]["uuid"]
    assert out.with_suffix(".md").exists() and fleet["shapes"][0]["shape"] == "16x16x16"


def test_devices_needs_out(device, capsys):
    assert main(["bench", "--shapes=16x16x16", "--devices=all"]) == 2
    assert "--devices needs --out" in capsys.readouterr().err


def test_ranks_as_local_processes_merge_into_one_report(device, tmp_path):
    """Ranks launched as Slurm would (SLURM_LOCALID/SLURM_PROCID: one per GPU, or 3
    sharing a CPU device), each naming its result by host and rank; `helios
    report DIR` merges them."""
    from helios.launcher import identities

    gpus = sum(d["device_type"] != "cpu" for d in identities())
    n = min(gpus, 3) if gpus else 3
    env = {k: v for k, v in os.environ.items() if k not in ("HELIOS_DEVICE", "CUDA_VISIBLE_DEVICES")}
    procs = []
    for rank in range(n):
        e = dict(env, SLURM_LOCALID=str(rank), SLURM_PROCID=str(rank), SLURM_NTASKS=str(n))
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "helios",
                    "bench",
                    "--shapes=16x16x16",
                    "--iters=3",
                    "--warmup=0",
                    "--check-shape=16x16x16",
                    "--ref=numpy",
                    f"--out={tmp_path}/{{host}}-rank{{rank}}.json",
                ],
                env=e,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out[-2000:]
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == n
    uuids = set()
    for f in files:
        res = json.loads(f.read_text())
        assert res["launcher"]["source"] == "SLURM_LOCALID" and res["launcher"]["world_size"] == n
        uuids.add(res["helios"]["uuid"])
        assert f.name.endswith(f"-rank{res['launcher']['rank']}.json")
    r = subprocess.run(
        [sys.executable, "-m", "helios", "report", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert len(uuids) == (n if gpus else 1)  # one GPU per rank, or all sharing the CPU device
    if n > 1:
        assert "fleet" in r.stdout and r.stdout.count("rank") >= n


def test_check_fuzz_on_every_device(device, capsys):
    rc = main(["check", "--fuzz", "3", "--max-dim", "40", "--seed", "4", "--devices=all"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "device 0" in out and device.info["uuid"] in out and "3 passed, 0 failed (fuzz seed 4)" in out


def test_two_runs_of_one_gpu_are_one_gpu(tmp_path):
    """Two bench files of the same GPU (host, UUID) are its runs, not two GPUs: the summary
    lists one GPU (report draws a fleet table only for several) whose rows say which run."""
    from helios.harness.runs.fleet import fleet_from_files

    rng = np.random.default_rng(1)
    paths = []
    for i in range(2):
        res = fake_result({"64x64x64": [list(rng.normal(1.0, 0.002, 10)) for _ in range(2)]})
        res["helios"]["uuid"], res["host"] = "1234abcd-0000", {"hostname": "box"}
        paths.append(tmp_path / f"run{i}.json")
        paths[-1].write_text(json.dumps(res))
    s = fleet_from_files([str(p) for p in paths])
    assert s is not None and s["gpus"] == ["box/1234abcd"]
    assert [g["run"] for g in s["shapes"][0]["gpus"]] == [1, 2]
    assert "box/1234abcd run 2" in fleet_markdown(s)
