"""Files read from disk are untrusted input; files written are written whole or not at all.

- ``read_regular_file(path, max_bytes)`` reads a file only if it is a regular file (never a
  FIFO, a device or a directory, which could block or flood the reader) of at most
  ``max_bytes``; anything else raises OSError or ValueError with a reason a person can read.
- ``read_json(path, max_bytes)``: such a file's JSON value; text that is not UTF-8 JSON, or
  nests too deeply for the parser (RecursionError), is a ValueError like the rest.
- ``parse_json(text)``: the same rule for JSON already in hand (a database column).
- ``move_aside(path)`` renames ``x.json`` to ``x.json.corrupt-<date>-<time>`` beside it (the
  app's chat database and settings use the same names) and returns the new path; it raises
  OSError when the folder does not allow it, and the caller must then leave the file alone.
- ``set_aside(path, what, problem, then)``: a cache file that cannot be used is moved aside
  (or left in place when the folder does not allow it) and named once in a warning that
  says what was wrong and what happens instead.
- ``write_atomic(path, data)`` writes a temporary file beside ``path``, flushes it to disk
  (fsync), renames it into place and flushes the folder, so neither a crash nor a power cut
  leaves half a file.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from pathlib import Path

from .errors import warn


def aside_path(path, label: str = "corrupt") -> Path:
    """A free name beside ``path``: ``<name>.<label>-<date>-<time>`` (``-2``… if taken)."""
    path = Path(path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.{label}-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{label}-{stamp}-{n}")
    return target


def move_aside(path, label: str = "corrupt") -> Path:
    target = aside_path(path, label)
    Path(path).rename(target)
    return target


def set_aside(path, what: str, problem, then: str) -> None:
    """Warn (once) that the ``what`` ``path`` is ignored because of ``problem``, say where
    it was kept, and what happens ``then`` ("it will be computed again")."""
    try:
        kept = f"kept as {move_aside(path).name}"
    except OSError as move_error:
        kept = f"left in place ({move_error})"
    warn(f"Ignoring the {what} {path} ({problem}); it was {kept} and {then}.")


def read_regular_file(path, max_bytes: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``max_bytes``."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer before it can be refused
    handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(handle, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("it is not a regular file")
        if info.st_size > max_bytes:
            raise ValueError(f"it is larger than {max_bytes:,} bytes")
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"it is larger than {max_bytes:,} bytes")
    return data


def read_json(path, max_bytes: int):
    """The JSON value in the regular file ``path`` of at most ``max_bytes``; OSError when it
    cannot be read (missing: FileNotFoundError), ValueError when it is not such a file or
    its text is not JSON (a damaged file, to be set aside)."""
    return parse_json(read_regular_file(path, max_bytes))


def parse_json(text: bytes | str):
    """``json.loads(text)`` with every way the text can be wrong as a ValueError."""
    try:
        return json.loads(text)
    except RecursionError:  # [[[[…: deeper than the parser goes
        raise ValueError("it is nested too deeply to be JSON that Draftless wrote") from None
    # json.JSONDecodeError and UnicodeDecodeError are ValueErrors


def write_atomic(path, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` durably (see the module docstring); raises OSError."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX; Windows cannot open a folder)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)
