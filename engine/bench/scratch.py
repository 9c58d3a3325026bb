"""Throw-away folders for measurements: nothing a benchmark learns reaches the user's data.

- ``FolderStores``: drafter stores kept in one folder (each store by its file name), handed to a session through an explicit ``EngineMemory``.
- ``private_data_dir``: for the length of a ``with``, the engine's data folder is a fresh
  temporary one (the engine finds files a drafter only reads, such as the static n-gram
  table, through it), removed afterwards, and the earlier setting is restored.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from ..drafters.stores import DrafterStores


class FolderStores(DrafterStores):
    """Without a folder: a temporary one of its own, removed when the stores are."""

    def __init__(self, folder=None):
        super().__init__()
        self._temporary = (
            None if folder else tempfile.TemporaryDirectory(prefix="draftless-memory-")
        )
        self.folder = Path(folder or self._temporary.name)

    def get(self, path, create):
        return super().get(self.folder / Path(path).name, create)


@contextmanager
def private_data_dir(prefix: str = "draftless-bench-data-"):
    before = os.environ.get("DRAFTLESS_DATA_DIR")
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        os.environ["DRAFTLESS_DATA_DIR"] = folder
        try:
            yield Path(folder)
        finally:
            if before is None:
                os.environ.pop("DRAFTLESS_DATA_DIR", None)
            else:
                os.environ["DRAFTLESS_DATA_DIR"] = before
