"""What keeps hostile clients out and bounded: Host, Origin and content-type checks, a time
cap per request, a deadline for request headers, a cap on open connections, and a log that
says the same thing at most a few times a minute.

A web page in a browser can send requests to 127.0.0.1, and a DNS-rebinding page can do so
under its own name. ``Guard`` refuses both: a ``Host`` that is not the name the server is
bound to (403), an ``Origin`` not named with ``--cors-origin`` (403), and a POST whose body
is not ``application/json`` (415; browsers send such a body only after a CORS preflight).
Ollama's routes also read bodies sent as forms or with no type, as its own curl examples
send them (a page's form post carries its Origin, refused as above).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

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


async def _send_error(send, error: ApiError) -> None:
    body = json.dumps(error.body()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
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
            return await _send_error(send, error)
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


def guarded_protocol(header_seconds: float, max_connections: int):
    """uvicorn's h11 protocol with a deadline for each request's headers (a connection that
    has not sent them in ``header_seconds`` is closed) and a cap on open connections: past
    it, the connection that has waited longest for headers is closed to make room (or, if
    every connection is mid-request, the new one)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        header_timer: asyncio.TimerHandle | None = None
        opened = 0.0

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self.opened = time.monotonic()
            self._await_headers()
            if len(self.connections) > max_connections:  # (closing ones leave it soon)
                open_ones = [c for c in self.connections if not c.transport.is_closing()]
                if len(open_ones) > max_connections:
                    idle = [c for c in open_ones if c.header_timer is not None and c is not self]
                    min(idle, key=lambda c: c.opened, default=self).transport.close()

        def _await_headers(self) -> None:
            self.header_timer = self.loop.call_later(header_seconds, self.transport.close)

        def _headers_arrived(self) -> None:
            if self.header_timer is not None:
                self.header_timer.cancel()
                self.header_timer = None

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._headers_arrived()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if (
                self.header_timer is None
                and not self.transport.is_closing()
                and self.conn.their_state is h11.IDLE
            ):
                self._await_headers()

        def connection_lost(self, exc) -> None:
            self._headers_arrived()
            super().connection_lost(exc)

    return GuardedH11Protocol


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
