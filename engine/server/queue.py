"""A bounded, fair queue: one answer runs at a time; waiting clients take turns."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict, deque


class QueueFull(Exception):
    pass


class FairQueue:
    """Round robin over clients, first come first served within one client.

    A client with many waiting requests cannot starve another client's single request:
    after each turn the client that was served goes to the back of the line. At most
    ``limit`` requests wait; one more raises ``QueueFull`` at once (the server answers 429).
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.running = False
        self.waiting = 0
        self._lines: OrderedDict[str, deque[asyncio.Future]] = OrderedDict()
        self._serving: str | None = None  # the client whose request runs now

    async def acquire(self, client: str) -> None:
        """Wait for ``client``'s turn; raise ``QueueFull`` at once if too many wait.
        Every successful ``acquire`` must be followed by exactly one ``release``."""
        if not (self.running or self.waiting):
            self.running = True
            self._serving = client
            return
        if self.waiting >= self.limit:
            raise QueueFull
        ticket = asyncio.get_running_loop().create_future()
        self._lines.setdefault(client, deque()).append(ticket)
        self.waiting += 1
        try:
            await ticket
        except asyncio.CancelledError:
            if ticket.done() and not ticket.cancelled():  # granted as we were cancelled
                self.release()
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

    def _withdraw(self, client: str, ticket: asyncio.Future) -> None:
        line = self._lines.get(client)
        if line is not None and ticket in line:
            line.remove(ticket)
            self.waiting -= 1
            if not line:
                del self._lines[client]

    def _next(self) -> None:
        """Hand the turn to the next client in the rotation, or mark the queue idle."""
        if len(self._lines) > 1 and next(iter(self._lines)) == self._serving:
            self._lines.move_to_end(self._serving)  # it just had a turn
        while self._lines:
            client, line = next(iter(self._lines.items()))
            ticket = line.popleft()
            self.waiting -= 1
            if line:
                self._lines.move_to_end(client)
            else:
                del self._lines[client]
            if not ticket.done():
                ticket.set_result(None)
                self._serving = client
                return
        self.running = False
