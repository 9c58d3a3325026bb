"""One request's run on the engine (``Answer``): the engine's events read as they come, stop
strings applied, and handed to the reader as ``Piece``s, one per pass; OpenAI's chunks or
body built from them (Ollama's in ``ollama.py``)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace

from starlette.requests import Request

from ..events import (
    DoneEvent,
    ErrorEvent,
    PassEvent,
    ProgressEvent,
    PromptEvent,
    TokenEvent,
    ToolCallEvent,
)
from ..formats.stop_strings import StopMatcher, kept_figures
from .requests import ApiError
from .responses import FINISH, Shaper, provenance, returned_tokens, usage


def sse(body: dict | str) -> bytes:
    """One server-sent event."""
    return f"data: {body if isinstance(body, str) else json.dumps(body)}\n\n".encode()


async def cancel_on_disconnect(request: Request, answer: "Answer") -> None:
    while not await request.is_disconnected():
        await asyncio.sleep(0.2)
    answer.cancel()


def engine_failure(message: str) -> ApiError:
    """The HTTP error of an engine's error before an answer began: the request's fault (a
    400 naming the field the message begins with), unless the engine's own (a 500)."""
    if message.startswith("Internal error"):
        return ApiError(500, message, "server_error")
    return ApiError(
        400,
        message,
        code="context_length_exceeded" if "reads at most" in message else None,
        param=message.split("'")[1] if message.startswith("'") else None,
    )


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

    def __init__(self, service, parsed, shaper: Shaper, stats, release):
        self.stream = service.generate(parsed.generation)
        self.stop = StopMatcher(parsed.stop)
        self.include_usage = parsed.include_usage
        self.logprobs = parsed.generation.logprobs is not None
        self.shaper = shaper
        self.stats = stats
        self.pieces: asyncio.Queue[Piece | None] = asyncio.Queue()
        self.head: Piece | None = None
        # the chat template opened a <think> block the answer starts inside (the engine's
        # "prefill" events say so): the first chunk's draftless.thinking tells the client
        self.opened_thinking = False
        # the prompt as read, with its tokens' log-probabilities (``echo``: the answer
        # begins with it); None: not asked for
        self.prompt: PromptEvent | None = None
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
                elif isinstance(event, PromptEvent):
                    self.prompt = event
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
            return engine_failure(self.head.event.message)
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

    def _shows(self, piece: Piece, first: bool) -> bool:
        """Whether a pass's chunk has something for the client: text, tool-call progress,
        log-probabilities asked for, or (first) the chat's role or the echoed prompt."""
        return bool(
            piece.text
            or piece.deltas
            or (self.logprobs and piece.returned)
            or (first and (self.shaper.chat or self.prompt is not None))
        )

    async def chunks(self):
        """OpenAI's chunks: the role (or an echoed prompt) rides on the first, each pass's
        tokens and figures in one. A pass that shows nothing (its text held back: part of
        a character, a possible stop string or tool call) sends no empty chunk: its figures
        ride on the next chunk's ``draftless.earlier``; a pass that emitted nothing (the
        end-of-answer token's) rides on the last."""
        called, first, figures = False, True, None
        earlier: list[dict] = []  # figures of passes that showed nothing
        async for piece in self.read():
            event = piece.event
            if isinstance(event, PassEvent):
                called = called or bool(piece.calls)
                figures = {
                    **provenance(piece.tokens),
                    "pass": event.pass_index,
                    "drafted": event.drafted,
                    "accepted": event.accepted,
                    "seconds": round(event.seconds, 5),
                    "tokens_per_pass": round(event.tokens_per_pass, 4),
                }
                if not (piece.tokens or piece.text or piece.deltas):
                    continue
                if not self._shows(piece, first):
                    earlier.append(figures)
                    figures = None
                    continue
                if first and self.opened_thinking:
                    figures["thinking"] = True
                yield sse(
                    self.shaper.chunk(
                        piece.text,
                        tokens=piece.tokens[: piece.returned],
                        deltas=piece.deltas,
                        extra=_figures(figures, earlier),
                        first=first,
                        prompt=self.prompt if first else None,
                    )
                )
                first, figures, earlier = False, None, []
            elif isinstance(event, DoneEvent):
                yield sse(
                    self.shaper.chunk(
                        piece.text,
                        self.finish(event, called),
                        extra=_figures(figures, earlier),
                        first=first,
                        prompt=self.prompt if first else None,
                    )
                )
                if self.include_usage:  # the engine's statistics ride in usage.draftless
                    yield sse(
                        self.shaper.usage_chunk(
                            usage(
                                event.timing.get("prompt_tokens", 0), event, piece.completion_tokens
                            )
                        )
                    )
                break
            else:  # the engine failed mid-answer
                yield sse(
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
        yield sse("[DONE]")

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
            self.prompt,
        )


def _figures(figures: dict | None, earlier: list[dict]) -> dict | None:
    """A chunk's ``draftless`` object: its pass's figures, with those of the passes before
    it that showed nothing."""
    if figures is None and not earlier:
        return None
    shown = dict(figures or {})
    if earlier:
        shown["earlier"] = earlier
    return {"draftless": shown}
