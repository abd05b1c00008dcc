#!/usr/bin/env python3
"""llama.cpp as an external adapter of `helios suite decode --model llama`:

    LLAMA_CPP_SOURCE=llama_cpp_python-0.3.36.tar.gz \\
    LLAMA_CPP_BENCH_CMD="python3 tools/adapters/llama_cpp/bench.py" \\
        helios suite decode --model llama --preset llama-3.2-1b

What it does, each step cached under LLAMA_CPP_WORK (default ~/.cache/helios/llama.cpp):
1. builds llama.cpp from LLAMA_CPP_SOURCE (a llama.cpp source folder, or the
   llama-cpp-python sdist from PyPI, which carries one) with LLAMA_CPP_BACKEND (vulkan,
   the default; cuda; cpu): its `llama-bench`, and greedy.c beside this file against
   its libllama;
2. converts the suite's checkpoint folder to a bfloat16 GGUF with llama.cpp's own
   convert_hf_to_gguf.py (a checkpoint without a tokenizer, as the presets are, gets a
   placeholder: byte fallback and filler pieces, the model's vocabulary size; decoding
   by token ids never reads it);
3. runs the suite's protocol through greedy.c (the greedy run, each context, the
   prefill; the tokens come back for the suite to judge) and llama-bench's own
   pp/tg tests (-fa on, every layer on the GPU, -r 5).

The contract (tools/adapters/template_numpy.py for the mlp suite; this one is the
decode workload's): the request on stdin (helios-adapter-request/1, workload
decode-llama: checkpoint, prompt, new, contexts [{context, tokens}], warm, steps,
prefill), one JSON line on stdout: status, latency_ms, throughput_tokens_per_sec,
peak_memory_bytes (null: llama.cpp does not report it), samples_ms, tokens, first_ms,
contexts, prefill, llama_bench, build.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BACKENDS = {"vulkan": ["-DGGML_VULKAN=ON"], "cuda": ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=native"],
            "cpu": []}  # fmt: skip
BENCH_REPEATS = 5


class Refused(Exception):
    """What stops the adapter, as its row's status says it."""


def log(msg: str) -> None:
    print(f"llama_cpp: {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], what: str, **kw: Any) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-15:]
        raise Refused(f"{what} failed (exit {r.returncode}): {' | '.join(tail)[-600:]}")
    return r


def source_tree(source: str, work: Path) -> Path:
    """The llama.cpp source folder: given, or unpacked once from a tarball (the
    llama-cpp-python sdist's vendor/llama.cpp, or a llama.cpp tree)."""
    p = Path(source)
    if p.is_dir():
        return p
    if not p.is_file():
        raise Refused(f"skipped: LLAMA_CPP_SOURCE {source!r} is neither a llama.cpp folder nor an sdist")
    out = work / ("src-" + hashlib.sha256(p.read_bytes()).hexdigest()[:12])
    if not (out / "CMakeLists.txt").exists():
        log(f"unpacking {p.name}")
        tmp = work / "unpack"
        shutil.rmtree(tmp, ignore_errors=True)
        with tarfile.open(p) as tar:  # the sdist's vendor/llama.cpp alone, or a llama.cpp tarball whole
            members = tar.getmembers()
            vendored = [m for m in members if "/vendor/llama.cpp/" in m.name]
            tar.extractall(tmp, members=vendored or members, filter="data")
        found = next((c.parent for c in sorted(tmp.rglob("convert_hf_to_gguf.py"))), None)
        if found is None:
            raise Refused(f"skipped: {p.name} holds no llama.cpp source (convert_hf_to_gguf.py)")
        shutil.rmtree(out, ignore_errors=True)
        found.rename(out)
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def build(src: Path, work: Path, backend: str) -> tuple[Path, Path]:
    """llama-bench and greedy (built once per source and backend; a second process
    waits for the first's build)."""
    import fcntl

    bdir = work / f"build-{src.name}-{backend}"
    bench, greedy = bdir / "bin" / "llama-bench", bdir / "bin" / "helios-greedy"
    with open(work / f"build-{src.name}-{backend}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(src, bdir, backend, bench, greedy)


def _build(src: Path, bdir: Path, backend: str, bench: Path, greedy: Path) -> tuple[Path, Path]:
    if not bench.exists():
        log(f"building llama.cpp ({backend}) in {bdir}")
        run(["cmake", "-S", str(src), "-B", str(bdir), "-G", "Ninja" if shutil.which("ninja") else "Unix Makefiles",
             "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
             "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", *BACKENDS[backend]],
            "cmake configure")  # fmt: skip
        run(["cmake", "--build", str(bdir), "--target", "llama-bench", "-j", str(os.cpu_count() or 2)], "build")
    if not greedy.exists():
        libs = sorted({str(p.parent) for p in bdir.rglob("*.so")})
        run([os.environ.get("CC", "cc"), "-O2", "-std=c11", str(HERE / "greedy.c"), "-I", str(src / "include"),
             "-I", str(src / "ggml" / "include"), "-o", str(greedy), *(f"-L{d}" for d in libs),
             *(f"-Wl,-rpath,{d}" for d in libs), "-lllama", "-lggml", "-lggml-base"], "compiling greedy.c")  # fmt: skip
    return bench, greedy


def placeholder_tokenizer(folder: Path, vocab: int) -> None:
    """A Llama-2-style tokenizer (BPE with byte fallback, no merges) of vocab pieces:
    <unk>, <s>, </s>, the 256 byte pieces, then fillers (cut at vocab). Written only where the
    checkpoint has none; greedy.c feeds token ids, so it is never used to decode."""
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces = (pieces + [f"\u2581f{i}" for i in range(vocab - len(pieces))])[:vocab]
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": p, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, p in enumerate(pieces[:3])],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                           {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "\u2581"}]},
        "pre_tokenizer": None, "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {p: i for i, p in enumerate(pieces)}, "merges": []},
    }  # fmt: skip
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "add_bos_token": False, "add_eos_token": False, "model_max_length": 1 << 20}))  # fmt: skip


def convert(src: Path, work: Path, checkpoint: Path) -> Path:
    """The checkpoint as a bfloat16 GGUF (converted once per checkpoint contents' stamp)."""
    files = sorted(p for p in checkpoint.iterdir() if p.is_file())
    stamp = hashlib.sha256(
        json.dumps([(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files]).encode()
    ).hexdigest()[:16]
    gguf = work / f"model-{stamp}.gguf"
    if gguf.exists():
        return gguf
    stage = work / f"stage-{stamp}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    for p in files:
        (stage / p.name).symlink_to(p.resolve())
    if not (stage / "tokenizer.json").exists() and not (stage / "tokenizer.model").exists():
        placeholder_tokenizer(stage, int(json.loads((checkpoint / "config.json").read_text())["vocab_size"]))
    try:
        import sentencepiece  # noqa: F401  (the converter imports it before it looks for a tokenizer.model)
    except ImportError:
        raise Refused("skipped: llama.cpp's convert_hf_to_gguf.py needs sentencepiece (pip install sentencepiece)")
    log(f"converting {checkpoint} with convert_hf_to_gguf.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src / "gguf-py"), os.environ.get("PYTHONPATH", "")])}
    run([sys.executable, str(src / "convert_hf_to_gguf.py"), str(stage), "--outtype", "bf16", "--outfile",
         str(gguf) + ".part"], "convert_hf_to_gguf.py", env=env)  # fmt: skip
    os.replace(str(gguf) + ".part", gguf)
    shutil.rmtree(stage, ignore_errors=True)
    return gguf


def protocol(greedy: Path, gguf: Path, req: dict) -> dict:
    """The suite's greedy run, contexts and prefill through greedy.c: its answers by op."""
    jobs = [f"G {req['new']} " + " ".join(map(str, req["prompt"]))]
    for c in req.get("contexts", []):
        jobs.append(f"C {req['warm']} {req['steps']} " + " ".join(map(str, c["tokens"])))
    if req.get("prefill"):
        jobs += ["P " + " ".join(map(str, req["prefill"]))] * (2 + req.get("prefill_repeats", 5))
    longest = max(len(j.split()) for j in jobs)
    n_ctx = max([len(req["prompt"]) + req["new"]] + [len(c["tokens"]) + req["warm"] + req["steps"] + 1
                                                     for c in req.get("contexts", [])] + [longest])  # fmt: skip
    r = run([str(greedy), str(gguf), str(n_ctx + 16), str(max(longest, 32))], "greedy.c",
            input="\n".join(jobs) + "\n")  # fmt: skip
    out: dict = {"greedy": None, "context": [], "prefill": []}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            out["greedy"] = d if d["op"] == "greedy" else out["greedy"]
            if d["op"] in ("context", "prefill"):
                out[d["op"]].append(d)
    return out


def llama_bench(bench: Path, gguf: Path, pp: int, tg: int) -> tuple[list, dict]:
    """llama-bench's pp and tg tests (its own conventions): per test avg and stddev of
    tokens/s over BENCH_REPEATS runs, and the build it reports."""
    r = run([str(bench), "-m", str(gguf), "-p", str(pp), "-n", str(tg), "-ngl", "99", "-fa", "1", "-r",
             str(BENCH_REPEATS), "-o", "json"], "llama-bench")  # fmt: skip
    tests = json.loads(r.stdout[r.stdout.index("[") :])
    keep = ("n_prompt", "n_gen", "n_depth", "avg_ts", "stddev_ts", "samples_ts")
    info = {k: tests[0].get(k) for k in ("build_commit", "backends", "gpu_info", "flash_attn", "n_gpu_layers")}
    return [{k: t.get(k) for k in keep} for t in tests], info


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def prepared() -> tuple[Path, Path, Path, Path]:
    """The source, work folder, llama-bench and greedy (built where they are not yet)."""
    source = os.environ.get("LLAMA_CPP_SOURCE", "")
    if not source:
        raise Refused("skipped: LLAMA_CPP_SOURCE is not set (a llama.cpp folder, or the llama-cpp-python sdist)")
    backend = os.environ.get("LLAMA_CPP_BACKEND", "vulkan")
    if backend not in BACKENDS:
        raise Refused(f"skipped: LLAMA_CPP_BACKEND {backend!r}; one of {', '.join(BACKENDS)}")
    work = Path(os.environ.get("LLAMA_CPP_WORK", Path.home() / ".cache" / "helios" / "llama.cpp"))
    work.mkdir(parents=True, exist_ok=True)
    src = source_tree(source, work)
    return (src, work, *build(src, work, backend))


def answer(req: dict) -> dict:
    src, work, bench, greedy = prepared()
    gguf = convert(src, work, Path(req["checkpoint"]))
    got = protocol(greedy, gguf, req)
    if got["greedy"] is None:
        raise Refused("greedy.c gave no greedy run")
    steps = got["greedy"]["step_ms"]
    tests, info = llama_bench(bench, gguf, req.get("bench_pp", 512), req.get("bench_tg", 128))
    return {
        "status": "ok",
        "latency_ms": {"mean": sum(steps) / len(steps), "p50": pct(steps, 50), "p95": pct(steps, 95),
                       "min": min(steps), "max": max(steps)},
        "throughput_tokens_per_sec": len(steps) / (sum(steps) / 1e3), "peak_memory_bytes": None,
        "samples_ms": steps, "tokens": got["greedy"]["tokens"], "first_ms": got["greedy"]["first_ms"],
        "contexts": [{"context": len(c["tokens"]), "step_ms": g["step_ms"]}
                     for c, g in zip(req.get("contexts", []), got["context"])],
        "prefill": {"tokens": len(req["prefill"]), "ms": [p["ms"] for p in got["prefill"][2:]]}
        if req.get("prefill") else None,
        "llama_bench": tests, "build": {**info, "backend": os.environ.get("LLAMA_CPP_BACKEND", "vulkan")},
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", help="decode-llama (the only workload this adapter runs)")
    ap.add_argument("--prepare", action="store_true", help="build llama.cpp and greedy.c now, and exit")
    ap.add_argument("--checkpoint", help="the Hugging Face folder to convert (also in the request)")
    ap.add_argument("--json", action="store_true", help="print the report as one JSON line (always on)")
    args, _ = ap.parse_known_args()
    if args.prepare:
        try:
            print(json.dumps({"status": "ok", "built": [str(p) for p in prepared()[2:]]}))
        except Refused as e:
            print(json.dumps({"status": str(e)}))
        return 0
    if args.workload != "decode-llama":
        print(json.dumps({"status": f"skipped: workload {args.workload}; this adapter runs decode-llama"}))
        return 0
    req = json.load(sys.stdin)
    try:
        out = answer(req)
    except Refused as e:
        out = {"status": str(e)}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
