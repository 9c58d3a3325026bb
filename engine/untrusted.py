"""Files read from disk are untrusted input: a bad one is kept aside, never overwritten.

``move_aside(path)`` renames ``x.json`` to ``x.json.corrupt-<date>-<time>`` beside it (the
app's chat database and settings use the same names) and returns the new path; it raises OSError when
the folder does not allow it, and the caller must then leave the file alone.
"""

from __future__ import annotations

import time
from pathlib import Path


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
