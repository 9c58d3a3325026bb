"""The chats the engine keeps between turns: their KV caches and drafter state.

Kept by (client, chat id), both opaque here (the server decides what a chat id looks like
and whose it is), so one client never names another's chat. When more are kept than the
limit, the least recently used chat of the client who keeps the most is forgotten, parties
before their members (``clients.py``): one client opening chat after chat, under as many
``user`` names as it likes, evicts its own, not another's.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .clients import fair_victim

if TYPE_CHECKING:
    from .session import ChatSession

# chats kept at once: each holds a KV cache of up to the model's context, so this bounds the
# memory, and it is more than the few chats a person or a server's clients switch between
MAX_KEPT_CHATS = 8


class SessionCache:
    def __init__(self, limit: int = MAX_KEPT_CHATS):
        self.limit = limit
        self._sessions: OrderedDict[tuple[str | None, str], ChatSession] = OrderedDict()

    def session(
        self, client: str | None, chat_id: str | None, new: Callable[[], ChatSession]
    ) -> ChatSession:
        """The kept session of ``client``'s chat ``chat_id`` (``new()`` the first time), now
        the most recently used; with no chat id, ``new()``, not kept."""
        if chat_id is None:
            return new()
        key = (client, chat_id)
        session = self._sessions.pop(key, None) or new()
        self._sessions[key] = session
        while len(self._sessions) > self.limit:
            self._evict_one()
        return session

    def kept(self, client: str | None, chat_id: str) -> ChatSession | None:
        """The kept session of that chat, if any (it does not count as a use)."""
        return self._sessions.get((client, chat_id))

    def forget(self, client: str | None, chat_id: str | None) -> None:
        self._sessions.pop((client, chat_id), None)

    def clear(self) -> None:
        self._sessions.clear()

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[ChatSession]:
        return iter(list(self._sessions.values()))

    def _evict_one(self) -> None:
        del self._sessions[fair_victim(self._sessions, lambda key: key[0])]
