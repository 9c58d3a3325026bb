"""What every route shares (``ServerState``): the options, the fair queue, the chat ids,
the statistics, and the steps of one answer: read the body, admit it, run it as its front
(OpenAI's or Ollama's) shapes it."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.requests import ClientDisconnect

from ..errors import EngineError
from ..runtime.clients import party_of
from ..events import DoneEvent, EmbeddingEvent, ErrorEvent
from .answer import Answer, cancel_on_disconnect, engine_failure
from .chats import CHAT_ID_HEADER, ChatIds, client_identity
from .guard import bearer_key_matches, bearer_token
from .queue import FairQueue, QueueFull
from .requests import ApiError, Defaults, ParsedRequest, parse
from .responses import SafeJSONResponse


@dataclass
class ServerOptions:
    model_name: str  # the id /v1/models lists and requests must name
    defaults: Defaults
    api_key: str | None = None
    max_queue: int = 16
    max_body_bytes: int = 1 << 20
    speculation: str = "on"
    hosts: set[str] | None = None  # the Host header values answered (None: any)
    cors_origins: tuple[str, ...] = ()  # web origins allowed to call (CORS); none by default
    max_request_seconds: float = 300.0
    model_facts: dict = field(default_factory=dict)  # ``models.model_facts`` of the model
    # when the model was made, in Unix seconds (/v1/models' ``created``): its folder's
    # modification time where the server knows it, else when the server started
    created: int = field(default_factory=lambda: int(time.time()))


# answers whose engine time gives the expected wait (a 429's Retry-After): as many as the
# queue holds by default, so the figure follows the load that fills it
RECENT_ANSWERS = 16


@dataclass
class ServerStats:
    """What ``/health`` tells a key holder about finished answers, and how long the recent
    ones held the engine."""

    finished: Counter = field(default_factory=Counter)
    last_finish_reason: str | None = None
    last_emitted: int = 0
    last_passes: int = 0
    held_seconds: deque = field(default_factory=lambda: deque(maxlen=RECENT_ANSWERS))

    def expected_wait(self, ahead: int) -> int:
        """Whole seconds until ``ahead`` answers have run, at the recent answers' mean
        (a second each before any has finished), at least 1."""
        mean = sum(self.held_seconds) / len(self.held_seconds) if self.held_seconds else 1.0
        return max(1, math.ceil(ahead * mean))

    def record(self, reason: str, done: DoneEvent | None) -> None:
        self.finished[reason] += 1
        self.last_finish_reason = reason
        self.last_emitted = len(done.tokens) if done else 0
        self.last_passes = done.stats.get("passes", 0) if done else 0

    def to_dict(self) -> dict:
        last = (
            {
                "finish_reason": self.last_finish_reason,
                "emitted": self.last_emitted,
                "passes": self.last_passes,
            }
            if self.last_finish_reason
            else {}
        )
        return {"finished": dict(self.finished), "last": last}


def openai_error(error: ApiError) -> JSONResponse:
    """OpenAI's error body."""
    return SafeJSONResponse(error.body(), status_code=error.status, headers=error.headers())


def _not_json(constant: str):
    raise ValueError(f"{constant} is not a JSON value")


@dataclass(frozen=True)
class Front:
    """How one API shapes an answer: its error body, its stream and its whole body."""

    failure: Callable[[ApiError], JSONResponse]
    stream: Callable[[Answer, object], AsyncIterator[bytes | str]]
    whole: Callable[[Answer, object], Awaitable[dict]]
    media_type: str
    stream_headers: dict = field(default_factory=dict)


def answering(complete, chat: bool):
    """A route that answers with ``complete(request, chat)``: a chat, or a text
    completion (OpenAI's) or generate (Ollama's)."""

    async def route(request: Request):
        return await complete(request, chat)

    return route


class ServerState:
    """What every route shares: the options, the fair queue, the chat ids and the
    statistics, with the steps of one answer (read the body, admit it, run it)."""

    def __init__(self, service, options: ServerOptions):
        self.service = service
        self.options = options
        self.queue = FairQueue(options.max_queue)
        # party -> (the lock its grammars are prepared under, requests holding or awaiting it)
        self.preparing: dict[str | None, tuple[asyncio.Lock, int]] = {}
        self.chats = ChatIds()
        self.stats = ServerStats()
        self.served = {options.model_name, "default", "draftless"}

    def authorized(self, request: Request) -> bool:
        """No key set, or the right one presented (KeyCheck's test, for /health's details)."""
        header = request.headers.get("authorization", "").encode("latin-1")
        return not self.options.api_key or bearer_key_matches(header, self.options.api_key)

    async def read_body(self, request: Request) -> dict:
        limit = self.options.max_body_bytes
        too_large = ApiError(
            413, f"The request is larger than {limit} bytes.", code="request_too_large"
        )
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > limit:
            raise too_large
        raw = bytearray()
        try:
            async for part in request.stream():
                raw += part
                if len(raw) > limit:
                    raise too_large
        except ClientDisconnect:  # gone, or cut off by the guard's body deadline
            raise ApiError(
                400, "The connection closed before the whole request body arrived."
            ) from None
        try:
            return json.loads(raw, parse_constant=_not_json)
        except RecursionError:
            raise ApiError(400, "The request body is nested too deeply.") from None
        except ValueError as error:
            raise ApiError(400, f"The request body is not valid JSON ({error}).") from None

    def check_model(self, model) -> None:
        """A 404 unless ``model`` (None: unnamed) is the one served."""
        if model is not None and model not in self.served:
            raise ApiError(
                404,
                f"The model {model!r} does not exist here; this server "
                f"serves {self.options.model_name!r} (see /v1/models).",
                "not_found_error",
                "model_not_found",
                "model",
            )

    def client_of(self, request: Request, user) -> str:
        """Who sends ``request``: its key, address and ``user`` (``chats.client_identity``)."""
        return client_identity(
            bearer_token(request.headers.get("authorization", ""))
            if self.options.api_key
            else None,
            request.client.host if request.client else None,
            user if isinstance(user, str) else None,
        )

    def owned(self, parsed: ParsedRequest, request: Request, user) -> ParsedRequest:
        """The request as its client's: named by key, address and ``user``, and answered
        under a chat id issued to that client (``chats.py``)."""
        client = self.client_of(request, user)
        chat_id = self.chats.resolve(parsed.generation.chat_id, client)
        return replace(
            parsed,
            generation=replace(parsed.generation, chat_id=chat_id, client=client),
            more=tuple(replace(more, client=client) for more in parsed.more),
        )

    async def admit(self, request: Request, body, chat: bool) -> ParsedRequest:
        """``body`` (OpenAI's form) checked, owned by its client, and holding the engine's
        turn: the caller hands the turn to ``respond``, which gives it back."""
        try:  # its checks never hold up the event loop
            parsed = await asyncio.to_thread(parse, body, chat, self.options.defaults)
        except ApiError:
            raise
        except Exception as error:  # whatever the body holds, the answer is a 400
            raise ApiError(
                400, f"The request could not be read ({type(error).__name__}: {error})."
            ) from None
        parsed = self.owned(parsed, request, body.get("user"))
        await self.prepare(parsed)
        await self.take_turn(parsed)
        return parsed

    async def prepare(self, parsed: ParsedRequest) -> None:
        """What the engine does for the request before its turn, while others' answers run
        (a grammar's trial compile); its refusal is the request's error. One party's
        grammars are prepared one at a time, as the queue gives it one place at a time
        among others: many bombs from one address wait for each other, not for the others'
        requests."""
        prepare = getattr(self.service, "prepare", None)
        if prepare is None or not parsed.generation.wants_grammar:
            return
        party = party_of(parsed.generation.client)
        lock, users = self.preparing.get(party, (asyncio.Lock(), 0))
        self.preparing[party] = (lock, users + 1)
        try:
            async with lock:
                await prepare(parsed.generation)
        except EngineError as error:
            raise engine_failure(str(error)) from None
        finally:
            lock, users = self.preparing[party]
            if users == 1:
                del self.preparing[party]
            else:
                self.preparing[party] = (lock, users - 1)

    async def take_turn(self, parsed: ParsedRequest) -> None:
        """Wait for the request's turn on the engine; a 429 where too many wait."""
        await self._take_turn(parsed.generation.client)  # its party and member

    async def _take_turn(self, client: str) -> None:
        try:
            await self.queue.acquire(client)
        except QueueFull:
            wait = self.stats.expected_wait(self.queue.waiting + int(self.queue.running))
            raise ApiError(
                429,
                f"The server is busy: {self.queue.waiting} requests are waiting. "
                f"Try again in about {wait} s.",
                "rate_limit_error",
                "queue_full",
                retry_after=wait,
            ) from None

    async def embed(self, request: Request, inputs: list, truncate: bool, user=None):
        """Each input's embedding (an ``EmbeddingEvent``), run in the request's turn on the
        engine like an answer: bounded by the queue, the body and the request's time."""
        await self._take_turn(self.client_of(request, user))
        stream = self.service.embed(inputs, self.options.defaults.model, truncate)
        watcher = asyncio.create_task(cancel_on_disconnect(request, stream))
        result = None
        try:
            async for event in stream:
                if isinstance(event, ErrorEvent):
                    if event.message.startswith("Internal error"):
                        raise ApiError(500, event.message, "server_error")
                    raise ApiError(400, event.message, param="input")
                if isinstance(event, EmbeddingEvent):
                    result = event
        finally:
            watcher.cancel()
            stream.cancel()
            self.queue.release()
        if result is None:
            raise ApiError(500, "The engine ended without the embeddings.", "server_error")
        return result

    async def respond(self, request: Request, parsed: ParsedRequest, shaper, front: Front):
        """Run an admitted request (it holds the turn) and answer it as ``front`` shapes it:
        a stream, or one body once the answer is done."""
        chat_id = parsed.generation.chat_id
        headers = {CHAT_ID_HEADER: chat_id} if chat_id else {}
        started = time.perf_counter()

        def release() -> None:  # the engine has finished: the next in line may start
            self.stats.held_seconds.append(time.perf_counter() - started)
            self.queue.release()

        try:  # the answer owns the turn now: it gives it up when the engine has finished
            answer = Answer(self.service, parsed, shaper, self.stats, release)
        except BaseException:
            self.queue.release()
            raise
        try:
            failed = await answer.start()
        except BaseException:  # the client went away (or the time ran out) while starting
            answer.cancel()
            raise
        if failed is not None:
            return front.failure(failed)
        if parsed.stream:

            async def chunks():
                try:
                    async for chunk in front.stream(answer, shaper):
                        yield chunk
                finally:  # done, or the client went away: stop at the next pass
                    answer.cancel()

            return StreamingResponse(
                chunks(),
                media_type=front.media_type,
                headers={**front.stream_headers, **headers} or None,
            )
        watcher = asyncio.create_task(cancel_on_disconnect(request, answer))
        try:
            return SafeJSONResponse(await front.whole(answer, shaper), headers=headers or None)
        except ApiError as error:
            return front.failure(error)
        finally:
            watcher.cancel()
            answer.cancel()
