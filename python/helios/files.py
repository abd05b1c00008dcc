"""Every file Helios reads or writes passes through here.

Reading: a file Helios reads (a result named on a command line, a history store,
a cache of any kind, an adapter's output) is untrusted. Every read is bounded in
bytes before it is parsed and in nesting after, decoded as UTF-8, checked
against a declared set of typed fields, and every failure is one FileError
("PATH[:LINE]: why") naming the file. Append-only stores are read line by line:
a bad line is skipped with one warning naming it, never the whole store.

Writing: a Target is probed when a command starts (before any work) and
remembers what was at its path then. Writing goes to a temporary file in the
same directory and is renamed into place, so a failed write (a full disk, a
signal) leaves the old file whole; a file that appeared at the path during the
run (another rank, another run with the same --out) is never replaced: the
write is diverted to a free name beside it, which the caller reports.
Append-only stores take a lock and always start on a fresh line.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]

# Result files hold raw samples (a few MB for a large bench); anything far
# larger is not a Helios file, and reading it whole could exhaust memory.
MAX_JSON_BYTES = 64 << 20
# Helios's own documents nest 5 levels; 64 leaves room for anything a tool adds
# while keeping every later walk (reports, dumps) far from Python's recursion limit.
MAX_DEPTH = 64
# Integers a count or byte size can hold (what C and NumPy can represent).
MAX_INT = 2**63 - 1


class FileError(ValueError):
    """A file that cannot serve: its message starts with the file (and line)."""


# ---- reading ------------------------------------------------------------------------------------


def _depth_ok(doc: Any, max_depth: int) -> bool:
    stack = [(doc, 1)]
    while stack:
        x, d = stack.pop()
        if d > max_depth:
            return False
        items = x.values() if isinstance(x, dict) else x
        stack.extend((v, d + 1) for v in items if isinstance(v, (dict, list)))
    return True


def parse_json(data: Union[bytes, str], where: str, max_depth: int = MAX_DEPTH) -> Any:
    """The parsed document, or FileError("WHERE: why") for bytes that are not
    UTF-8, not JSON, or nested deeper than max_depth. NaN and infinities are
    refused (no Helios file holds them; json would read them as floats)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FileError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        doc = json.loads(data, parse_constant=no_constants)
    except RecursionError:
        raise FileError(f"{where}: JSON nested too deeply to read") from None
    except ValueError as e:
        raise FileError(f"{where}: not valid JSON ({e})") from None
    if isinstance(doc, (dict, list)) and not _depth_ok(doc, max_depth):
        raise FileError(f"{where}: JSON nested deeper than {max_depth} levels")
    return doc


def _open_regular(path: PathLike, what: str) -> Any:
    """The file opened for reading, or FileError for anything but a regular file (a
    FIFO, a device, a socket, a directory): opened without blocking and checked
    before any read, so a FIFO with no writer or /dev/zero never hangs a reader."""
    where = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise FileError(f"{where}: cannot read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(st.st_mode)
                else "a directory"
                if stat.S_ISDIR(st.st_mode)
                else "a device"
                if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket"
                if stat.S_ISSOCK(st.st_mode)
                else "not a regular file"
            )
            raise FileError(f"{where}: {kind}, not a regular file; not {what}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: PathLike, max_bytes: int, what: str = "a Helios file") -> bytes:
    """The file's bytes, or FileError for one that cannot be opened, is not a regular
    file or is larger than max_bytes. Reads at most max_bytes + 1 bytes, and asks for no
    more than the file holds (a read's buffer is allocated at the size asked for)."""
    with _open_regular(path, what) as f:
        try:
            raw = f.read(min(max_bytes, os.fstat(f.fileno()).st_size) + 1)
        except OSError as e:
            raise FileError(f"{os.fspath(path)}: cannot read ({e.strerror or e})") from None
    if len(raw) > max_bytes:
        raise FileError(f"{os.fspath(path)}: larger than {size_text(max_bytes)}; not {what}")
    return raw


def read_text(path: PathLike, max_bytes: int, what: str) -> str:
    """The file as UTF-8 text (bounded as read_bytes), or FileError."""
    try:
        return read_bytes(path, max_bytes, what).decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileError(f"{os.fspath(path)}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_json(path: PathLike, max_bytes: int = MAX_JSON_BYTES, what: str = "a Helios JSON file") -> Any:
    """The parsed document (bounded bytes, UTF-8, bounded depth), or FileError."""
    return parse_json(read_bytes(path, max_bytes, what), os.fspath(path))


def read_object(path: PathLike, what: str = "a helios result", max_bytes: int = MAX_JSON_BYTES) -> dict:
    """read_json for a file that must hold one JSON object."""
    data = read_json(path, max_bytes, what)
    if not isinstance(data, dict):
        raise FileError(f"{os.fspath(path)}: expected a JSON object ({what}), got {type(data).__name__}")
    return data


def read_lines(
    path: PathLike, fields: Mapping[str, str], max_bytes: int = MAX_JSON_BYTES, what: str = "a JSON-lines store"
) -> list[dict]:
    """The lines of an append-only JSON-lines store that are objects with the
    declared fields (see check). A line that is torn, not UTF-8, not JSON, too
    deep or of the wrong types is skipped; one warning names the file, how many
    lines were skipped and the first few with their reasons."""
    raw = read_bytes(path, max_bytes, what)
    good, bad = [], []
    for i, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        where = f"{os.fspath(path)}:{i}"
        try:
            item = parse_json(line, where)
            if not isinstance(item, dict):
                raise FileError(f"{where}: expected a JSON object, got {type(item).__name__}")
            check(item, fields, where)
        except FileError as e:
            bad.append(str(e))
            continue
        good.append(item)
    if bad and not good:
        raise FileError(f"{os.fspath(path)}: not {what}: no line could be read ({bad[0]})")
    if bad:
        shown = "; ".join(bad[:3]) + (f"; and {len(bad) - 3} more" if len(bad) > 3 else "")
        warnings.warn(f"helios: {os.fspath(path)}: skipped {len(bad)} unreadable line(s): {shown}", stacklevel=2)
    return good


def read_npy(path: PathLike, max_bytes: int) -> Any:
    """A .npy array, its header checked before anything is allocated: FileError for
    a file that is not .npy, holds objects, or claims more than max_bytes of data."""
    import numpy as np

    where = os.fspath(path)
    try:
        with _open_regular(path, "a .npy file") as f:
            version = np.lib.format.read_magic(f)
            header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = header(f)
    except (OSError, ValueError) as e:
        raise FileError(f"{where}: not a readable .npy file ({e})") from None
    if dtype.hasobject:
        raise FileError(f"{where}: holds Python objects; only numeric arrays are read")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > max_bytes:
        raise FileError(
            f"{where}: its header claims {shape} ({size_text(nbytes)}), more than the {size_text(max_bytes)} expected"
        )
    try:
        with _open_regular(path, "a .npy file") as f:
            return np.load(f, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise FileError(f"{where}: not a readable .npy file ({e})") from None


# ---- typed fields -------------------------------------------------------------------------------


def _real(v: Any) -> bool:
    """A finite JSON number (every double; an integer literal past a double's range is not)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return abs(v) <= sys.float_info.max if isinstance(v, int) else math.isfinite(v)


KINDS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) <= MAX_INT,
    "count": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_INT,
    "number": _real,
    "positive": lambda v: _real(v) and v > 0,
    "list": lambda v: isinstance(v, list),
    "numbers": lambda v: isinstance(v, list) and all(_real(x) for x in v),
    "object": lambda v: isinstance(v, dict),
    "scalar": lambda v: isinstance(v, (str, bool)) or _real(v),
}
_KIND_WORDS = {
    "str": "a string",
    "bool": "true or false",
    "int": "an integer",
    "count": "an integer >= 0",
    "number": "a finite number",
    "positive": "a finite number > 0",
    "list": "a list",
    "numbers": "a list of finite numbers",
    "object": "an object",
    "scalar": "a string or a number",
}


def check(doc: Mapping[str, Any], fields: Mapping[str, str], where: str) -> None:
    """FileError("WHERE: field must be ...") unless every declared field has its
    kind (KINDS). A kind ending in '?' may be missing or null."""
    for name, kind in fields.items():
        optional = kind.endswith("?")
        base = kind.rstrip("?")
        v = doc.get(name)
        if v is None and optional:
            continue
        if name not in doc:
            raise FileError(f"{where}: no {name!r}")
        if not KINDS[base](v):
            raise FileError(f"{where}: {name!r} must be {_KIND_WORDS[base]}, got {short(v)}")


def short(v: Any) -> str:
    text = json.dumps(v, default=str) if not isinstance(v, float) else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def size_text(n: int) -> str:
    """A byte count as people read it ('768 MiB', '1.5 GiB')."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} B"


# ---- writing ------------------------------------------------------------------------------------


def dumps(doc: Any, **kw: Any) -> str:
    """JSON text that any JSON reader accepts: a non-finite float (which would be a
    bare NaN or Infinity) is written as null, with one warning naming where."""
    try:
        return json.dumps(doc, allow_nan=False, **kw)
    except ValueError:
        pass
    found: list[str] = []

    def clean(x: Any, at: str) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            found.append(at or "the document")
            return None
        if isinstance(x, dict):
            return {k: clean(v, f"{at}.{k}" if at else str(k)) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v, f"{at}[{i}]") for i, v in enumerate(x)]
        return x

    text = json.dumps(clean(doc, ""), allow_nan=False, **kw)
    warnings.warn(f"helios: non-finite values written as null: {', '.join(found[:5])}", stacklevel=2)
    return text


def _identity(path: Path) -> Optional[tuple[int, int, int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class TargetError(ValueError):
    """A target that cannot be written (probed before any work)."""


class Target:
    """A file a command will write when its work is done, probed now: not a
    directory, a parent that exists or can be made, a file of its name can be
    created beside it, and (unless replace) nothing there yet. Raises TargetError."""

    def __init__(
        self, path: PathLike, flag: str, replace: bool = False, must_be_new: bool = True, keep_existing: bool = False
    ):
        self.path = Path(path)
        self.flag = flag
        self.replace = replace
        parent = self.path.parent if str(self.path.parent) else Path(".")
        try:
            if self.path.is_dir():
                raise TargetError(f"{flag} {str(self.path)!r} is a directory")
            if self.path.exists() and not self.path.is_file():  # a FIFO or a device: never replaced by a file
                raise TargetError(f"{flag} {str(self.path)!r} is not a regular file")
            if must_be_new and not replace and self.path.exists():
                raise TargetError(f"{flag} {str(self.path)!r}: {self.path} exists; pass --force to replace it")
        except OSError as e:  # a name too long
            raise TargetError(f"{flag} {str(self.path)!r}: {e.strerror or e}") from None
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a path through a file, a read-only place
            raise TargetError(f"{flag} {str(self.path)!r}: cannot create {parent} ({e.strerror or e})") from None
        try:
            probe = _tmp_name(self.path)
            probe.open("x", encoding="utf-8").close()
            probe.unlink()
        except OSError as e:  # a /proc path, a name too long, a path through a file, read-only
            raise TargetError(f"{flag} {str(self.path)!r}: cannot write there ({e.strerror or e})") from None
        # keep_existing: a name Helios chose (beside a diverted file): whatever is there stays
        self.before = None if keep_existing else _identity(self.path)

    def write(self, text: str) -> Path:
        """Write text atomically; the path written. That is the target, unless a file
        appeared or changed at it since the probe and replace was not given: then a
        free name beside it (name.1.json, ...), which the caller must report."""
        tmp = _tmp_name(self.path)
        try:
            with open(tmp, "x", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            now = _identity(self.path)
            if now is not None and (self.replace or now == self.before):
                os.replace(tmp, self.path)
                return self.path
            for candidate in self._names():
                try:
                    os.link(tmp, candidate)  # never replaces: fails if the name is taken
                    return candidate
                except FileExistsError:
                    continue
            raise OSError(errno.EEXIST, f"no free name beside {self.path}")
        finally:
            tmp.unlink(missing_ok=True)

    def _names(self) -> Iterable[Path]:
        yield self.path
        for k in range(1, 1000):
            yield self.path.with_name(f"{self.path.stem}.{k}{self.path.suffix}")


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_anywhere(text: str, prefix: str, suffix: str) -> Path:
    """Last resort for measured work whose target failed: a new file in the working
    directory, else the temporary directory (OSError if neither takes it)."""
    for where in (Path.cwd(), Path(tempfile.gettempdir())):
        try:
            fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=where)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            return Path(name)
        except OSError:
            continue
    raise OSError(f"could not save anywhere (tried the working directory and {tempfile.gettempdir()})")


def append_lines(path: PathLike, lines: Iterable[str]) -> None:
    """Append lines (without newlines) to a JSON-lines store under an exclusive
    lock, starting on a fresh line when the last write was torn."""
    import fcntl

    data = "".join(line + "\n" for line in lines).encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock


# ---- reading a command's output -----------------------------------------------------------------


class Captured(NamedTuple):
    """What run_capture saw: the exit status (None when it timed out), the last
    max_bytes of stdout and stderr, and what went wrong around them."""

    returncode: Optional[int]
    stdout: bytes
    stderr: bytes
    truncated: bool  # more output than max_bytes: the head was dropped
    lingering: bool  # it exited, but processes it started kept the pipes open (killed)


def run_capture(argv: list[str], stdin: bytes, timeout_s: float, max_bytes: int) -> Captured:
    """Run argv (no shell) in its own process group with stdin; keep the last
    max_bytes of each output stream (memory stays bounded whatever it prints); on
    timeout, or once it has exited, kill the whole group, so no process it started
    outlives the call. OSError when it cannot start."""
    import signal
    import subprocess
    import threading

    p = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    bufs = [bytearray(), bytearray()]
    cut = [False]

    def drain(stream: Any, buf: bytearray) -> None:
        for chunk in iter(lambda: stream.read1(1 << 16), b""):
            buf += chunk
            if len(buf) > max_bytes:
                del buf[: len(buf) - max_bytes]
                cut[0] = True

    def feed() -> None:
        try:
            p.stdin.write(stdin)  # type: ignore[union-attr]
            p.stdin.close()  # type: ignore[union-attr]
        except OSError:  # it exited without reading its input
            pass

    readers = [threading.Thread(target=drain, args=(s, b), daemon=True) for s, b in zip((p.stdout, p.stderr), bufs)]
    writer = threading.Thread(target=feed, daemon=True)
    for t in (*readers, writer):
        t.start()
    rc: Optional[int] = None
    lingering = False
    try:
        try:
            rc = p.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pass
        if rc is not None:  # exited: its output ends when every process holding the pipes has gone
            for t in readers:
                t.join(timeout=2.0)
            lingering = any(t.is_alive() for t in readers)
    finally:  # also on Ctrl-C or SIGTERM: no process it started outlives Helios's run
        try:
            os.killpg(p.pid, signal.SIGKILL)  # what it left behind (or itself, on timeout)
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()
    for t in (*readers, writer):
        t.join(timeout=5.0)
    for s in (p.stdout, p.stderr):
        s.close()  # type: ignore[union-attr]
    return Captured(rc, bytes(bufs[0]), bytes(bufs[1]), cut[0], lingering)
