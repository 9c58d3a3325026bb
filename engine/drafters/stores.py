"""Drafter memory that outlives a chat (the cross-chat n-gram cache), owned by its holder.

The service keeps one ``DrafterStores`` and hands it to every drafter it attaches, so all
chats of one service share one store per file, and two services never share anything.
A drafter given no stores keeps a private one. ``flush()`` saves every store that
changed; the service calls it on shutdown. The files live in the stores' ``folder``: the
user's data folder unless one is given (the benchmarks give a throw-away one). Stores that
are not ``persistent`` (another client's, on a server) start empty and are never written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from ..paths import data_dir


class Store(Protocol):
    def save(self) -> None: ...


S = TypeVar("S", bound=Store)


class DrafterStores:
    def __init__(self, folder: Path | None = None, persistent: bool = True):
        self._stores: dict[Path, Store] = {}
        self._folder = Path(folder) if folder else None
        self.persistent = persistent

    @property
    def folder(self) -> Path:
        return self._folder or data_dir()

    def get(self, path: Path, create: Callable[[Path], S]) -> S:
        """The store kept for ``path``, made by ``create(path)`` the first time."""
        path = Path(path).resolve()
        store = self._stores.get(path)
        if store is None:
            store = self._stores[path] = create(path)
        return store

    def __len__(self) -> int:
        return len(self._stores)

    def flush(self) -> None:
        for store in list(self._stores.values()):
            store.save()
