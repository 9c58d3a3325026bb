"""Clients as the engine and the server share among them: each is named ``<party>.<member>``.

The server names a client by what it can tell apart (``server/chats.py``): its **party** is
what a client cannot change at will, the API key it presents and its network address; its
**member** adds what it can, OpenAI's ``user`` field. What is kept or held per client (kept
chats, n-gram memory, places in the queue) is shared first between parties, then between
one party's members, so one address sending nine ``user`` names counts as one party, and
its ninth chat evicts one of its own, never another party's. A name without a dot (the
app's None, a test's "a") is a party of one member.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

Key = TypeVar("Key")


def party_of(client: str | None) -> str | None:
    return client.partition(".")[0] if client else client


def fair_victim(keys: Iterable[Key], client_of: Callable[[Key], str | None]) -> Key:
    """The key to forget when too many are kept (``keys``: least recently used first): the
    least recently used of the member keeping the most, within the party keeping the most
    (a tie goes to the one whose least recently used key is oldest)."""
    parties: dict[str | None, dict[str | None, list[Key]]] = {}
    for key in keys:
        client = client_of(key)
        parties.setdefault(party_of(client), {}).setdefault(client, []).append(key)
    members = max(parties.values(), key=lambda party: sum(map(len, party.values())))
    return max(members.values(), key=len)[0]
