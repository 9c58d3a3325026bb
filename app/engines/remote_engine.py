"""The engine interface over a Draftless server (``python -m engine serve``).

``RemoteEngine`` is an ``engine.api.Engine``: ``generate(request)`` and ``load(spec)`` return
event streams with ``cancel()``, and it turns the server's OpenAI stream back into the
engine's own events: each chunk's ``draftless`` provenance becomes Token and Pass events
(the first one's ``thinking``, a think block the chat template opened, the "prefill"
Progress event that says so), the last chunk's statistics the Done event, so highlights,
gauge, thinking panel and inspector work the same.

The server is untrusted. Every chunk is checked (``app.engines.remote_reply``: token ids in the
vocabulary, types, sizes) and a bad one ends the answer with a message naming the server.
The request runs on the caller's asyncio loop (``app.engines.http_stream``), reading the next part of the reply
only once the app has taken what came before, so what is received is bounded; an answer
holds at most the Max tokens it asked for. ``cancel()`` (Stop) ends the stream at once,
wherever the request waits, and closes the connection, which the server honours at its next
pass. Connecting waits at most ``CONNECT_TIMEOUT_S`` and each read ``READ_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import h11

from engine.api import drafter_summaries
from engine.events import DoneEvent, ErrorEvent, ModelEvent, PassEvent, ProgressEvent, TokenEvent
from engine.stats import DecodeStats

from .http_stream import HttpReply, Silent, Unreachable, open_request
from .remote_reply import (
    VOCABULARY_CEILING,
    BadReply,
    Lines,
    checked_chat_id,
    checked_final,
    checked_model,
    checked_pass,
    json_value,
    shown,
    sized_list,
)

# A server on the same network accepts a connection in milliseconds; 10 s covers a link
# that is waking up, and then the person hears that the server cannot be reached.
CONNECT_TIMEOUT_S = 10.0
# The longest a server is silent while it works: a Draftless server stops a request after
# 300 s (``serve --max-request-seconds``'s default), so a longer silence means it is gone.
READ_TIMEOUT_S = 300.0
TIMEOUTS_NOTE = (
    f"Draftless waits up to {CONNECT_TIMEOUT_S:g} s to connect and {READ_TIMEOUT_S:g} s for "
    "each part of an answer; Stop ends an answer at once."
)
# Events received but not yet taken by the app: a few passes' worth (a pass is its tokens
# and one Pass event), so the request reads ahead a little and no further.
QUEUED_EVENTS = 256
# An error reply's body is read this far at most (its message is a sentence or two)
MAX_ERROR_BYTES = 64 << 10
# ``GET /v1/models``: one card per served model, a few hundred bytes each
MAX_MODELS_BYTES = 1 << 20
# SSE lines an answer of n tokens may take: a data line and a blank line per pass (at least
# one token each), a few more for the finish, usage and [DONE] chunks and keep-alives.
LINES_PER_TOKEN, EXTRA_LINES = 4, 64


def api_base(url: str) -> str:
    """``host:port``, ``http://host:port`` or ``…/v1`` → ``http://host:port/v1``."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url if url.endswith("/v1") else url + "/v1"


def request_body(request) -> dict:
    """An engine request as a chat-completions body with the ``draftless`` extension."""
    draft, sampling = request.draft, request.sampling
    body = {
        "model": "default",
        "messages": request.messages,
        "max_tokens": request.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "min_p": sampling.min_p,
        "draftless": {
            "drafter": draft.drafter,
            "draft_count": draft.draft_count,
            "ngram_order": draft.ngram_order,
            "ngram_min": draft.ngram_min,
            "adaptive": draft.adaptive,
            "options": dict(draft.options),
        },
    }
    if sampling.repetition_penalty is not None:
        body["repetition_penalty"] = sampling.repetition_penalty
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if request.chat_id is not None:
        body["chat_id"] = request.chat_id  # the server keeps this chat's KV cache
    if request.json_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": dict(request.json_schema)},
        }
    return body


# The local engine's "prefill" event for a prompt whose chat template opened a <think> block;
# the server says so in its first chunk (draftless.thinking). It comes after that chunk's
# tokens, once the answer has text: the stream does not say how long the prompt was, so the
# card's "Prompt read (N tokens)" line, shown only while an answer has no text, stays away.
TEMPLATE_OPENED_THINKING = ProgressEvent("prefill", 0, 0, "Prompt read", thinking=True)


class ServerRefused(Exception):
    """The server answered with an error status; the text is the whole message."""


class RemoteStream:
    """One request's events: an ``engine.api.EventStream`` (see the module docstring).

    ``job(push)`` runs as a task on the loop that iterates the stream and ends with a Done
    or an Error event; ``push`` waits while ``QUEUED_EVENTS`` are not yet taken. The stream
    keeps the tokens it hands out, so the Done event it gives (the server's, or its own
    "cancelled" one after ``cancel()``) holds exactly the tokens the app was given."""

    def __init__(self, job, problem, drafter: str = "none"):
        self._job = job
        self._problem = problem  # an exception -> a message naming the server
        self._queue: asyncio.Queue = asyncio.Queue(QUEUED_EVENTS)
        self._stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._cancelled = False
        self._finished = False
        self._tokens: list[int] = []
        self._flags: list[bool] = []
        self._texts: list[str] = []
        self._stats = DecodeStats(drafter=drafter)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """End the stream now (from any thread): its next event is ``DoneEvent("cancelled")``."""
        self._cancelled = True
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # the loop is closed: nobody is iterating any more
                pass

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._finished:
            raise StopAsyncIteration
        if self._task is None and not self._cancelled:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.ensure_future(self._run())
        event = None if self._cancelled else await self._next()
        if event is None:  # stopped: what was received and not taken is dropped
            self._finished = True
            await self._end_task(stop=True)
            return DoneEvent(
                "cancelled",
                "".join(self._texts),
                list(self._tokens),
                list(self._flags),
                self._stats.to_dict(),
                self._stats.timing_dict(),
            )
        return await self._hand_out(event)

    async def aclose(self) -> None:
        self.cancel()
        self._finished = True
        await self._end_task(stop=True)

    async def _next(self):
        """The next event the job pushed; None once the stream is cancelled."""
        taking = asyncio.ensure_future(self._queue.get())
        stopping = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({taking, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            taking.cancel()
        return None if self._cancelled or not taking.done() else taking.result()

    async def _run(self) -> None:
        try:
            await self._job(self._queue.put)
        except Exception as error:  # a bad reply, a lost connection: the answer ends here
            await self._queue.put(ErrorEvent(self._problem(error)))

    async def _hand_out(self, event):
        if isinstance(event, TokenEvent):
            self._tokens.append(event.token)
            self._flags.append(event.from_draft)
            self._texts.append(event.text)
        elif isinstance(event, PassEvent):
            self._stats.record_pass(event.drafted, event.accepted, event.emitted, event.seconds)
        elif isinstance(event, (DoneEvent, ErrorEvent)):
            self._finished = True
            await self._end_task(stop=False)
            if isinstance(event, DoneEvent):
                event = replace(
                    event,
                    text="".join(self._texts),
                    tokens=list(self._tokens),
                    from_draft=list(self._flags),
                )
        return event

    async def _end_task(self, stop: bool) -> None:
        """Let the request's task unwind; ``stop``: cancel it first, wherever it waits
        (which closes its connection). A task that ended its reply closes it itself."""
        task, self._task = self._task, None
        if task is None:
            return
        if stop:
            task.cancel()
        try:
            await task
        except BaseException:  # its CancelledError, or whatever it failed with meanwhile
            pass


class RemoteEngine:
    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        read_timeout: float = READ_TIMEOUT_S,
    ):
        self.url = api_base(url)
        self.headers = {"Authorization": f"Bearer {api_key or 'none'}"}
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.model_name = ""
        self.vocabulary = VOCABULARY_CEILING  # until the server's model card says
        # the app's chat id -> the id the server issued for it (the server honours only its own)
        self.server_chat_ids: dict[str, str] = {}

    @staticmethod
    def drafters() -> dict[str, str]:
        return drafter_summaries()

    def shutdown(self) -> None:
        """Nothing to let go of: each request has its own connection, closed when it ends."""

    def _problem(self, error: Exception) -> str:
        if isinstance(error, ServerRefused):
            return str(error)
        if isinstance(error, BadReply):
            return (
                f"The server at {self.url} sent a reply Draftless cannot use ({error}), so "
                "the answer was ended. Check that the address is a Draftless server."
            )
        if isinstance(error, Unreachable):
            return (
                f"Cannot reach the Draftless server at {self.url}. Check that "
                "`python -m engine serve` runs there and the address, or choose "
                "Model → Use this machine's engine."
            )
        if isinstance(error, Silent):
            return (
                f"The server at {self.url} sent nothing for {self.read_timeout:g} s, so the "
                "answer was ended. Check that the server still runs."
            )
        if isinstance(error, (OSError, h11.ProtocolError)):
            return f"The connection to the server at {self.url} failed ({error})."
        return f"The server at {self.url} failed: {error}"

    def load(self, spec=None) -> RemoteStream:
        """Check the server answers and say which model it serves (``spec`` is the
        server's business: it serves the model it was started with)."""
        return RemoteStream(self._load, self._problem)

    def generate(self, request) -> RemoteStream:
        return RemoteStream(
            lambda push: self._answer(request, push), self._problem, request.draft.drafter
        )

    async def _load(self, push) -> None:
        async with await self._request("GET", "/models") as reply:
            payload = json_value(await read_at_most(reply, MAX_MODELS_BYTES, "model list"))
        self.model_name, speculation, self.vocabulary = checked_model(payload)
        await push(ModelEvent(self.model_name, self.url, speculation))
        await push(DoneEvent("loaded", "", [], []))

    async def _answer(self, request, push) -> None:
        body = {
            **request_body(request),
            "model": self.model_name or "default",
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.chat_id is not None:
            body["chat_id"] = self.server_chat_ids.get(request.chat_id, request.chat_id)
        reading = AnswerReading(self.url, request.max_tokens, self.vocabulary)
        async with await self._request("POST", "/chat/completions", body) as reply:
            lines = Lines(reply.piece)
            while (line := await lines.next()) is not None:
                chunk = reading.chunk(line)
                if chunk is None:
                    continue
                issued = checked_chat_id(chunk.get("chat_id"))
                if issued and request.chat_id is not None:
                    self.server_chat_ids[request.chat_id] = issued
                for event in reading.events(chunk):
                    await push(event)
                    if isinstance(event, (DoneEvent, ErrorEvent)):
                        return
        await push(ErrorEvent(f"The server at {self.url} ended the answer early."))

    async def _request(self, method: str, path: str, body: dict | None = None) -> HttpReply:
        """The open reply to ``method path`` once its status is a success."""
        reply = await open_request(
            method, self.url + path, self.headers, body, self.connect_timeout, self.read_timeout
        )
        try:
            await self._check_status(reply)
        except BaseException:
            reply.close()
            raise
        return reply

    async def _check_status(self, reply: HttpReply) -> None:
        if reply.status == 401:
            raise ServerRefused(
                f"The server at {self.url} refused the API key. Check the key in "
                "Model → Connect to server…."
            )
        if reply.status >= 400:
            text = await read_at_most(reply, MAX_ERROR_BYTES, "error")
            raise ServerRefused(
                f"The server at {self.url} answered {reply.status}: {error_message(text)}"
            )


class AnswerReading:
    """The events of one answer's SSE lines, checked, within the answer's bounds."""

    def __init__(self, url: str, max_tokens: int, vocabulary: int):
        self.url = url
        self.vocabulary = vocabulary
        self.max_tokens = max_tokens
        self.tokens = 0
        self.lines_left = LINES_PER_TOKEN * max_tokens + EXTRA_LINES

    def chunk(self, line: bytes) -> dict | None:
        """The JSON object of a ``data:`` line; None for anything else (blank lines,
        comments, ``[DONE]``)."""
        self.lines_left -= 1
        if self.lines_left < 0:
            raise BadReply(f"it kept sending past the {self.max_tokens:,} tokens asked for")
        if not line.startswith(b"data:"):
            return None
        data = line[5:].strip()
        if data == b"[DONE]":
            return None
        chunk = json_value(data)
        if not isinstance(chunk, dict):
            raise BadReply("a chunk is not a JSON object")
        return chunk

    def events(self, chunk: dict) -> list:
        """Token and Pass events of one chunk, then the Done event once its usage arrives
        (or the Error event of a server that failed mid-answer)."""
        if "error" in chunk:
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            return [ErrorEvent(f"The server at {self.url} failed: {str(message)[:500]}")]
        events = []
        provenance = chunk.get("draftless")
        if provenance:
            if not isinstance(provenance, dict):
                raise BadReply(f"its pass figures are {shown(provenance)}, not an object")
            # passes that showed no text ride on the next chunk, before its own pass
            earlier = sized_list(provenance.get("earlier") or [], "the earlier passes of a chunk")
            for passed in earlier:
                events += self._pass(checked_pass(passed, self.vocabulary))
            if "pass" in provenance:
                events += self._pass(checked_pass(provenance, self.vocabulary))
        if chunk.get("usage") is not None:
            choices = chunk.get("choices")
            first = choices[0] if isinstance(choices, list) and choices else {}
            fallback = first.get("finish_reason") if isinstance(first, dict) else None
            reason, stats, timing = checked_final(chunk["usage"], fallback)
            events.append(DoneEvent(reason, "", [], [], stats, timing))
        return events

    def _pass(self, checked) -> list:
        self.tokens += len(checked.tokens)
        if self.tokens > self.max_tokens:
            raise BadReply(f"it sent more than the {self.max_tokens:,} tokens asked for")
        events = [
            TokenEvent(token, text, flag, checked.index, position, checked.drafter)
            for token, text, flag, position in zip(
                checked.tokens, checked.texts, checked.from_draft, checked.draft_position
            )
        ]
        events.append(
            PassEvent(
                checked.index,
                checked.drafted,
                checked.accepted,
                len(checked.tokens),
                checked.seconds,
                checked.tokens_per_pass,
            )
        )
        if checked.thinking:
            events.append(TEMPLATE_OPENED_THINKING)
        return events


async def read_at_most(reply: HttpReply, limit: int, what: str) -> bytes:
    data = bytearray()
    while (piece := await reply.piece()) is not None:
        data += piece
        if len(data) > limit:
            raise BadReply(f"its {what} is larger than {limit:,} bytes")
    return bytes(data)


def error_message(body: bytes) -> str:
    """The message of an OpenAI-shaped error body, else its first line (shortened)."""
    try:
        error = json_value(body).get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (BadReply, AttributeError):
        message = None
    if not isinstance(message, str):
        message = body.decode("utf-8", "replace").strip().split("\n", 1)[0]
    return message[:500] or "no message"
