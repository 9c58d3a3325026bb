"""Files read from disk are untrusted input: a bad one is kept aside, never overwritten.

``move_aside(path)`` renames ``x.json`` to ``x.json.corrupt-<date>-<time>`` beside it (as the
app does with a damaged chat database) and returns the new path; it raises OSError when
the folder does not allow it, and the caller must then leave the file alone.
"""

from __future__ import annotations

import time
from pathlib import Path


def move_aside(path) -> Path:
    path = Path(path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    path.rename(target)
    return target
