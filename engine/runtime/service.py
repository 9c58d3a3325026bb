"""The engine service: the one async API the app, the command line and the server call.

``EngineService.generate(request)`` returns a ``GenerationStream``: iterate it with
``async for`` from any asyncio loop (the app's qasync loop, a test's loop), and call
``cancel()`` on it to stop between passes. Requests run one at a time, first come first
served, on the engine thread (``engine_thread``). The engine never sees Qt; callers never
see MLX.

The service owns the loaded model, the kept chats (``session_cache``) and what the engine
learns across chats (``EngineMemory``: cost curves, acceptance trackers, n-gram stores,
model tables), which it hands to every chat session; ``shutdown()`` saves what is kept in
files. What no request owns (measuring a model's verify cost, building a table a request
asked for) its ``Calibrator`` does between answers (``calibration``). A request's own long
work (a download, reading the prompt, a table built inline, decoding, a replay) checks its
``should_stop`` (cancel, the server's time limit, shutdown) between short steps. An
answer's first-token time counts from the request, and says how much of it was waiting.
"""

from __future__ import annotations

import asyncio
import threading

from ..api import drafter_summaries
from ..errors import EngineError
from ..formats.grammar import trial_compile
from ..events import DoneEvent, EmbeddingEvent, ModelEvent, ProgressEvent, ReplayEvent
from ..loop.decode import Target
from ..loop.scoring import embedding
from ..models import HUB_ID, download_from_hub, load_model
from ..policy.calibrated_policy import PolicyMemory
from ..settings import DraftSettings, GenerationRequest
from ..tokens import output_size
from .calibration import Calibrator
from .engine_thread import SHUTDOWN_TIMEOUT, EngineThread, GenerationStream, shut_down_at_exit
from .memory import EngineMemory
from .model_ngrams import ModelTables, model_key
from .replay import replay_request
from .session import ChatSession, grammar_for
from .session_cache import SessionCache

__all__ = ["EngineService", "GenerationStream"]


def embedding_tokens(loaded, given, index: int, truncate: bool) -> list[int]:
    """An embedding input's tokens: text encoded, or ids checked against the vocabulary;
    cut to the model's context where ``truncate`` allows, else an error naming it."""
    if isinstance(given, str):
        tokens = list(loaded.tokenizer.encode(given))
    else:
        tokens = list(given)
        vocabulary = output_size(loaded.model)
        if any(not 0 <= t < vocabulary for t in tokens):
            raise EngineError(f"input[{index}] holds a token id outside 0 to {vocabulary - 1}.")
    if not tokens:
        raise EngineError(f"input[{index}] is empty: there is nothing to embed.")
    if len(tokens) > loaded.context_length:
        if not truncate:
            raise EngineError(
                f"input[{index}] is {len(tokens)} tokens; {loaded.name} reads at most "
                f"{loaded.context_length} (send truncate: true to cut it)."
            )
        tokens = tokens[: loaded.context_length]
    return tokens


class EngineService:
    """Owns the engine thread, the loaded model and the kept chat sessions: an
    ``engine.api.LocalEngine``."""

    embeds = True  # a model split over several machines cannot run outside the lockstep

    def __init__(self, build_tables_inline: bool = False):
        """``build_tables_inline``: a request that needs a model table not built yet builds
        it itself (for one caller that waits anyway, as the command line's one answer);
        by default the calibrator builds it between requests."""
        # what the policy learned is kept across launches (engine.policy.acceptance_store)
        self.memory = EngineMemory(
            adaptive=PolicyMemory(persist=True), tables=ModelTables(inline=build_tables_inline)
        )
        self.engine_thread = EngineThread()
        self._loaded = None
        self._loaded_spec: object = ()
        self.sessions = SessionCache()
        self.calibrator = Calibrator(
            self.engine_thread, self.memory, lambda: self._loaded, self._new_target
        )
        shut_down_at_exit(self)

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Answer ``request``: Progress/Model events while loading, then Token and Pass
        events, then one Done (or Error) event."""
        return GenerationStream(
            self.engine_thread,
            lambda should_stop, push: self._answer(request, should_stop, push),
            before=lambda should_stop: self.prepare(request, should_stop),
        )

    def load(self, model: str | None = None) -> GenerationStream:
        """Load (converting if needed) a model ahead of the first message; ends with
        ``DoneEvent(finish_reason="loaded")``."""

        async def job(should_stop, push):
            self._ensure_model(model, push, should_stop)  # cancel() stops a download
            push(DoneEvent("loaded", "", [], []))

        return GenerationStream(self.engine_thread, job)

    def replay(
        self,
        request: GenerationRequest,
        answer_tokens: list[int],
        ended: bool,
        configs,
        greedy: bool | None = None,
    ) -> GenerationStream:
        """Replay drafter settings ``configs`` over a finished answer to ``request``:
        one ``ReplayEvent`` (its ``ReplayOutcome``s, best first), then
        ``DoneEvent(finish_reason="replayed")``."""

        async def job(should_stop, push):
            checked = request.validated()
            self._ensure_model(checked.model, push, should_stop)
            results = replay_request(
                self._loaded,
                checked,
                answer_tokens,
                ended,
                configs,
                greedy,
                memory=self.memory.adaptive,
                should_stop=should_stop,
                tables=self.memory.tables,
            )
            if should_stop():  # some configurations were not replayed
                push(DoneEvent("cancelled", "", [], []))
                return
            push(ReplayEvent([result.outcome() for result in results]))
            push(DoneEvent("replayed", "", [], []))

        return GenerationStream(self.engine_thread, job)

    def measure(self, model: str | None = None) -> GenerationStream:
        """Measure the verify cost of ``model`` (loading it if needed) on this machine now,
        where it never was: what the calibrator does between requests, for a caller that
        will not wait for that (the command line after its one answer). Progress events
        ("measure"), then ``DoneEvent("measured")``; ``cancel()`` stops it between passes
        (the curve is then left as it was, a guess)."""

        async def job(should_stop, push):
            self._ensure_model(model, push, should_stop)
            loaded = self._loaded
            if loaded.speculates and not self.memory.adaptive.measured(model_key(loaded)):
                message = f"Measuring how fast {loaded.name} checks drafts (once on this machine)"
                chats = [s for s in self.sessions if s.loaded is loaded]  # their context: no
                target = chats[-1].target if chats else None  # prompt is read for it
                for done, total in self.calibrator.measurement(loaded, target):
                    push(ProgressEvent("measure", done, total, message))
                    if should_stop():
                        push(DoneEvent("cancelled", "", [], []))
                        return
                    await asyncio.sleep(0)
            push(DoneEvent("measured", "", [], []))

        return GenerationStream(self.engine_thread, job)

    def download(self, repo_id: str) -> GenerationStream:
        """Download a Hugging Face model into the downloads folder (resuming what an
        earlier download left) in a thread of its own, beside answers: Progress events in
        bytes, then ``DoneEvent("downloaded", folder)``; ``cancel()`` stops it within about
        a second and keeps the bytes for the next time. Loading it is ``load(repo_id)``."""

        async def job(should_stop, push):
            if not HUB_ID.match(repo_id):
                raise EngineError(
                    f"{repo_id!r} is not a Hugging Face model id (owner/name, for example "
                    "mlx-community/SmolLM2-360M-Instruct)."
                )

            def progress(done, total, message):
                push(ProgressEvent("download", done, total, message))

            folder = await asyncio.to_thread(download_from_hub, repo_id, progress, should_stop)
            push(DoneEvent("downloaded", str(folder), [], []))

        return GenerationStream(self.engine_thread, job, queued=False)

    def embed(
        self, inputs: list, model: str | None = None, truncate: bool = True
    ) -> GenerationStream:
        """Embed each input (text, or the model's token ids: ``scoring.embedding``): one
        ``EmbeddingEvent``, then ``DoneEvent("embedded")``. An input longer than the
        model's context is cut to it (``truncate``) or refused."""

        async def job(should_stop, push):
            if not self.embeds:
                raise EngineError(
                    "This server's model is split over several machines: it does not embed."
                )
            self._ensure_model(model, push, should_stop)
            loaded = self._loaded
            vectors, read = [], 0
            for index, given in enumerate(inputs):
                if should_stop():
                    push(DoneEvent("cancelled", "", [], []))
                    return
                tokens = embedding_tokens(loaded, given, index, truncate)
                vectors.append(embedding(loaded.model, tokens))
                read += len(tokens)
                await asyncio.sleep(0)
            push(EmbeddingEvent(vectors, read))
            push(DoneEvent("embedded", "", [], []))

        return GenerationStream(self.engine_thread, job)

    def count_tokens(self, text: str) -> int | None:
        """How many tokens ``text`` is for the loaded model (None before one has loaded):
        what an attached file will cost, said before it is sent. Runs on the caller's thread
        (the app's worker): encoding reads the tokenizer's tables and changes nothing, so it
        does not wait behind an answer on the engine thread."""
        loaded = self._loaded
        if loaded is None:
            return None
        return len(loaded.tokenizer.encode(text, add_special_tokens=False))

    @staticmethod
    def drafters() -> dict[str, str]:
        return drafter_summaries()

    def build_tables_for(self, draft: DraftSettings) -> None:
        """Start building, between requests, the loaded model's tables that ``draft``'s
        drafter uses and that are not built yet (a server calls it for its default drafter
        once the model is loaded, so the first requests find them sooner)."""
        self.calibrator.build_tables_for(draft)

    def stop_jobs(self) -> None:
        """Cancel queued and running jobs and the background work, without waiting: each
        stops at its next pass, prompt chunk or step and ends with a Done("cancelled"), and
        every later job ends so at once. A server calls it when told to stop, so its open
        requests end before it closes their connections; ``shutdown()`` calls it too."""
        self.engine_thread.stop_jobs()

    def shutdown(self, timeout: float = SHUTDOWN_TIMEOUT) -> None:
        """Stop the engine thread: cancel queued and running jobs (between passes) and the
        background work, let it finish its MLX work, and wait until the thread is gone, so
        none of it runs while the interpreter tears down; then save what is kept in files.
        Safe to call more than once; also run at exit."""
        self.engine_thread.stop(timeout)
        for session in self.sessions:
            if session.drafter is not None:
                session.drafter.flush()
        self.memory.flush()

    async def prepare(self, request: GenerationRequest, should_stop=lambda: False) -> None:
        """What ``request`` needs done before its turn that touches no model: the trial
        compile of the grammar its answer must follow, on a thread, where the model it asks
        for is loaded; an EngineError where the request cannot be answered. A grammar past
        its budget then costs its own request's time, not every other request's (the
        128-regex schema held the engine's turn 1.1-1.3 s under tests.hostile_load's 16
        streaming clients). ``generate`` does it before the job's turn on the engine; the
        server before the request's turn in its queue. Cancelled, it stops the compile."""
        loaded = self._loaded
        if loaded is None or not request.wants_grammar:
            return
        request = request.validated()
        if request.model != self._loaded_spec:
            return
        cancelled = threading.Event()

        def trial() -> None:  # the grammar made, then compiled: neither on the caller's loop
            wanted = grammar_for(loaded, request)
            if wanted is not None:
                grammar, field = wanted
                size = output_size(loaded.model)
                stop = lambda: cancelled.is_set() or should_stop()  # noqa: E731
                trial_compile(loaded.tokenizer, grammar, size, field, stop)

        try:
            await asyncio.to_thread(trial)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def _answer(self, request: GenerationRequest, should_stop, push) -> None:
        request = request.validated()
        self._ensure_model(request.model, push, should_stop)

        def new_session() -> ChatSession:
            return ChatSession(self._loaded, self.memory, self._new_target, request.client)

        session = self.sessions.session(request.client, request.chat_id, new_session)
        try:
            for event in session.generate(request, should_stop):
                push(event)
                await asyncio.sleep(0)
        except BaseException:
            self.sessions.forget(request.client, request.chat_id)  # its cache may be half-updated
            raise
        self.calibrator.after_answer()
        self.memory.adaptive.save_acceptance()

    def _new_target(self, model) -> Target:
        """A model call site with a cache of its own (a distributed service mirrors it)."""
        return Target(model)

    def _ensure_model(self, spec, push, should_stop=None) -> None:
        """Load ``spec`` unless it is already loaded; the previous model stays loaded until
        the new one has loaded, so a failed load changes nothing. Always says which model
        answers (a ModelEvent)."""
        if self._loaded is None or spec != self._loaded_spec:
            stage = "convert"

            def progress(done, total, message):
                nonlocal stage
                if message.startswith("Loading"):
                    stage = "load"
                elif message.startswith("Downloading"):
                    stage = "download"
                push(ProgressEvent(stage, done, total, message))

            loaded = load_model(spec, progress, should_stop)
            self.sessions.clear()
            self._loaded, self._loaded_spec = loaded, spec
            # runs once this job lets go of the engine thread
            self.engine_thread.loop.call_soon(self.calibrator.measure_later)
        loaded = self._loaded
        push(
            ModelEvent(
                loaded.name, str(loaded.path), loaded.speculation, loaded.details, loaded.facts
            )
        )
