"""The HTTP routes (FastAPI): chat and text completions, models, health.

Every route but ``/health`` checks ``Authorization: Bearer`` when a key is set. Answers run
one at a time through a fair, bounded queue; a client that goes away cancels its answer at
the engine's next pass.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections import Counter
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException

from ..events import DoneEvent, ErrorEvent, PassEvent, TokenEvent
from .queue import FairQueue, QueueFull
from .requests import ApiError, Defaults, parse
from .responses import FINISH, Shaper, StopMatcher, provenance, usage


@dataclass
class ServerOptions:
    model_name: str  # the id /v1/models lists and requests must name
    defaults: Defaults
    api_key: str | None = None
    max_queue: int = 16
    max_body_bytes: int = 1 << 20
    speculation: str = "on"


def _error(error: ApiError) -> JSONResponse:
    headers = {"Retry-After": "1"} if error.status in (429, 503) else None
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


def _sse(body: dict | str) -> bytes:
    return f"data: {body if isinstance(body, str) else json.dumps(body)}\n\n".encode()


def create_app(service, options: ServerOptions) -> FastAPI:
    """``service`` is an ``EngineService`` (or anything with its ``generate``)."""
    app = FastAPI(title="Draftless", docs_url=None, redoc_url=None, openapi_url=None)
    queue = FairQueue(options.max_queue)
    finished: Counter[str] = Counter()
    last: dict = {}
    served = {options.model_name, "default", "draftless"}

    @app.exception_handler(HTTPException)
    async def http_error(request, error: HTTPException):
        kind = "not_found_error" if error.status_code == 404 else "invalid_request_error"
        return _error(ApiError(error.status_code, f"{request.method} {request.url.path}: "
                                                  f"{error.detail}", kind))

    @app.middleware("http")
    async def authorize(request: Request, call_next):
        if options.api_key and request.url.path != "/health":
            header = request.headers.get("authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(),
                                                                     options.api_key.encode()):
                return _error(ApiError(401, "Missing or wrong API key: send "
                                            "'Authorization: Bearer <key>'.",
                                       "authentication_error", "invalid_api_key"))
        return await call_next(request)

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": options.model_name, "running": int(queue.running),
                "waiting": queue.waiting, "finished": dict(finished), "last": last}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": options.model_name, "object": "model",
                                            "created": 0, "owned_by": "draftless",
                                            "draftless": {"speculation": options.speculation}}]}

    async def read_body(request: Request) -> dict:
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > options.max_body_bytes:
            raise ApiError(413, f"The request is larger than {options.max_body_bytes} bytes.",
                           code="request_too_large")
        raw = b""
        async for part in request.stream():
            raw += part
            if len(raw) > options.max_body_bytes:
                raise ApiError(413, f"The request is larger than {options.max_body_bytes} bytes.",
                               code="request_too_large")
        try:
            return json.loads(raw)
        except ValueError as error:
            raise ApiError(400, f"The request body is not valid JSON ({error}).") from None

    async def complete(request: Request, chat: bool):
        try:
            body = await read_body(request)
            model = body.get("model") if isinstance(body, dict) else None
            if model is not None and model not in served:
                raise ApiError(404, f"The model {model!r} does not exist here; this server "
                                    f"serves {options.model_name!r} (see /v1/models).",
                               "not_found_error", "model_not_found", "model")
            parsed = parse(body, chat, options.defaults,
                           request.client.host if request.client else None)
            turn = queue.turn(parsed.client or "anonymous")
            await turn.__aenter__()
        except QueueFull:
            return _error(ApiError(429, f"The server is busy: {queue.waiting} requests are "
                                        "waiting. Try again shortly.", "rate_limit_error",
                                   "queue_full"))
        except ApiError as error:
            return _error(error)
        answer = Answer(service, parsed, Shaper(chat, options.model_name), finished, last)
        try:
            first = await answer.start()
        except BaseException:  # the client went away while the answer was starting
            answer.cancel()
            asyncio.get_running_loop().create_task(answer.drain(turn))
            raise
        if isinstance(first, ApiError):
            await turn.__aexit__(None, None, None)
            return _error(first)
        if parsed.stream:
            async def chunks():
                try:
                    async for chunk in answer.chunks(first):
                        yield chunk
                finally:  # done, or the client went away: stop at the next pass
                    answer.cancel()
                    asyncio.get_running_loop().create_task(answer.drain(turn))

            return StreamingResponse(chunks(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        watcher = asyncio.create_task(_cancel_on_disconnect(request, answer))
        try:
            return JSONResponse(await answer.whole(first))
        except ApiError as error:
            return _error(error)
        finally:
            watcher.cancel()
            await turn.__aexit__(None, None, None)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await complete(request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await complete(request, chat=False)

    return app


async def _cancel_on_disconnect(request: Request, answer: "Answer") -> None:
    while not await request.is_disconnected():
        await asyncio.sleep(0.2)
    answer.cancel()


class Answer:
    """One request's run on the engine, as OpenAI chunks or one OpenAI body."""

    def __init__(self, service, parsed, shaper: Shaper, finished: Counter, last: dict):
        self.stream = service.generate(parsed.generation)
        self.stop = StopMatcher(parsed.stop)
        self.shaper = shaper
        self.finished = finished
        self.last = last
        self.recorded = False

    def cancel(self) -> None:
        self.stream.cancel()

    async def start(self):
        """The first event that is a token, pass, done or error (an error becomes ApiError)."""
        async for event in self.stream:
            if isinstance(event, ErrorEvent):
                self._record("error", None)
                status = 500 if event.message.startswith("Internal error") else 400
                return ApiError(status, event.message, "server_error" if status == 500
                                else "invalid_request_error")
            if isinstance(event, (TokenEvent, PassEvent, DoneEvent)):
                return event
        return ApiError(500, "The engine ended the answer without a result.", "server_error")

    async def drain(self, turn) -> None:
        """Wait for the engine to stop (it does at its next pass), then give up the turn."""
        try:
            if not self.recorded:
                async for event in self.stream:
                    if isinstance(event, DoneEvent):
                        self._record(event.finish_reason, event)
                    elif isinstance(event, ErrorEvent):
                        self._record("error", None)
        finally:
            await turn.__aexit__(None, None, None)

    def _record(self, reason: str, done: DoneEvent | None) -> None:
        self.recorded = True
        self.finished[reason] += 1
        self.last.clear()
        self.last.update({"finish_reason": reason,
                          "emitted": len(done.tokens) if done else 0,
                          "passes": done.stats.get("passes", 0) if done else 0})

    async def _passes(self, first):
        """(tokens of one pass, its pass event) pairs, then (None, done)."""
        tokens: list[TokenEvent] = []
        event = first
        while True:
            if isinstance(event, TokenEvent):
                tokens.append(event)
            elif isinstance(event, PassEvent):
                yield tokens, event
                tokens = []
                if self.stop.stopped:
                    self.cancel()
            elif isinstance(event, DoneEvent):
                self._record("stop" if self.stop.stopped else event.finish_reason, event)
                yield None, event
                return
            elif isinstance(event, ErrorEvent):
                self._record("error", None)
                raise RuntimeError(event.message)
            event = await self.stream.__anext__()

    def _finish(self, done: DoneEvent) -> str:
        return "stop" if self.stop.stopped else FINISH.get(done.finish_reason, "stop")

    async def chunks(self, first):
        yield _sse(self.shaper.chunk("", first=True))
        try:
            async for tokens, event in self._passes(first):
                if tokens is None:
                    tail = self.stop.flush() if not self.stop.stopped else ""
                    use = usage(event.timing.get("prompt_tokens", 0), event)
                    yield _sse(self.shaper.chunk(tail, self._finish(event), {"usage": use}))
                    break
                text = "" if self.stop.stopped else self.stop.feed("".join(t.text for t in tokens))
                yield _sse(self.shaper.chunk(text, extra={"draftless": {
                    **provenance(tokens), "pass": event.pass_index, "drafted": event.drafted,
                    "accepted": event.accepted, "seconds": round(event.seconds, 5),
                    "tokens_per_pass": round(event.tokens_per_pass, 4)}}))
        except RuntimeError as error:  # the engine failed mid-answer
            yield _sse({"error": {"message": str(error), "type": "server_error",
                                  "param": None, "code": None}})
        yield _sse("[DONE]")

    async def whole(self, first) -> dict:
        pieces: list[str] = []
        tokens: list[TokenEvent] = []
        try:
            async for batch, event in self._passes(first):
                if batch is None:
                    done = event
                    break
                tokens.extend(batch)
                if not self.stop.stopped:
                    pieces.append(self.stop.feed("".join(t.text for t in batch)))
        except RuntimeError as error:
            raise ApiError(500, str(error), "server_error") from None
        if not self.stop.stopped:
            pieces.append(self.stop.flush())
        return self.shaper.whole("".join(pieces), self._finish(done), tokens,
                                 usage(done.timing.get("prompt_tokens", 0), done))
