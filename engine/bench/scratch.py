"""Throw-away drafter memory for measurements: nothing a benchmark learns reaches the user's
data, and nothing there (an earlier run's cross-chat n-grams) reaches a benchmark."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..drafters.stores import DrafterStores
from ..runtime.memory import EngineMemory


class FolderStores(DrafterStores):
    """Drafter stores in the given folder, else in a temporary one removed with them."""

    def __init__(self, folder=None):
        self._temporary = None if folder else tempfile.TemporaryDirectory(prefix="draftless-")
        super().__init__(Path(folder or self._temporary.name))


def scratch_memory() -> EngineMemory:
    """An ``EngineMemory`` whose drafter files live in a temporary folder."""
    return EngineMemory(stores=FolderStores())
