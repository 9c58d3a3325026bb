"""The server's event loop: asyncio's selector loop, accepting connections so that a burst
of them cannot hold a whole request back for long.

asyncio accepts up to a backlog of connections each time the listening socket is ready and
starts all of them at once: a task, a transport, ``connection_made`` each, one loop turn per
step, every step for all of them before the next step for any. Under a burst of thousands
(``tests.hostile_load``) a /health probe queued behind them waited a second or more. This
loop accepts every waiting connection at once as asyncio does (a system call each), looks a
turn later at what each has sent, puts those whose whole request is in (a probe, an SDK's
request) first, and starts at most ``STARTS_PER_TURN`` a loop turn, each with its transport
at once (no task), so the turns stay short and a request that has arrived is read and
answered within a few of them. The rest wait accepted, in order, as they waited in the
kernel's queue; at most the listen backlog of them (the open files
``server.open_file_budget`` allows for). What happens once a connection is started
(deadlines, the cap, the reserve) is ``guard.py``'s. TLS connections are accepted as
asyncio accepts them (the server serves none).
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections import deque

from .guard import socket_holds_whole_request

# Connections started per loop turn. Measured with the README's tests.hostile_load command
# (4,100 connections at once), 3 runs each: the slowest /health probe took 0.21-0.22 s at 16
# (p95 57-78 ms), 0.25-0.35 s at 32 (p95 33-62 ms); at 64 and 256 (with asyncio's task a
# connection) 0.32-0.65 s and 0.85-1.23 s; with asyncio's own accept 0.90-1.07 s (p95 7-16 ms:
# the probes stalled behind a burst are fewer, and wait longer).
STARTS_PER_TURN = 16
log = logging.getLogger("engine.server")
# what asyncio's own accept treats as running out of descriptors or memory
OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class Accepted:
    """Connections accepted and not started yet, whole requests first. Each is looked at
    (``sort``) a loop turn after it was accepted, not at once: a client sends its request
    right after connecting, and a probe accepted at once, in the middle of a burst, may not
    have sent it yet."""

    def __init__(self):
        self.arrived: deque = deque()  # (connection, address), not looked at yet
        self.whole: deque = deque()  # their whole request in
        self.rest: deque = deque()

    def __len__(self) -> int:
        return len(self.arrived) + len(self.whole) + len(self.rest)

    def add(self, connection, address) -> None:
        self.arrived.append((connection, address))

    def sort(self) -> None:
        while self.arrived:
            connection, address = self.arrived.popleft()
            queue = self.whole if socket_holds_whole_request(connection) else self.rest
            queue.append((connection, address))

    def take(self):
        return (self.whole or self.rest).popleft()

    def close(self) -> None:
        for queue in (self.arrived, self.whole, self.rest):
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
        if sslcontext is not None:  # a TLS handshake per connection: asyncio's own way
            return super()._accept_connection(
                protocol_factory, sock, sslcontext, server, backlog, *timeouts
            )
        accepted = self._accepted.setdefault(sock, (Accepted(), protocol_factory, server))[0]
        first = not accepted  # else they are being started already
        try:
            while len(accepted) < backlog:
                try:
                    connection, address = sock.accept()
                    connection.setblocking(False)
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    return
                except OSError as error:
                    if error.errno not in OUT_OF_RESOURCES:
                        raise  # the loop logs it and goes on, as asyncio's accept does
                    # asyncio's own way out: stop listening a while, then accept again
                    return super()._accept_connection(
                        protocol_factory, sock, sslcontext, server, backlog, *timeouts
                    )
                accepted.add(connection, address)
        finally:  # those accepted before an error are started too
            if first and accepted:
                self.call_soon(self._start_accepted, sock)

    def _start_accepted(self, sock) -> None:
        """Start up to ``STARTS_PER_TURN`` of ``sock``'s accepted connections, whole requests
        first; the rest next turn (or close them, once their server has stopped serving).
        Each gets its transport here, as asyncio's accept gives it one in a task of its own
        a turn later."""
        accepted, protocol_factory, server = self._accepted[sock]
        if server is not None and not server.is_serving():
            accepted.close()
            return
        accepted.sort()
        for _ in range(min(STARTS_PER_TURN, len(accepted))):
            connection, address = accepted.take()
            try:
                protocol = protocol_factory()
                self._make_socket_transport(
                    connection, protocol, extra={"peername": address}, server=server
                )
            except Exception as error:  # noqa: BLE001 - as asyncio's accept: dropped, logged
                connection.close()
                log.warning("A connection could not be started: %s", error)
        if accepted:
            self.call_soon(self._start_accepted, sock)
