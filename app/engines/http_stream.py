"""One HTTP/1.1 request on the caller's asyncio loop, its reply read piece by piece.

The remote engine needs three things of its HTTP client that a general one makes hard: a
request that a task cancellation stops at once wherever it waits (connecting, waiting for
the reply, reading it), nothing left running after that in another task or thread, and a
reply read only as fast as the app takes it. Here asyncio's own streams carry the bytes and
h11 (the HTTP/1.1 parser httpx and uvicorn are built on) reads and writes the protocol, so
all of it runs in the task that asked and ends with it. Chunked replies (a server's event
stream) and content-length ones both work; ``https`` uses the system's certificates.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from urllib.parse import urlsplit

import h11

READ_BYTES = 64 << 10  # what one read of the socket asks for


class Unreachable(OSError):
    """No connection within the connect timeout (or refused)."""


class Silent(TimeoutError):
    """The server sent nothing for the read timeout."""


class HttpReply:
    """An open request whose reply's status and headers have arrived; ``piece()`` reads the
    body. Use it as an async context manager, or call ``close()``."""

    def __init__(self, writer: asyncio.StreamWriter, reader, protocol, read_timeout: float):
        self._writer, self._reader, self._h11 = writer, reader, protocol
        self.read_timeout = read_timeout
        self.status = 0

    async def __aenter__(self) -> HttpReply:
        return self

    async def __aexit__(self, *_exc) -> None:
        self.close()

    def close(self) -> None:
        self._writer.close()  # without waiting: the connection is not reused

    async def piece(self) -> bytes | None:
        """The next part of the body as it arrives; None at its end."""
        while True:
            event = await self._next_event()
            if isinstance(event, h11.Data):
                return bytes(event.data)
            if isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                return None

    async def _next_event(self):
        while (event := self._h11.next_event()) is h11.NEED_DATA:
            try:
                data = await asyncio.wait_for(self._reader.read(READ_BYTES), self.read_timeout)
            except asyncio.TimeoutError:
                raise Silent(f"nothing for {self.read_timeout:g} s") from None
            self._h11.receive_data(data)  # b"": the server closed the connection
        return event


async def open_request(
    method: str,
    url: str,
    headers: dict[str, str],
    body: object = None,
    connect_timeout: float = 10.0,
    read_timeout: float = 300.0,
) -> HttpReply:
    """Send ``method url`` (``body`` as JSON) and wait for the reply's status and headers.
    Raises Unreachable, Silent, or h11's ProtocolError for a reply that is not HTTP."""
    parts = urlsplit(url)
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                parts.hostname, port, ssl=ssl.create_default_context() if secure else None
            ),
            connect_timeout,
        )
    except (OSError, asyncio.TimeoutError) as error:
        raise Unreachable(str(error) or f"no answer within {connect_timeout:g} s") from None
    protocol = h11.Connection(h11.CLIENT)
    reply = HttpReply(writer, reader, protocol, read_timeout)
    try:
        data = b"" if body is None else json.dumps(body).encode()
        fields = {
            "host": parts.netloc,
            "accept": "application/json, text/event-stream",
            "connection": "close",
            "content-length": str(len(data)),
            **({"content-type": "application/json"} if body is not None else {}),
            **headers,
        }
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        writer.write(
            protocol.send(h11.Request(method=method, target=target, headers=list(fields.items())))
        )
        writer.write(protocol.send(h11.Data(data=data)) + protocol.send(h11.EndOfMessage()))
        try:
            await asyncio.wait_for(writer.drain(), read_timeout)
        except asyncio.TimeoutError:
            raise Silent(f"the request was not taken within {read_timeout:g} s") from None
        response = await reply._next_event()
        while isinstance(response, h11.InformationalResponse):  # 100 Continue and such
            response = await reply._next_event()
        if not isinstance(response, h11.Response):
            raise h11.RemoteProtocolError("the connection closed before a reply", 400)
        reply.status = response.status_code
    except BaseException:
        reply.close()
        raise
    return reply
