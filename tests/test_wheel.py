"""The wheel: built by pip from this tree, it carries the kernels (SPIR-V
compiled in) and needs nothing at load time beyond libc with symbols up to
glibc 2.34 (Ubuntu 22.04 has 2.35): the Vulkan loader is opened at run time."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
# One worker builds the wheel for every test here: pip builds in the tree's
# build/{wheel_tag} (pyproject.toml), and two workers building there at once linked a
# module without its kernel table (undefined symbol: hl_spirv_table).
pytestmark = pytest.mark.xdist_group("wheel")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel pip builds from this tree (once for the module)."""
    d = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", ROOT, "-w", str(d)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if r.returncode != 0 and "No module named pip" in r.stderr:
        pytest.skip("pip is not installed for this Python")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return next(d.glob("helios_vulkan-*.whl"))


@pytest.mark.long_on_cpu  # builds a wheel: make test-full and CI's end-to-end stage run it on a CPU device
def test_the_readmes_install_line_names_what_the_wheel_brings(wheel):
    """The README's wheel line says what installing it brings; the wheel's metadata is what
    pip installs: the two name the same packages (the README once said numpy alone while the
    wheel also required ml_dtypes, and `import helios` failed without it)."""
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    required = {
        re.split(r"[<>=!~ ;\[]", line.split(":", 1)[1].strip())[0].lower().replace("-", "_")
        for line in meta.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    }
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    line = next(x for x in readme.splitlines() if x.startswith("pip install ./helios_vulkan-") and ".whl " in x)
    said = set(re.findall(r"[a-z_]+", line.split("#", 1)[1].replace(" and ", " "))) - {"brings"}
    assert required == said == {"numpy", "ml_dtypes"}, (required, said)


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) is not installed here")
@pytest.mark.long_on_cpu  # builds a wheel: make test-full and CI's end-to-end stage run it on a CPU device
def test_wheel_needs_only_libc(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        so = next(n for n in names if re.match(r"helios/_helios\..*\.so$", n))
        z.extract(so, tmp_path)
    assert not [n for n in names if n.endswith(".spv")], "kernels must be compiled in, not shipped as files"
    dyn = subprocess.run(["objdump", "-p", str(tmp_path / so)], capture_output=True, text=True).stdout
    needed = re.findall(r"NEEDED\s+(\S+)", dyn)
    assert needed == ["libc.so.6"], needed
    syms = subprocess.run(["objdump", "-T", str(tmp_path / so)], capture_output=True, text=True).stdout
    versions = {tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_([0-9.]+)", syms)}
    assert max(versions) <= (2, 34), sorted(versions)


def _pypi_reachable() -> bool:
    import urllib.request

    try:
        return urllib.request.urlopen("https://pypi.org/simple/ml-dtypes/", timeout=5).status == 200
    except OSError:
        return False


@pytest.mark.long_on_cpu  # builds a wheel and installs from PyPI: make test-full and CI's end-to-end stage
def test_the_readmes_install_block_works_in_a_clean_environment(wheel, tmp_path):
    """`pip install ./helios_vulkan-...whl` as the README writes it, into a new virtual
    environment with nothing in it (no numpy, no ml_dtypes): pip brings what the wheel
    needs and `import helios` works, bfloat16 included (issue 50: it once failed with
    ModuleNotFoundError: ml_dtypes)."""
    if not _pypi_reachable():
        pytest.skip("PyPI is not reachable from here: pip could not bring numpy and ml_dtypes")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    probe = subprocess.run([py, "-c", "import numpy"], capture_output=True)
    assert probe.returncode != 0, "the new environment must not see the system's numpy"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "--python", py, "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    code = "import helios, ml_dtypes, numpy; print(helios.__version__, helios.bfloat16)"
    r = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0 and "bfloat16" in r.stdout, r.stderr[-2000:]


def test_a_virtual_environment_with_pip_works_in_the_development_box(tmp_path):
    """`python3 -m venv` with its pip, as a user of the box makes one to try the wheel
    (the root ships python3-venv); elsewhere it is the machine's own business."""
    if not os.environ.get("HELIOS_DEV_BUILD"):
        pytest.skip("not inside tools/dev's root: the machine's own Python decides whether venv works")
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and "pip" in r.stdout, r.stderr
