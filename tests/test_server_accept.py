"""The server's accepting loop (``engine.server.accept``): in a burst, a connection whose whole
request is in starts first, and no loop turn starts more than ``STARTS_PER_TURN``."""

import asyncio
import errno
import socket

import pytest

from engine.server import accept
from engine.server.accept import AcceptingLoop
from engine.server.guard import holds_whole_request

BURST = 300
PROBE = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


class Turns:
    """Counts the loop's turns: a callback that schedules itself again each turn."""

    def __init__(self, loop):
        self.loop, self.count = loop, 0
        loop.call_soon(self.tick)

    def tick(self):
        self.count += 1
        self.loop.call_soon(self.tick)


def burst(port: int) -> tuple[list[socket.socket], socket.socket]:
    """``BURST`` connections, each with a request head not yet whole, then a probe."""
    clients = []
    for _ in range(BURST):
        client = socket.create_connection(("127.0.0.1", port))
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        clients.append(client)
    probe = socket.create_connection(("127.0.0.1", port))
    probe.sendall(PROBE)
    return clients, probe


@pytest.fixture
def loop():
    loop = AcceptingLoop()
    yield loop
    loop.close()


def test_a_whole_request_starts_first_and_each_turn_starts_a_bounded_number(loop):
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    port = listener.getsockname()[1]
    turns = Turns(loop)
    started: list[tuple[int, bool]] = []  # (turn, whole request in) in the order made

    class Recorder(asyncio.Protocol):
        def connection_made(self, transport):
            started.append((turns.count, holds_whole_request(transport)))

    server = loop.run_until_complete(loop.create_server(Recorder, sock=listener, backlog=1024))
    clients, probe = burst(port)  # all queued in the kernel before the loop accepts any
    try:

        async def until_all_started():
            while len(started) < BURST + 1:
                await asyncio.sleep(0)

        loop.run_until_complete(asyncio.wait_for(until_all_started(), 10))
        first_turn = started[0][0]
        assert [turn for turn, _ in started[: accept.STARTS_PER_TURN]] == [first_turn] * (
            accept.STARTS_PER_TURN
        )
        assert started[accept.STARTS_PER_TURN][0] > first_turn  # the rest in later turns
        per_turn: dict[int, int] = {}
        for turn, _ in started:
            per_turn[turn] = per_turn.get(turn, 0) + 1
        assert max(per_turn.values()) <= accept.STARTS_PER_TURN
        assert len(per_turn) >= BURST // accept.STARTS_PER_TURN
        # the probe, accepted last, started first
        assert [whole for _, whole in started] == [True] + [False] * BURST
    finally:
        for client in [*clients, probe]:
            client.close()
        server.close()
        loop.run_until_complete(server.wait_closed())


def test_connections_accepted_but_not_started_are_closed_when_the_server_stops(loop):
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    port = listener.getsockname()[1]
    made = []

    class Recorder(asyncio.Protocol):
        def connection_made(self, transport):
            made.append(transport)

    server = loop.run_until_complete(loop.create_server(Recorder, sock=listener, backlog=1024))
    clients, probe = burst(port)
    try:

        async def accept_then_stop():
            while not made:
                await asyncio.sleep(0)
            server.close()
            for _ in range(10):
                await asyncio.sleep(0)

        loop.run_until_complete(accept_then_stop())
        assert len(made) < BURST  # some were waiting, accepted, when the server stopped
        # the probe started first, the rest in order; the turn that closed the server may have
        # started one more batch (asyncio drops those as it drops its own starts in flight)
        unstarted = clients[len(made) - 1 + accept.STARTS_PER_TURN :]
        assert len(unstarted) > BURST // 2
        for client in unstarted:
            client.settimeout(5)
            try:
                assert client.recv(1) == b""  # closed by the server, not left open
            except ConnectionResetError:  # closed with the request head unread
                pass
    finally:
        for client in [*clients, probe]:
            client.close()
        for transport in made:
            transport.close()
        loop.run_until_complete(server.wait_closed())


def test_a_connection_is_looked_at_when_sorted_so_a_request_sent_after_accepting_counts():
    accepted = accept.Accepted()
    pairs = [socket.socketpair() for _ in range(3)]
    try:
        for server_side, _ in pairs:
            accepted.add(server_side, None)  # nothing sent yet by any
        pairs[0][1].sendall(b"POST / HTTP/1.1\r\nHost: x\r\n")  # a head not yet whole
        pairs[2][1].sendall(PROBE)  # the last accepted, its whole request in since
        accepted.sort()
        order = [accepted.take()[0] for _ in range(len(accepted))]
        assert order == [pairs[2][0], pairs[0][0], pairs[1][0]]
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_connections_accepted_before_the_process_runs_out_of_files_are_started(loop):
    """An accept that fails for want of descriptors (EMFILE) is left to asyncio, which stops
    listening a while; the connections accepted before it are started all the same."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    port = listener.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]

    class RunsOut:  # the listening socket, out of descriptors after two connections
        def __init__(self):
            self.left = 2

        def accept(self):
            if not self.left:
                raise OSError(errno.EMFILE, "Too many open files")
            self.left -= 1
            return listener.accept()

        def fileno(self):
            return listener.fileno()

    made = []

    class Recorder(asyncio.Protocol):
        def connection_made(self, transport):
            made.append(transport)

    loop.set_exception_handler(lambda loop, context: None)  # asyncio reports the EMFILE
    loop._accept_connection(Recorder, RunsOut(), backlog=16)

    async def turns():
        for _ in range(5):
            await asyncio.sleep(0)

    try:
        loop.run_until_complete(turns())
        assert len(made) == 2
    finally:
        for transport in made:
            transport.close()
        for client in clients:
            client.close()
        listener.close()
