"""The README cannot drift: every ```python block runs as written (in a fresh
interpreter, on this machine's device), and every `helios ...` command line in
its shell blocks parses with today's CLI (its flags and values exist). The
block reader is tools/readme_walk.py, which prints what each block printed."""

from __future__ import annotations

import pytest
from tools import readme_walk as walk

from helios.cli import build_parser

PYTHON = walk.blocks(("python",))
COMMANDS = walk.helios_commands()


def test_the_readme_has_python_blocks_and_commands():
    assert len(PYTHON) >= 3 and len(COMMANDS) >= 5


def test_the_reader_sees_a_planted_block(tmp_path):
    p = tmp_path / "R.md"
    p.write_text("x\n```python\nprint(1)\n```\n  ```sh\n  helios bench --bogus \\\n    --x\n  ```\n")
    assert walk.blocks(("python",), p) == [(2, "print(1)")]  # the fence line
    assert walk.helios_commands(p) == [(5, ["bench", "--bogus", "--x"])]  # the fence line


@pytest.mark.parametrize("line,code", PYTHON, ids=[f"line{n}" for n, _ in PYTHON])
def test_python_block_runs(device, tmp_path, line, code):
    r = walk.run_block(code, cwd=str(tmp_path))
    assert r.returncode == 0, f"README.md line {line}:\n{code}\n---\n{r.stderr[-3000:]}"


@pytest.mark.parametrize("line,argv", COMMANDS, ids=[f"line{n}" for n, _ in COMMANDS])
def test_shell_command_parses(line, argv):
    try:
        build_parser().parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"README.md line {line}: `helios {' '.join(argv)}` does not parse (exit {e.code})")


def test_the_readmes_jq_one_liners_do_what_it_says(device, tmp_path):
    """The seeds' one-liner reads cudaMs (null without CUDA: it stops at the division, as the
    README says); the README's other one-liner works on any reference."""
    import json
    import re
    import shutil
    import subprocess

    from helios.cli import main

    if shutil.which("jq") is None:
        pytest.skip("jq is not installed here")
    text = walk.README.read_text()
    lines = re.findall(r"`(jq -r '[^`]*' FILE\.json)`", text)
    assert len(lines) == 2, lines
    out = tmp_path / "b.json"
    assert main(["bench", "--shapes=16x16x16", "--iters=2", "--warmup=0", "--ref=numpy", f"--out={out}"]) == 0
    doc = json.loads(out.read_text())
    runs = [
        subprocess.run(["sh", "-c", cmd.replace("FILE.json", str(out))], capture_output=True, text=True)
        for cmd in lines
    ]
    seeds, anyref = runs
    assert seeds.returncode != 0 and "null" in seeds.stderr  # cudaMs is null on a NumPy reference
    assert anyref.returncode == 0, anyref.stderr
    row = doc["rows"][0]
    assert anyref.stdout.strip().startswith(
        f"16x16x16,helios_ms={row['heliosMs']},numpy_ms={row['referenceMs']},ratio="
    )
