"""tools/kernel/sass_from_cache.py: the NVIDIA shader container's code section and the
instruction-mix summary, on synthetic bytes (no GPU, no zstandard needed)."""

from __future__ import annotations

import struct

from tools.kernel import sass_from_cache as sass


def _container(code: bytes, offset: int = 0x1B0, size: int | None = None) -> bytes:
    head = bytearray(b"NVDA" + bytes(offset + 8 - 4))
    struct.pack_into("<2I", head, 76, len(code) if size is None else size, offset)
    return bytes(head) + code + b"\xee" * 32


def test_the_code_section_is_cut_where_the_header_says():
    code = bytes(range(256)) * 2  # 512 bytes: 32 instructions of 16
    assert sass.nvda_code(_container(code)) == code
    assert sass.nvda_code(_container(code, offset=0x160)) == code


def test_a_container_that_does_not_fit_gives_none():
    code = bytes(64)
    assert sass.nvda_code(b"NVDX" + _container(code)[4:]) is None  # not the magic
    assert sass.nvda_code(_container(code, size=60)) is None  # not whole instructions
    assert sass.nvda_code(_container(code, size=4096)) is None  # past the end
    assert sass.nvda_code(_container(code, size=0)) is None
    assert sass.nvda_code(b"NVDA") is None


def test_the_summary_counts_instruction_classes_predicated_or_not():
    text = "\n".join(
        [
            "        /*0000*/                   S2R R2, SR_TID.X ;",
            "        /*0010*/                   HMMA.16816.F32 R4, R156, R140.reuse, R4 ;",
            "        /*0020*/              @!P4 LDG.E.128.CONSTANT R240, [R4] ;",
            "        /*0030*/               @P1 STL [0x4], R6 ;",
            "        /*0040*/                   LDSM.16.MT88.4 R140, [R0+0x1000] ;",
            "        /*0050*/                   HMMA.16816.F32 R8, R148, R140, R8 ;",
            "        /*0060*/              @!UPT UIADD3 URZ, URZ, URZ, URZ ;",
        ]
    )
    assert sass.sass_summary(text) == "HMMA:2 LDSM:1 LDG:1 STL:1"


def test_every_frame_of_a_cache_file_keeps_its_own_files(tmp_path, monkeypatch):
    """A cache file's frames are named <file>-<offset>; each must keep its own .code (the
    suffix is added, not swapped for the name's last dotted part, which mapped every frame
    of a file to one .code/.sass and kept only the last), and the printed line names the
    code by a hash so two caches' kernels can be matched."""
    monkeypatch.setattr(sass.shutil, "which", lambda name: None)  # no nvdisasm here
    codes = [bytes([i]) * 64 for i in range(3)]
    lines = [sass.write_code(c, tmp_path / f"10de-cache.bin-{at}", "SM90") for at, c in zip((100, 5000, 9000), codes)]
    for at, c in zip((100, 5000, 9000), codes):
        assert (tmp_path / f"10de-cache.bin-{at}.code").read_bytes() == c
    hashes = [line.split("sha256 ")[1].split()[0] for line in lines]
    assert len(set(hashes)) == 3
    assert sass.write_code(codes[0], tmp_path / "again", "SM90").split("sha256 ")[1].split()[0] == hashes[0]
