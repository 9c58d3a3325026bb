"""What keeps hostile clients out and bounded: Host, Origin and content-type checks, a time
cap per request, deadlines for request headers and bodies, a fair cap on open connections
with a reserve for /health and key holders, and a log that says the same thing at most a
few times a minute.

A web page in a browser can send requests to 127.0.0.1, and a DNS-rebinding page can do so
under its own name. ``Guard`` refuses both: a ``Host`` that is not the name the server is
bound to (403), an ``Origin`` not named with ``--cors-origin`` (403), and a POST whose body
is not ``application/json`` (415; browsers send such a body only after a CORS preflight).
Ollama's routes also read bodies sent as forms or with no type, as its own curl examples
send them (a page's form post carries its Origin, refused as above).
"""

from __future__ import annotations

import asyncio
import fcntl
import heapq
import hmac
import itertools
import json
import logging
import socket
import struct
import termios
import time
from collections import OrderedDict

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .requests import ApiError

LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_HOSTS = {"0.0.0.0", "::", ""}

log = logging.getLogger("engine.server")


# Ollama's own examples post JSON with curl -d, which labels it as a form, or with no type;
# a web page that sends such a body carries an Origin header, refused above unless listed
OLLAMA_BODY_TYPES = ("application/json", "application/x-www-form-urlencoded", "")


def json_media(path: str) -> tuple[str, ...]:
    """The content types whose body is read as JSON on ``path``."""
    return OLLAMA_BODY_TYPES if path.startswith("/api/") else ("application/json",)


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """The ``Host`` header values this server answers; None (any) when it listens on every
    address, where the API key it then requires keeps others out."""
    if host in WILDCARD_HOSTS:
        return None
    names = {*LOCAL_NAMES, (f"[{host}]" if ":" in host else host).lower()}
    return {f"{name}:{port}" for name in names} | (names if port == 80 else set())


def _error_response(error: ApiError, path: str = "") -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers and body of ``error`` as a JSON response: OpenAI's shape, or Ollama's
    ``{"error": …}`` on its ``/api/`` routes."""
    shaped = {"error": error.message} if path.startswith("/api/") else error.body()
    body = json.dumps(shaped).encode()
    return [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ], body


async def _send_error(send, error: ApiError, path: str = "") -> None:
    headers, body = _error_response(error, path)
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware, outermost: the Host, Origin and content-type checks, then the app
    under a time cap (a request still running after ``max_seconds`` is cancelled: its
    answer stops at the engine's next pass and its connection is closed)."""

    def __init__(self, app, hosts: set[str] | None, origins: set[str], max_seconds: float):
        self.app, self.hosts, self.origins, self.max_seconds = app, hosts, origins, max_seconds

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        error = self.check(scope)
        if error is not None:
            return await _send_error(send, error, scope["path"])
        started = False

        async def tracked(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            async with asyncio.timeout(self.max_seconds):
                await self.app(scope, receive, tracked)
        except TimeoutError:
            log.warning("A request ran past %s s and was stopped.", self.max_seconds)
            if not started:
                await _send_error(
                    send,
                    ApiError(
                        503,
                        f"The request took longer than {self.max_seconds:g} s and was stopped.",
                        "server_error",
                        "timeout",
                    ),
                    scope["path"],
                )

    def check(self, scope) -> ApiError | None:
        headers = {}
        for name, value in scope["headers"]:
            headers.setdefault(name, value.decode("latin-1"))
        host = headers.get(b"host")
        if self.hosts is not None and host is not None and host.lower() not in self.hosts:
            return ApiError(
                403,
                f"This server does not answer for the host {host!r} (misdirected request).",
                "permission_error",
                "bad_host",
            )
        origin = headers.get(b"origin")
        if origin is not None and origin not in self.origins:
            return ApiError(
                403,
                f"Requests from the web origin {origin!r} are not allowed "
                "(start the server with --cors-origin to allow one).",
                "permission_error",
                "bad_origin",
            )
        media = headers.get(b"content-type", "").partition(";")[0].strip().lower()
        if scope["method"] == "POST" and media not in json_media(scope["path"]):
            return ApiError(
                415,
                "Send the request body as JSON with 'Content-Type: application/json'.",
                code="unsupported_media_type",
            )
        return None


# Slots that strangers' requests never fill: /health probes and key holders' requests get
# them even when strangers hold every other slot. 16 holds a full default queue (--max-queue)
# of key holders' answers; at most a quarter of --max-connections, so a small cap still
# serves strangers.
RESERVED_SLOTS = 16
# A connection this young may have sent its headers already, unread yet (a client sends them
# as soon as it connects: on loopback they are read within milliseconds, over a network
# within a round trip), so a slow body is closed before it.
HEADER_GRACE_SECONDS = 1.0
# A burst's connections are accepted a backlog at a time before the loop reads any, so one
# whose headers came with it looks as silent as the rest until then; the kernel's count of its
# unread bytes tells them apart (without it, 1 /health probe in about 250 was closed under
# tests.hostile_load's burst). Those waiting longest are searched this far for a silent one:
# each look is a system call, and every connection past the cap makes the walk (searching 64,
# the looks took 60 of the 164 samples py-spy took of the loop's accepting in that burst).
SILENT_SEARCH = 8
# How much of a connection's unread bytes is looked at for the end of its request head: a
# probe's or an SDK's head is a few hundred bytes, well within it.
HEAD_PEEK_BYTES = 4096


def unread_bytes(transport) -> int:
    """Bytes the kernel holds for this connection that the loop has not read yet."""
    sock = transport.get_extra_info("socket")
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, bytes(4)))[0]
    except (AttributeError, OSError):  # no socket, or closed
        return 0


def holds_whole_request(transport) -> bool:
    """Whether the bytes the kernel holds unread for this connection are a whole request
    (``socket_holds_whole_request``)."""
    sock = transport.get_extra_info("socket")
    try:
        view = socket.socket(sock.family, sock.type, sock.proto, sock.fileno())
    except (AttributeError, OSError):  # no socket, or closed
        return False
    try:
        return socket_holds_whole_request(view)
    finally:
        view.detach()  # the transport still owns the descriptor


def socket_holds_whole_request(sock: socket.socket) -> bool:
    """Whether the bytes the kernel holds unread for ``sock`` are a whole request: its head
    (headers and the blank line after them) and all the body it declares, no chunked one.
    Such a request (a probe) is about to be read and answered; a connection still sending its
    headers or its body is not. The bytes stay where they are."""
    try:
        unread = sock.recv(HEAD_PEEK_BYTES, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:  # nothing unread (BlockingIOError), or reset
        return False
    head, blank, body = unread.partition(b"\r\n\r\n")
    if not blank:
        return False
    length = 0
    for line in head.lower().split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip() == b"transfer-encoding":
            return False
        if name.strip() == b"content-length":
            if not value.strip().isdigit():
                return False
            length = int(value.strip())
    return len(body) >= length


def reserved_slots(max_connections: int) -> int:
    return min(RESERVED_SLOTS, max_connections // 4)


def bearer_token(authorization: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` header value ('' for any other)."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def bearer_key_matches(authorization: bytes | None, api_key: str | None) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <api_key>`` (never without a key)."""
    token = bearer_token((authorization or b"").decode("latin-1"))
    return bool(api_key) and hmac.compare_digest(token.encode(), api_key.encode())


class KeyCheck:
    """ASGI middleware: with an API key set, every route but ``/health`` needs
    ``Authorization: Bearer <key>`` (401 otherwise). Plain ASGI, so a request body streams
    through it untouched (Starlette's function middleware wraps every body message in a
    task group: a thousand slow bodies then cost the event loop a second at a time)."""

    def __init__(self, app, api_key: str | None):
        self.app, self.api_key = app, api_key

    async def __call__(self, scope, receive, send):
        if (
            scope["type"] != "http"
            or not self.api_key
            or scope["path"] == "/health"
            or bearer_key_matches(dict(scope["headers"]).get(b"authorization"), self.api_key)
        ):
            return await self.app(scope, receive, send)
        await _send_error(
            send,
            ApiError(
                401,
                "Missing or wrong API key: send 'Authorization: Bearer <key>'.",
                "authentication_error",
                "invalid_api_key",
            ),
            scope["path"],
        )


def guarded_protocol(
    header_seconds: float, body_seconds: float, max_connections: int, api_key: str | None
):
    """uvicorn's h11 protocol with deadlines and a fair cap on open connections, as one
    server's class (its connections share one ``ConnectionTable``).

    Deadlines: a connection must send a request's headers within ``header_seconds`` (else it
    is closed) and then its whole body within ``body_seconds`` (else it gets a 408, or is
    just closed if its answer has begun, as after an early 413).

    A connection is waiting for headers, receiving a body, or complete (its body is in: it
    is being answered or streamed to). Requests carrying the API key are "trusted" once
    their headers are in, requests for ``/health`` once the whole request has arrived (a
    /health whose body never comes is a stranger's slow body). Past ``max_connections``, a
    new connection closes one other, in this order: the one waiting longest for headers, if
    that is over ``HEADER_GRACE_SECONDS``; else the stranger's body furthest behind its
    deadline (the largest share of its time used less share of its bytes received); else
    the one waiting longest for headers; else none, and the new connection itself is
    closed. Only a silent connection counts as waiting for headers here: one with bytes the
    loop has not read yet (``unread_bytes``) is about to send them. In a burst, read by
    none yet, a newcomer whose whole request has come (``holds_whole_request``: a probe)
    closes the oldest whose request has not, in its place. A complete or trusted request
    is never closed to make room.

    Reserve: strangers' requests past their headers may hold at most ``max_connections``
    less ``reserved_slots`` slots. One more closes the stranger's body furthest behind, or,
    if all of them are complete, is itself answered 503. So strangers never fill the last
    few slots, even with requests that are complete: /health or a key holder's request
    finds room there, if need be by closing a connection still waiting for headers.

    A flood makes every new connection choose one to close, so the choice must not walk all
    of them: the connections waiting for headers are kept oldest first, the strangers'
    requests in a set (a connection leaves it as it leaves the request, or as it is closed
    here, or once gone where uvicorn closed it: a count never below the truth), and
    their bodies in a heap by how far behind they are.
    """
    table = ConnectionTable(header_seconds, body_seconds, max_connections, api_key)
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"table": table})


class ConnectionTable:
    """What the connections of one server share: the limits, who waits for headers, the
    strangers' requests and bodies, and the connections closed here that have not left yet.

    Bodies are kept in a heap by ``ahead``: the share of its time a body's headers came
    before the clock's zero, plus the share of its bytes received. A body is furthest behind
    (its share of time used less its share of bytes received is largest) when that is least,
    and the order does not change as time passes, only as bytes come, when the body is
    pushed again; entries a newer one replaces, or whose body has ended, are dropped as
    they surface (and all at once when they outnumber the live ones)."""

    def __init__(self, header_seconds: float, body_seconds: float, max_connections: int, api_key):
        self.header_seconds, self.body_seconds = header_seconds, body_seconds
        self.max_connections, self.api_key = max_connections, api_key
        self.stranger_slots = max_connections - reserved_slots(max_connections)
        self.waiting: OrderedDict = OrderedDict()  # waiting for headers, oldest first
        # every stranger's connection in a request (and those uvicorn is closing, until gone)
        self.strangers: set = set()
        self.bodies: list = []  # heap of (ahead, order, connection): see above
        self.order = itertools.count()  # ties in the heap go first come, first closed
        self.closed: set = set()

    def over_cap(self, connections) -> bool:
        return len(connections) - len(self.closed) > self.max_connections

    def make_room(self, newcomer: GuardedH11Protocol) -> None:
        """Close one connection for ``newcomer`` (past the cap), in the order above."""
        past_grace = itertools.takewhile(
            lambda c: newcomer.waiting_since - c.waiting_since > HEADER_GRACE_SECONDS,
            self.open_waiting(newcomer),
        )
        longest = self.first_silent(past_grace)
        if longest is not None:
            longest.close()
        elif not self.close_body_furthest_behind(newcomer):
            oldest = list(itertools.islice(self.open_waiting(newcomer), SILENT_SEARCH))
            (self.first_silent(oldest) or self.first_incomplete(oldest, newcomer)).close()

    def open_waiting(self, newcomer: GuardedH11Protocol):
        """The connections waiting for headers, oldest first, but ``newcomer`` and the closed."""
        return (c for c in self.waiting if c is not newcomer and not c.transport.is_closing())

    @staticmethod
    def first_silent(connections) -> GuardedH11Protocol | None:
        """The first of ``connections`` (within ``SILENT_SEARCH``) with nothing unread."""
        return next(
            (
                c
                for c in itertools.islice(connections, SILENT_SEARCH)
                if not unread_bytes(c.transport)
            ),
            None,
        )

    @staticmethod
    def first_incomplete(connections, newcomer: GuardedH11Protocol) -> GuardedH11Protocol:
        """In a burst nothing has been read yet: ``newcomer``, unless its whole request is
        in (a probe, about to be read and answered), then the first of ``connections`` whose
        request is not; ``newcomer`` if every one's is."""
        if holds_whole_request(newcomer.transport):
            for connection in connections:
                if not holds_whole_request(connection.transport):
                    return connection
        return newcomer

    def rank_body(self, stranger: GuardedH11Protocol) -> None:
        """Place ``stranger``'s body in the heap by how far ahead it is now."""
        got = stranger.body_bytes / stranger.body_length if stranger.body_length else 0.0
        ahead = stranger.headers_at / self.body_seconds + got
        stranger.body_entry = (ahead, next(self.order), stranger)
        heapq.heappush(self.bodies, stranger.body_entry)
        if len(self.bodies) > 2 * len(self.strangers) + 64:
            self.bodies = [
                c.body_entry for c in self.strangers if c.body_entry and c.receiving_body()
            ]
            heapq.heapify(self.bodies)

    def close_body_furthest_behind(self, spared) -> bool:
        """Close the stranger's body furthest behind (not ``spared``'s); False if there is
        none."""
        spared_entry = None
        while self.bodies:
            entry = self.bodies[0]
            body = entry[2]
            if entry is not body.body_entry or body.trusted or not body.receiving_body():
                heapq.heappop(self.bodies)  # replaced, or no longer a stranger's body
            elif body is spared:
                spared_entry = heapq.heappop(self.bodies)
            else:
                break
        furthest = self.bodies[0][2] if self.bodies else None
        if spared_entry is not None:
            heapq.heappush(self.bodies, spared_entry)
        if furthest is None:
            return False
        furthest.close()
        log.warning("Connections are full: closed the request body furthest behind.")
        return True

    def keep_reserve(self, stranger: GuardedH11Protocol) -> None:
        """Keep strangers' requests out of the reserved slots, ``stranger``'s included."""
        if len(self.strangers) <= self.stranger_slots:
            return
        if not self.close_body_furthest_behind(stranger):
            stranger.refuse(
                ApiError(
                    503,
                    "The server has no connection free for this request; try again shortly.",
                    "server_error",
                    "no_free_connection",
                )
            )


class GuardedH11Protocol(H11Protocol):
    """One connection under its server's ``ConnectionTable`` (``guarded_protocol``)."""

    table: ConnectionTable
    header_timer: asyncio.TimerHandle | None = None
    body_timer: asyncio.TimerHandle | None = None
    waiting_since = 0.0  # for headers
    request_cycle = None  # uvicorn's cycle of the request whose headers came last
    headers_at = 0.0
    body_bytes = 0  # of the body, counted from the packet after the headers' one
    body_length = 0  # its Content-Length (0: none given, as with chunks)
    health = False  # the request is for /health
    trusted = False
    body_entry: tuple | None = None  # its place in the table's heap of strangers' bodies

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._await_headers()
        if self.table.over_cap(self.connections):
            self.table.make_room(self)

    def close(self) -> None:
        """Close this connection; it counts as gone from now on."""
        self.table.closed.add(self)
        self.table.strangers.discard(self)
        self._stop_timers()
        self.transport.close()

    def in_request(self) -> bool:
        """Headers in, connection open: receiving the body or complete."""
        return (
            self.request_cycle is not None
            and self.header_timer is None
            and not self.transport.is_closing()
        )

    def receiving_body(self) -> bool:
        return self.in_request() and self.conn.their_state is h11.SEND_BODY

    def data_received(self, data: bytes) -> None:
        receiving = self.receiving_body()
        super().data_received(data)
        if receiving and self.cycle is self.request_cycle:
            self.body_bytes += len(data)
            if self.body_entry is not None and self.receiving_body():
                self.table.rank_body(self)
        self._follow_request()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow_request()  # the next request may have been waiting in the buffer

    def _await_headers(self) -> None:
        self.waiting_since = time.monotonic()
        self.header_timer = self.loop.call_later(self.table.header_seconds, self.close)
        self.table.waiting[self] = None
        self.table.strangers.discard(self)

    def _follow_request(self) -> None:
        """Set the timers and the trust for where the request now is (after any bytes or
        answer)."""
        if self.transport.is_closing():
            return self._stop_timers()
        if self.cycle is not None and self.cycle is not self.request_cycle:
            self._headers_arrived()
        if self.conn.their_state is not h11.SEND_BODY:
            self._body_arrived()
        if self.conn.their_state is h11.IDLE and self.header_timer is None:
            self._await_headers()  # between requests (as after an early answer's body)

    def _headers_arrived(self) -> None:
        self._stop_timers()
        self.request_cycle, self.headers_at, self.body_bytes = self.cycle, time.monotonic(), 0
        headers = dict(self.headers)
        length = headers.get(b"content-length", b"")
        self.body_length = int(length) if length.isdigit() else 0
        self.health = self.scope["path"] == "/health"
        self.trusted = bearer_key_matches(headers.get(b"authorization"), self.table.api_key) or (
            self.health and self.conn.their_state is not h11.SEND_BODY  # all in already
        )
        if self.conn.their_state is h11.SEND_BODY:
            self.body_timer = self.loop.call_later(self.table.body_seconds, self._body_overdue)
        self.body_entry = None
        if not self.trusted:
            self.table.strangers.add(self)
            if self.conn.their_state is h11.SEND_BODY:
                self.table.rank_body(self)
            self.table.keep_reserve(self)

    def _body_arrived(self) -> None:
        """The whole request is in: a /health probe earns its trust now."""
        if self.body_timer is not None:
            self.body_timer.cancel()
            self.body_timer = None
        if self.health and not self.trusted and self.in_request():
            self.trusted = True
            self.table.strangers.discard(self)

    def _body_overdue(self) -> None:
        self.body_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        log.warning(
            "A request body did not arrive within %g s; its connection was closed.",
            self.table.body_seconds,
        )
        self.refuse(
            ApiError(
                408,
                f"The request body did not arrive within {self.table.body_seconds:g} s.",
                code="body_timeout",
            )
        )

    def refuse(self, error: ApiError) -> None:
        """Answer ``error`` in the app's stead, if its answer has not begun, and close: the
        app reads a disconnect, and what it would send goes nowhere."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            cycle.disconnected = True
            cycle.message_event.set()
            headers, body = _error_response(error, self.scope["path"])
            events = (
                h11.Response(
                    status_code=error.status, headers=[*headers, (b"connection", b"close")]
                ),
                h11.Data(data=body),
                h11.EndOfMessage(),
            )
            try:
                for event in events:
                    self.transport.write(self.conn.send(event))
            except h11.LocalProtocolError:  # the connection cannot take an answer now
                pass
        self.close()

    def _stop_timers(self) -> None:
        for timer in (self.header_timer, self.body_timer):
            if timer is not None:
                timer.cancel()
        self.header_timer = self.body_timer = None
        self.table.waiting.pop(self, None)

    def connection_lost(self, exc) -> None:
        self._stop_timers()
        self.table.strangers.discard(self)
        self.table.closed.discard(self)
        super().connection_lost(exc)


class RateLimitFilter(logging.Filter):
    """Lets at most ``burst`` records of one logger and message template through per
    ``seconds``; the next one to pass says how many were held back."""

    def __init__(self, burst: int = 5, seconds: float = 60.0):
        super().__init__()
        self.burst, self.seconds = burst, seconds
        self.windows: dict[tuple, list] = {}  # key -> [start, passed, held back]

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg)[:200])
        now = time.monotonic()
        window = self.windows.get(key)
        if window is None or now - window[0] >= self.seconds:
            held = window[2] if window else 0
            if len(self.windows) >= 1000:  # many distinct messages: start counting afresh
                self.windows.clear()
            self.windows[key] = [now, 1, 0]
            if held:
                record.msg = f"{record.msg} [{held} similar messages held back]"
            return True
        if window[1] < self.burst:
            window[1] += 1
            return True
        window[2] += 1
        return False
