"""The HTTP routes (FastAPI): OpenAI's chat and text completions and models, Ollama's
``/api`` routes (``ollama.py``), health.

Every route but ``/health`` checks ``Authorization: Bearer`` when a key is set (``/health``
then says only "ok" to others). ``guard.Guard`` checks Host, Origin and content-type first.
Answers run one at a time through a fair, bounded queue; a client that goes away cancels
its answer at the engine's next pass. Chats belong to the client they were issued to
(``chats.py``).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field, replace

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from ..events import DoneEvent, ErrorEvent, PassEvent, ProgressEvent, TokenEvent, ToolCallEvent
from ..stop_strings import StopMatcher, kept_figures
from . import ollama
from .chats import CHAT_ID_HEADER, ChatIds, client_identity
from .guard import Guard, KeyCheck, bearer_key_matches, bearer_token
from .queue import FairQueue, QueueFull
from .requests import ApiError, Defaults, ParsedRequest, parse, typed
from .responses import (
    FINISH,
    SafeJSONResponse,
    Shaper,
    provenance,
    returned_tokens,
    usage,
)


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


@dataclass
class ServerStats:
    """What ``/health`` tells a key holder about finished answers."""

    finished: Counter = field(default_factory=Counter)
    last_finish_reason: str | None = None
    last_emitted: int = 0
    last_passes: int = 0

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


def _error(error: ApiError) -> JSONResponse:
    headers = {"Retry-After": "1"} if error.status in (429, 503) else None
    return SafeJSONResponse(error.body(), status_code=error.status, headers=headers)


def _sse(body: dict | str) -> bytes:
    return f"data: {body if isinstance(body, str) else json.dumps(body)}\n\n".encode()


def _not_json(constant: str):
    raise ValueError(f"{constant} is not a JSON value")


def create_app(service, options: ServerOptions) -> FastAPI:
    """``service`` is an ``EngineService`` (or anything with its ``generate``)."""
    app = FastAPI(
        title="Draftless",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        default_response_class=SafeJSONResponse,
    )
    queue = FairQueue(options.max_queue)
    chats = ChatIds()
    stats = ServerStats()
    served = {options.model_name, "default", "draftless"}
    model_card = {
        "id": options.model_name,
        "object": "model",
        "created": 0,
        "owned_by": "draftless",
        "draftless": {
            "speculation": options.speculation,
            "tool_format": options.model_facts.get("tool_format"),
        },
    }

    def presented_key(request: Request) -> str:
        return bearer_token(request.headers.get("authorization", ""))

    def authorized(request: Request) -> bool:
        """No key set, or the right one presented (KeyCheck's test, for /health's details)."""
        header = request.headers.get("authorization", "").encode("latin-1")
        return not options.api_key or bearer_key_matches(header, options.api_key)

    @app.exception_handler(HTTPException)
    async def http_error(request, error: HTTPException):
        kind = "not_found_error" if error.status_code == 404 else "invalid_request_error"
        failure = ollama.error if request.url.path.startswith("/api/") else _error
        return failure(
            ApiError(
                error.status_code, f"{request.method} {request.url.path}: {error.detail}", kind
            )
        )

    @app.exception_handler(Exception)
    async def internal_error(request, error: Exception):
        return _error(
            ApiError(
                500,
                f"Internal error ({type(error).__name__}); see the server's log.",
                "server_error",
            )
        )

    app.add_middleware(KeyCheck, api_key=options.api_key)

    if options.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(options.cors_origins),
            allow_methods=["GET", "POST"],
            # the origins are the operator's own choice; what headers their pages send is
            # the SDKs' business (the openai and Anthropic SDKs add their own, such as
            # X-Stainless-*), so a listed origin may send any
            allow_headers=["*"],
            expose_headers=[CHAT_ID_HEADER],
            max_age=600,
        )
    app.add_middleware(
        Guard,
        hosts=options.hosts,
        origins=set(options.cors_origins),
        max_seconds=options.max_request_seconds,
    )

    @app.api_route("/health", methods=["GET", "HEAD"])
    async def health(request: Request):
        if not authorized(request):  # without the key: no word about other clients
            return {"status": "ok"}
        return {
            "status": "ok",
            "model": options.model_name,
            "running": int(queue.running),
            "waiting": queue.waiting,
            **stats.to_dict(),
        }

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [model_card]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str):
        if model_id not in served:
            return _error(
                ApiError(
                    404,
                    f"The model {model_id!r} does not exist here; this "
                    f"server serves {options.model_name!r}.",
                    "not_found_error",
                    "model_not_found",
                    "model",
                )
            )
        return model_card

    async def read_body(request: Request) -> dict:
        too_large = ApiError(
            413,
            f"The request is larger than {options.max_body_bytes} bytes.",
            code="request_too_large",
        )
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > options.max_body_bytes:
            raise too_large
        raw = bytearray()
        try:
            async for part in request.stream():
                raw += part
                if len(raw) > options.max_body_bytes:
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

    def owned(parsed: ParsedRequest, request: Request, user) -> ParsedRequest:
        """The request as its client's: named by key, address and ``user``, and answered
        under a chat id issued to that client (``chats.py``)."""
        client = client_identity(
            presented_key(request) if options.api_key else None,
            request.client.host if request.client else None,
            user if isinstance(user, str) else None,
        )
        chat_id = chats.resolve(parsed.generation.chat_id, client)
        return replace(
            parsed, generation=replace(parsed.generation, chat_id=chat_id, client=client)
        )

    def served_model(model) -> None:
        if model is not None and model not in served:
            raise ApiError(
                404,
                f"The model {model!r} does not exist here; this server "
                f"serves {options.model_name!r} (see /v1/models).",
                "not_found_error",
                "model_not_found",
                "model",
            )

    async def complete(request: Request, chat: bool, front: str = "openai"):
        """One answer through the queue; ``front`` says whose shapes (OpenAI's or Ollama's)
        the request and the answer take."""
        failure = _error if front == "openai" else ollama.error
        answers_chat = chat  # Ollama's generate runs as a chat but answers as a generate
        try:
            body = await read_body(request)
            if front == "ollama":
                model = ollama.model_name(body)
            else:
                model = (
                    typed(body.get("model"), "string", "model") if isinstance(body, dict) else None
                )
            if front == "ollama":
                served_model(model.removesuffix(":latest") if model else None)
                loading = not chat and isinstance(body, dict) and not body.get("prompt")
                body, chat = await asyncio.to_thread(ollama.translate, body, chat)  # off the loop
                if loading:  # how Ollama clients load a model; this one is loaded
                    return {
                        "model": model or options.model_name,
                        "created_at": ollama.now(),
                        "response": "",
                        "done": True,
                        "done_reason": "load",
                    }
            else:
                served_model(model)
            try:
                # its checks never hold up the event loop
                parsed = await asyncio.to_thread(parse, body, chat, options.defaults)
            except ApiError:
                raise
            except Exception as error:  # whatever the body holds, the answer is a 400
                raise ApiError(
                    400, f"The request could not be read ({type(error).__name__}: {error})."
                ) from None
            parsed = owned(parsed, request, body.get("user"))
            await queue.acquire(parsed.generation.client)  # its party and member
        except QueueFull:
            return failure(
                ApiError(
                    429,
                    f"The server is busy: {queue.waiting} requests are waiting. Try again shortly.",
                    "rate_limit_error",
                    "queue_full",
                )
            )
        except ApiError as error:
            return failure(error)
        chat_id = parsed.generation.chat_id
        shaper = (
            Shaper(chat, options.model_name, chat_id)
            if front == "openai"
            else ollama.OllamaShaper(answers_chat, model or options.model_name, chat_id)
        )
        headers = {CHAT_ID_HEADER: chat_id} if chat_id else None
        try:  # the answer owns the turn now: it gives it up when the engine has finished
            answer = Answer(service, parsed, shaper, stats, queue.release)
        except BaseException:
            queue.release()
            raise
        try:
            failed = await answer.start()
        except BaseException:  # the client went away (or the time ran out) while starting
            answer.cancel()
            raise
        if failed is not None:
            return failure(failed)
        if parsed.stream:

            async def chunks():
                try:
                    async for chunk in (
                        answer.chunks() if front == "openai" else ollama.lines(answer, shaper)
                    ):
                        yield chunk
                finally:  # done, or the client went away: stop at the next pass
                    answer.cancel()

            if front == "openai":
                return StreamingResponse(
                    chunks(),
                    media_type="text/event-stream",
                    headers={"Cache-Control": "no-cache", **(headers or {})},
                )
            return StreamingResponse(chunks(), media_type="application/x-ndjson", headers=headers)
        watcher = asyncio.create_task(_cancel_on_disconnect(request, answer))
        try:
            return SafeJSONResponse(
                await (answer.whole() if front == "openai" else ollama.whole(answer, shaper)),
                headers=headers,
            )
        except ApiError as error:
            return failure(error)
        finally:
            watcher.cancel()
            answer.cancel()

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await complete(request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await complete(request, chat=False)

    @app.post("/api/chat")
    async def ollama_chat(request: Request):
        return await complete(request, chat=True, front="ollama")

    @app.post("/api/generate")
    async def ollama_generate(request: Request):
        return await complete(request, chat=False, front="ollama")

    @app.get("/api/version")
    async def ollama_version():
        return {"version": ollama.VERSION}

    @app.get("/api/tags")
    async def ollama_tags():
        return {"models": [ollama.model_entry(options.model_name, options.model_facts)]}

    @app.get("/api/ps")
    async def ollama_running():
        return {"models": [ollama.running_entry(options.model_name, options.model_facts)]}

    @app.post("/api/show")
    async def ollama_show(request: Request):
        try:
            body = await read_body(request)
            name = ollama.model_name(body)
            if not name or name.removesuffix(":latest") not in served:
                raise ApiError(
                    404,
                    f"model {name!r} not found; this server serves {options.model_name!r}.",
                    "not_found_error",
                )
        except ApiError as error:
            return ollama.error(error)
        return ollama.show(options.model_facts)

    return app


async def _cancel_on_disconnect(request: Request, answer: Answer) -> None:
    while not await request.is_disconnected():
        await asyncio.sleep(0.2)
    answer.cancel()


@dataclass
class Piece:
    """What the reader of an answer gets: one pass (its tokens and the text they add once
    stop strings are applied), then the end: a DoneEvent (with the held-back text and the
    tokens the client got) or an ErrorEvent."""

    event: PassEvent | DoneEvent | ErrorEvent
    tokens: list[TokenEvent] = field(default_factory=list)
    text: str = ""
    completion_tokens: int = 0
    calls: list[dict] = field(default_factory=list)  # tool calls that closed in the pass
    deltas: list[dict] = field(default_factory=list)  # the calls' progress (ToolCallEvent)
    returned: int = 0  # how many of ``tokens`` the client gets (a stop string may cut it)


class Answer:
    """One request's run on the engine, as OpenAI chunks or one OpenAI body.

    A task reads the engine's events as they come, applies the stop strings, and puts
    ``Piece``s in a buffer for the client; it gives up the engine turn (``release``) as soon
    as the engine has finished, so a slow reader never holds the engine.
    """

    def __init__(self, service, parsed, shaper: Shaper, stats: ServerStats, release):
        self.stream = service.generate(parsed.generation)
        self.stop = StopMatcher(parsed.stop)
        self.include_usage = parsed.include_usage
        self.shaper = shaper
        self.stats = stats
        self.pieces: asyncio.Queue[Piece | None] = asyncio.Queue()
        self.head: Piece | None = None
        # the chat template opened a <think> block the answer starts inside (the engine's
        # "prefill" events say so): the first chunk's draftless.thinking tells the client
        self.opened_thinking = False
        self.pump = asyncio.get_running_loop().create_task(self._pump(release))

    def cancel(self) -> None:
        self.stream.cancel()

    async def _pump(self, release) -> None:
        tokens: list[TokenEvent] = []  # of the pass under way
        calls: list[dict] = []
        deltas: list[dict] = []
        held = ""  # text a tool-call scan gave out at the end
        every: list[TokenEvent] = []
        passes: list[PassEvent] = []
        try:
            async for event in self.stream:
                if isinstance(event, TokenEvent):
                    tokens.append(event)
                elif isinstance(event, ToolCallEvent):
                    calls += event.calls
                    deltas += event.deltas
                    held += event.text
                elif isinstance(event, PassEvent):
                    passes.append(event)
                    text = self.stop.feed("".join(t.text for t in tokens) + held)
                    returned = len(tokens)
                    if self.stop.stopped:
                        self.cancel()
                        returned = returned_tokens(every + tokens, self.stop.returned) - len(every)
                    self.pieces.put_nowait(
                        Piece(
                            event,
                            tokens,
                            text,
                            calls=calls,
                            deltas=deltas,
                            returned=max(returned, 0),
                        )
                    )
                    every += tokens
                    tokens, calls, deltas, held = [], [], [], ""
                elif isinstance(event, DoneEvent):
                    text = self.stop.flush()
                    returned = (
                        returned_tokens(every, self.stop.returned)
                        if self.stop.stopped
                        else len(event.tokens)
                    )
                    if self.stop.stopped:  # the figures count the tokens the client got
                        stats, timing = kept_figures(event.stats, event.timing, passes, returned)
                        event = replace(event, stats=stats, timing=timing)
                    self.stats.record("stop" if self.stop.stopped else event.finish_reason, event)
                    self.pieces.put_nowait(Piece(event, text=text, completion_tokens=returned))
                elif isinstance(event, ProgressEvent) and event.stage == "prefill":
                    self.opened_thinking = event.thinking
                elif isinstance(event, ErrorEvent):
                    self.stats.record("error", None)
                    self.pieces.put_nowait(Piece(event))
        except Exception as error:  # never leave the reader waiting
            self.pieces.put_nowait(Piece(ErrorEvent(f"Internal error ({error}).")))
        finally:
            release()
            self.pieces.put_nowait(None)

    async def start(self) -> ApiError | None:
        """Wait for the first pass; an error before it is returned as an ApiError."""
        self.head = await self.pieces.get()
        if self.head is None:
            return ApiError(500, "The engine ended the answer without a result.", "server_error")
        if isinstance(self.head.event, ErrorEvent):
            message = self.head.event.message
            if message.startswith("Internal error"):
                return ApiError(500, message, "server_error")
            return ApiError(
                400,
                message,
                code="context_length_exceeded" if "reads at most" in message else None,
                param=message.split("'")[1] if message.startswith("'") else None,
            )
        return None

    async def read(self):
        piece = self.head
        while piece is not None:
            yield piece
            piece = await self.pieces.get()

    def finish(self, done: DoneEvent, called: bool) -> str:
        if self.stop.stopped:
            return "stop"
        reason = FINISH.get(done.finish_reason, "stop")
        return "tool_calls" if called and reason == "stop" else reason

    async def chunks(self):
        """OpenAI's chunks: the role rides on the first, each pass's tokens and figures in
        one (a pass that emitted nothing, the end-of-answer token's, rides on the last)."""
        called, first, figures = False, True, None
        async for piece in self.read():
            event = piece.event
            if isinstance(event, PassEvent):
                called = called or bool(piece.calls)
                figures = {
                    "draftless": {
                        **provenance(piece.tokens),
                        "pass": event.pass_index,
                        "drafted": event.drafted,
                        "accepted": event.accepted,
                        "seconds": round(event.seconds, 5),
                        "tokens_per_pass": round(event.tokens_per_pass, 4),
                    }
                }
                if not (piece.tokens or piece.text or piece.deltas):
                    continue
                if first and self.opened_thinking:
                    figures["draftless"]["thinking"] = True
                yield _sse(
                    self.shaper.chunk(
                        piece.text,
                        tokens=piece.tokens[: piece.returned],
                        deltas=piece.deltas,
                        extra=figures,
                        first=first,
                    )
                )
                first, figures = False, None
            elif isinstance(event, DoneEvent):
                yield _sse(
                    self.shaper.chunk(
                        piece.text, self.finish(event, called), extra=figures, first=first
                    )
                )
                if self.include_usage:  # the engine's statistics ride in usage.draftless
                    yield _sse(
                        self.shaper.usage_chunk(
                            usage(
                                event.timing.get("prompt_tokens", 0), event, piece.completion_tokens
                            )
                        )
                    )
                break
            else:  # the engine failed mid-answer
                yield _sse(
                    {
                        "error": {
                            "message": event.message,
                            "type": "server_error",
                            "param": None,
                            "code": None,
                        }
                    }
                )
                break
        yield _sse("[DONE]")

    async def collect(self) -> tuple[str, list[TokenEvent], list[dict], Piece]:
        """The whole answer once it is done: (its text, tokens, tool calls, the last
        piece, whose event is the DoneEvent); an engine error is a 500."""
        texts: list[str] = []
        tokens: list[TokenEvent] = []
        calls: list[dict] = []
        async for piece in self.read():
            texts.append(piece.text)
            tokens += piece.tokens
            calls += piece.calls
            if isinstance(piece.event, DoneEvent):
                return "".join(texts), tokens, calls, piece
            if isinstance(piece.event, ErrorEvent):
                raise ApiError(500, piece.event.message, "server_error")
        raise ApiError(500, "The engine ended the answer without a result.", "server_error")

    async def whole(self) -> dict:
        text, tokens, calls, last = await self.collect()
        done = last.event
        return self.shaper.whole(
            text,
            self.finish(done, bool(calls)),
            tokens,
            usage(done.timing.get("prompt_tokens", 0), done, last.completion_tokens),
            calls,
        )
