"""A bounded, fair queue: one answer runs at a time; waiting clients take turns, and no
client holds more than its share of the places."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict, deque

from ..runtime.clients import party_of


class QueueFull(Exception):
    pass


class FairQueue:
    """Round robin over parties, then over each party's members (engine/runtime/clients.py: a client
    is ``<party>.<member>``), first come first served within one client.

    Turns: after each turn the party that was served goes to the back of the line, and its
    member to the back of the party's. A client with many waiting requests, or many
    ``user`` names, cannot starve another client's single request.

    Places: at most ``limit`` requests wait. When all are taken, a newcomer takes the place
    of the newest waiting request of the party holding the most, if that party holds at
    least two more than the newcomer's; else, within the newcomer's own party, of the member
    holding at least two more than the newcomer. That request gets ``QueueFull`` (the server
    answers 429), as the newcomer does when no one holds more than its share. So one client
    may fill an idle queue, yet every other client still finds a place.
    Every successful ``acquire`` must be followed by exactly one ``release``.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.running = False
        self.waiting = 0
        # party -> member -> its waiting tickets, oldest first; both in turn order
        self._lines: OrderedDict[str | None, OrderedDict[str, deque[asyncio.Future]]] = (
            OrderedDict()
        )
        self._serving: str | None = None  # the client whose request runs now

    async def acquire(self, client: str) -> None:
        """Wait for ``client``'s turn; raise ``QueueFull`` at once if the queue is full and
        no one holds more than its share, or later if a newcomer takes this place."""
        if not (self.running or self.waiting):
            self.running = True
            self._serving = client
            return
        if self.waiting >= self.limit:
            self._make_room(client)
        ticket = asyncio.get_running_loop().create_future()
        party = self._lines.setdefault(party_of(client), OrderedDict())
        party.setdefault(client, deque()).append(ticket)
        self.waiting += 1
        try:
            await ticket
        except asyncio.CancelledError:
            if ticket.done() and not ticket.cancelled() and ticket.exception() is None:
                self.release()  # granted as we were cancelled
            else:
                self._withdraw(client, ticket)
            raise

    def release(self) -> None:
        """End the running turn: hand it to the next client in the rotation, if any."""
        self._next()

    @contextlib.asynccontextmanager
    async def turn(self, client: str):
        await self.acquire(client)
        try:
            yield
        finally:
            self.release()

    def held(self, party: str | None) -> int:
        """How many requests of ``party`` wait."""
        return sum(map(len, self._lines.get(party, {}).values()))

    def _make_room(self, client: str) -> None:
        """Give ``client`` the place of the newest request of one holding more than its
        share (that request gets QueueFull); raise QueueFull if there is none."""
        party = party_of(client)
        biggest = max(self._lines, key=self.held)
        if self.held(biggest) >= self.held(party) + 2:
            members, least = self._lines[biggest], 1
        else:  # within the newcomer's own party
            members = self._lines.get(party, {})
            least = len(members.get(client, ())) + 2
        # the member holding the most; of equals, the last in turn order (the newest)
        member = max(reversed(members), key=lambda name: len(members[name]), default=None)
        if member is None or len(members[member]) < least:
            raise QueueFull
        ticket = members[member][-1]
        self._withdraw(member, ticket)
        ticket.set_exception(QueueFull())

    def _withdraw(self, client: str, ticket: asyncio.Future) -> None:
        members = self._lines.get(party_of(client))
        line = members.get(client) if members is not None else None
        if line is not None and ticket in line:
            line.remove(ticket)
            self.waiting -= 1
            self._drop_if_empty(client)

    def _drop_if_empty(self, client: str) -> None:
        party = party_of(client)
        members = self._lines[party]
        if not members[client]:
            del members[client]
            if not members:
                del self._lines[party]

    def _next(self) -> None:
        """Hand the turn to the next client in the rotation, or mark the queue idle."""
        served = self._serving
        if party_of(served) in self._lines:  # it just had a turn: to the back
            members = self._lines[party_of(served)]
            self._lines.move_to_end(party_of(served))
            if served in members:
                members.move_to_end(served)
        while self._lines:
            members = next(iter(self._lines.values()))
            client, line = next(iter(members.items()))
            ticket = line.popleft()
            self.waiting -= 1
            members.move_to_end(client)
            self._lines.move_to_end(party_of(client))
            self._drop_if_empty(client)
            if not ticket.done():
                ticket.set_result(None)
                self._serving = client
                return
        self.running = False
        self._serving = None
