"""The server's event loop: asyncio's selector loop, accepting connections so that a burst
of them cannot hold a whole request back for long.

asyncio accepts up to a backlog of connections each time the listening socket is ready and
starts all of them at once: a task, a transport, ``connection_made`` each, one loop turn per
step, every step for all of them before the next step for any. Under a burst of thousands
(``tests.hostile_load``) a /health probe queued behind them waited a second or more. This
loop accepts every waiting connection at once as asyncio does (a system call each), looks
at what each has sent, puts those whose whole request is already in (a probe, an SDK's
request) first, and starts at most ``STARTS_PER_TURN`` a loop turn, so the turns stay short
and a request that has arrived is read and answered within a few of them. The rest wait
accepted, in order, as they waited in the kernel's queue; at most the listen backlog of them
(the open files ``server.open_file_budget`` allows for). What happens once a connection is
started (deadlines, the cap, the reserve) is ``guard.py``'s.
"""

from __future__ import annotations

import asyncio
import errno
from collections import deque

from .guard import socket_holds_whole_request

# Connections started per loop turn. Measured with tests.hostile_load's 4,100 connections at
# once (the README's command, 2 runs each): the slowest /health probe took 0.23-0.27 s at 16,
# 0.32-0.43 s at 64, 0.85-1.23 s at 256 and 0.90-0.95 s with asyncio's own accept.
STARTS_PER_TURN = 16
# what asyncio's own accept treats as running out of descriptors or memory
OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class Accepted:
    """Connections accepted and not started yet, whole requests first."""

    def __init__(self):
        self.whole: deque = deque()  # (connection, address), their whole request in
        self.rest: deque = deque()

    def __len__(self) -> int:
        return len(self.whole) + len(self.rest)

    def add(self, connection, address) -> None:
        queue = self.whole if socket_holds_whole_request(connection) else self.rest
        queue.append((connection, address))

    def take(self):
        return (self.whole or self.rest).popleft()

    def close(self) -> None:
        for queue in (self.whole, self.rest):
            while queue:
                queue.popleft()[0].close()


class AcceptingLoop(asyncio.SelectorEventLoop):
    """asyncio's selector loop, accepting as the module says (uvicorn's ``loop`` setting
    names it: ``engine.server.accept:AcceptingLoop``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._accepted: dict = {}  # listening socket -> (Accepted, how to start its connections)

    def _accept_connection(
        self, protocol_factory, sock, sslcontext=None, server=None, backlog=100, *timeouts
    ):
        accepted, _ = self._accepted.setdefault(
            sock, (Accepted(), (protocol_factory, sslcontext, server, *timeouts))
        )
        first = not accepted
        while len(accepted) < backlog:
            try:
                connection, address = sock.accept()
                connection.setblocking(False)
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                break
            except OSError as error:
                if error.errno not in OUT_OF_RESOURCES:
                    raise  # the loop logs it and goes on, as asyncio's accept does
                # asyncio's own way out: stop listening a while, then accept again
                return super()._accept_connection(
                    protocol_factory, sock, sslcontext, server, backlog, *timeouts
                )
            accepted.add(connection, address)
        if first and accepted:
            self.call_soon(self._start_accepted, sock)

    def _start_accepted(self, sock) -> None:
        """Start up to ``STARTS_PER_TURN`` of ``sock``'s accepted connections; the rest next
        turn (or close them, once their server has stopped serving)."""
        accepted, (protocol_factory, sslcontext, server, *timeouts) = self._accepted[sock]
        if server is not None and not server.is_serving():
            accepted.close()
            return
        for _ in range(min(STARTS_PER_TURN, len(accepted))):
            connection, address = accepted.take()
            start = self._accept_connection2(
                protocol_factory,
                connection,
                {"peername": address},
                sslcontext,
                server,
                *timeouts,
            )
            self.create_task(start)
        if accepted:
            self.call_soon(self._start_accepted, sock)
