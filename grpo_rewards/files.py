"""A user's files, read and written without surprises.

* :func:`read_text` / :func:`text_lines`: strict UTF-8; a binary file, a missing file, a folder or a byte
  that is not UTF-8 becomes a :class:`UserError` (of the caller's layer) naming the file and the line.
* :func:`check_output`: before anything is opened for writing, an output must not be an input, a folder,
  or in a folder that is missing or where no file can be made.
* :func:`atomic_write`: an output is written to a temporary file beside it and renamed over the target only
  when complete, so a failure half way leaves the old file as it was (a device such as ``/dev/null`` is
  written directly, never replaced); given an error class, a failed write (a full disk...) is one line.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from grpo_rewards.errors import UserError

BOM = b"\xef\xbb\xbf"


def read_bytes(path: str | Path, error: type[UserError] = UserError, *, key: str = "") -> bytes:
    """The bytes of ``path``; missing, a folder or unreadable -> ``error`` naming the file."""
    path = Path(path)
    try:
        return path.read_bytes()
    except IsADirectoryError:
        raise error("is a folder, not a file", file=str(path), key=key) from None
    except FileNotFoundError:
        raise error("file not found", file=str(path), key=key) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=str(path), key=key) from None


def _undecodable(chunk: bytes, exc: UnicodeDecodeError) -> str:
    return f"not UTF-8 text (byte 0x{chunk[exc.start]:02x} at column {exc.start + 1}); save the file as UTF-8"


def decode(data: bytes, path: str | Path, error: type[UserError] = UserError, *, key: str = "",
           bom_ok: bool = True) -> str:
    """``data`` as text: a NUL byte means a binary file; a bad byte is reported by line and column."""
    if b"\x00" in data[:65536]:
        raise error("a binary file, not text", file=str(path), key=key)
    if data.startswith(BOM):
        if not bom_ok:
            raise error("starts with a UTF-8 byte-order mark (BOM); save the file as UTF-8 without BOM",
                        file=str(path), line=1, key=key)
        data = data[len(BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        start = data.rfind(b"\n", 0, exc.start) + 1
        chunk = data[start:]
        shifted = UnicodeDecodeError(exc.encoding, chunk, exc.start - start, exc.end - start, exc.reason)
        raise error(_undecodable(chunk, shifted), file=str(path), line=line, key=key) from None


def read_text(path: str | Path, error: type[UserError] = UserError, *, key: str = "", bom_ok: bool = True) -> str:
    """The text of ``path`` (see :func:`decode`)."""
    return decode(read_bytes(path, error, key=key), path, error, key=key, bom_ok=bom_ok)


def text_lines(data: bytes) -> Iterator[tuple[int, str | None, str]]:
    """``(line_number, text, "")`` per line, or ``(line_number, None, why)`` for a line that is not UTF-8."""
    if data.startswith(BOM):
        data = data[len(BOM):]
    for number, chunk in enumerate(data.splitlines(), start=1):
        try:
            yield number, chunk.decode("utf-8"), ""
        except UnicodeDecodeError as exc:
            yield number, None, _undecodable(chunk, exc)


def json_value(text: str) -> tuple[Any, str | None]:
    """``(value, None)`` for JSON text, else ``(None, why)``: the one wording of a JSON problem (the decoder's
    message and column; nesting too deep for the parser) for every reader of JSON lines."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} (column {exc.colno})"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _write_problem(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_output(path: str | Path, inputs: Iterable[str | Path], error: type[UserError] = UserError, *,
                 label: str = "--output") -> Path:
    """Refuse an output that is one of ``inputs``, a folder, or in a missing folder or one where no file can
    be made (read-only, a read-only file system, ``/proc``): a file is made and removed there to find out,
    as permissions alone do not say (root passes every permission check). A device or a pipe that exists
    (``/dev/null``) must only be writable. A name the system refuses (too long...) is refused the same way."""
    try:
        return _check_output(Path(path).expanduser(), inputs, error, label)
    except OSError as exc:
        raise error(f"cannot write {path}: {_write_problem(exc)}", file=label) from None


def _check_output(out: Path, inputs: Iterable[str | Path], error: type[UserError], label: str) -> Path:
    for given in inputs:
        src = Path(given).expanduser()
        if _same(out, src) or out.resolve() == src.resolve():
            raise error(f"{out} is also an input ({given}); write to another file", file=label)
    if out.is_dir():
        raise error(f"{out} is a folder; name a file", file=label)
    if out.exists() and not out.is_file():  # a device or a pipe: written directly (see atomic_write)
        if not os.access(out, os.W_OK):
            raise error(f"cannot write {out} (permission denied)", file=label)
        return out
    parent = out.resolve().parent
    if not parent.is_dir():
        raise error(f"folder {parent} does not exist", file=label)
    if out.exists() and not os.access(out, os.W_OK):
        raise error(f"cannot write {out} (permission denied)", file=label)
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=_temp_prefix(out))
    except OSError as exc:
        raise error(f"cannot write {out}: {_write_problem(exc)}", file=label) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return out


def _temp_prefix(path: Path) -> str:
    """A hidden name beside ``path`` for its temporary file: as long a name as the target may be."""
    return f".{path.name[:200]}."


_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", *, encoding: str | None = "utf-8",
                 error: type[UserError] | None = None, label: str = "") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on success it replaces ``path``, on an exception it is removed.
    A symlink is followed (its target is replaced, the link kept); a device or a pipe (``/dev/null``,
    ``/dev/stdout``) is written directly, never replaced.

    With ``error``, a failure to write (the file cannot be made, a full disk or quota, a read-only file
    system, an I/O error) is raised as ``error`` naming ``label`` (``--out: cannot write x.png: No space
    left on device``), the old file left as it was; other exceptions pass through as they are."""
    target = Path(path)
    path = Path(os.path.realpath(path))
    try:
        if path.exists() and not path.is_file():
            with open(path, mode, encoding=None if "b" in mode else encoding) as direct:
                yield direct
            return
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=".tmp")
        try:
            with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, _mode_for(path))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        if error is None or (exc.errno not in _WRITE_ERRNOS and not _ours(exc, path)):
            raise
        raise error(f"cannot write {target}: {_write_problem(exc)}", file=label) from None


def _ours(exc: OSError, path: Path) -> bool:
    """The error came from making, renaming or opening the output itself (its name is in the error)."""
    names = {str(exc.filename or ""), str(getattr(exc, "filename2", "") or "")}
    return any(n and (n == str(path) or Path(n).name.startswith(_temp_prefix(path))) for n in names)
