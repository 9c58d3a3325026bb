"""The engine thread: an asyncio loop of its own that owns the model.

``EngineService.generate(request)`` returns a ``GenerationStream``: iterate it with
``async for`` from any asyncio loop (the app's qasync loop, a test's loop), and call
``cancel()`` on it to stop between passes. Requests run one at a time, first come first
served. The engine never sees Qt; callers never see MLX.

The service owns what the engine learns across chats (``EngineMemory``: cost curves,
acceptance trackers, n-gram stores, model tables) and hands it to every chat session;
``shutdown()`` saves what is kept in files. Work that is not any request's runs between
answers in short steps (``_between_requests``): no step starts while a request waits or
runs, so a request waits at most one step for it. Two kinds:
- a model whose verify cost was never measured on this machine answers at once on a prior
  curve, while the service measures it (one timed pass, or one chunk of its context no
  longer than the longest timed pass, a step);
- a model table a request asked for and that was not built yet (the N-Grammys bigram): the
  request answers without it, and the service builds it (``BUILD_ROWS`` tokens a step);
  the next request after it is built gets it.
A request's own long work (a download, reading the prompt, a table built inline, decoding,
a replay) checks its ``should_stop`` (cancel, the server's time limit, shutdown) between
short steps. An answer's first-token time counts from the request, and says how much of it
was waiting.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import replace
from collections.abc import Callable
from pathlib import Path

from .decode import Target
from .drafters import DRAFTERS, make_drafter
from .errors import EngineError
from .events import DoneEvent, ErrorEvent, Event, ModelEvent, ProgressEvent, ReplayEvent
from .memory import EngineMemory
from .model_ngrams import ModelTables, model_key
from .models import HUB_ID, download_from_hub, load_model
from .replay import replay_request
from .session import ChatSession
from .settings import DraftSettings, GenerationRequest
from .stats import with_wait
from .verify_cost import MEASURE_CONTEXT

log = logging.getLogger(__name__)

MAX_KEPT_CHATS = 8


def _settle_mlx_at_exit() -> None:
    """Keep MLX from aborting the process at exit after work on the engine thread.

    With mlx 0.32 on Linux, a process that loaded a model on a worker thread can die at
    exit with "terminate called without an active exception". Importing mlx_lm.generate
    (which makes a thread-local stream) on the caller's thread and synchronising MLX there
    before interpreter teardown prevents it.
    """
    global _settled
    if _settled:
        return
    import mlx.core as mx
    import mlx_lm.generate  # noqa: F401

    atexit.register(mx.synchronize)
    _settled = True


_settled = False
_running: "weakref.WeakSet[EngineService]" = weakref.WeakSet()
SHUTDOWN_TIMEOUT = 10.0


@atexit.register
def _shut_down_services() -> None:
    """Every exit path (an error, Ctrl-C, a caller that forgot) stops the engine threads."""
    for service in list(_running):
        service.shutdown()


async def _cancel_pending_jobs() -> None:
    """Cancel what is left on the stopped engine loop, so no task is destroyed pending."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _finish_mlx_work() -> None:
    """The engine thread's last MLX call: wait for its queued work before it exits."""
    import mlx.core as mx

    mx.synchronize()


def _wait_until_thread_is_gone(native_id: int | None, timeout: float) -> None:
    """Wait for the operating-system thread, not just its Python part, to have exited.

    ``Thread.join`` returns once the thread's Python state is gone, but its C++
    thread-local destructors (MLX's per-thread streams) run after that and need the GIL;
    if they run while the main thread is finalizing Python, the process aborts with
    "terminate called without an active exception". Linux lists a process's threads under /proc/self/task; elsewhere
    there is no such list and this returns at once.
    """
    task = Path(f"/proc/self/task/{native_id}")
    if native_id is None or not task.parent.is_dir():
        return
    deadline = time.monotonic() + timeout
    while task.exists() and time.monotonic() < deadline:
        time.sleep(0.002)


class GenerationStream:
    """An async iterator of events for one request, with ``cancel()``."""

    def __init__(self, service: "EngineService", job, queued: bool = True):
        self._service = service
        self._job = job  # async job(should_stop, push) run on the engine loop
        self._queued = queued  # False: runs beside the queue of model jobs (a download)
        self._cancelled = threading.Event()
        self._queue: asyncio.Queue | None = None
        self._finished = False

    def cancel(self) -> None:
        """Stop after the current pass (or before starting, if still queued)."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def __aiter__(self):
        return self

    async def __anext__(self) -> Event:
        if self._finished:
            raise StopAsyncIteration
        if self._queue is None:
            loop = asyncio.get_running_loop()
            self._queue = asyncio.Queue()
            queue = self._queue

            def push(event: Event) -> None:
                if loop.is_closed():  # the caller went away; nobody is listening
                    self.cancel()
                    return
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, event)
                except RuntimeError:  # closed between the check and the call
                    self.cancel()

            self._start(push)
        event = await self._queue.get()
        if isinstance(event, (DoneEvent, ErrorEvent)):
            self._finished = True
        return event

    async def aclose(self) -> None:
        self.cancel()
        self._finished = True

    def _start(self, push: Callable[[Event], None]) -> None:
        """Run the job, its events going to ``push`` (a thread-safe call)."""
        self._service._submit(self._job, self._cancelled.is_set, push, self._queued)


class EngineService:
    """Owns the engine thread, the loaded model and the kept chat sessions."""

    def __init__(self, build_tables_inline: bool = False):
        """``build_tables_inline``: a request that needs a model table not built yet builds
        it itself (for one caller that waits anyway, as the command line's one answer);
        by default the service builds it between requests."""
        _settle_mlx_at_exit()
        self.memory = EngineMemory(tables=ModelTables(inline=build_tables_inline))
        self._calibration: asyncio.Task | None = None
        self._table_builds: asyncio.Task | None = None
        self._requests = 0  # submitted jobs not yet done (counted from the caller's thread)
        self._requests_lock = threading.Lock()
        self._stopping = threading.Event()  # every job's should_stop says yes once set
        self._thread_stopping = False  # shutdown() has asked the engine loop to stop
        _running.add(self)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="draftless-engine", daemon=True)
        self._thread.start()
        self._ready.wait()
        self._loaded = None
        self._loaded_spec: object = ()
        # kept chats by (client, chat id): one client never names another's chat
        self._sessions: OrderedDict[tuple[str | None, str], ChatSession] = OrderedDict()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._lock = asyncio.Lock()  # asyncio locks wake waiters in FIFO order
        self._no_requests = asyncio.Event()  # set when the last request is done
        self._loop.call_soon(self._ready.set)
        try:
            self._loop.run_forever()
            self._loop.run_until_complete(_cancel_pending_jobs())
        finally:
            self._loop.close()
            _finish_mlx_work()

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Answer ``request``: Progress/Model events while loading, then Token and Pass
        events, then one Done (or Error) event."""
        return GenerationStream(
            self, lambda should_stop, push: self._answer(request, should_stop, push)
        )

    def load(self, model: str | None = None) -> GenerationStream:
        """Load (converting if needed) a model ahead of the first message; ends with
        ``DoneEvent(finish_reason="loaded")``."""

        async def job(should_stop, push):
            self._ensure_model(model, push, should_stop)  # cancel() stops a download
            push(DoneEvent("loaded", "", [], []))

        return GenerationStream(self, job)

    def replay(
        self,
        request: GenerationRequest,
        answer_tokens: list[int],
        ended: bool,
        configs,
        greedy: bool | None = None,
    ) -> GenerationStream:
        """Replay drafter settings ``configs`` over a finished answer to ``request``:
        one ``ReplayEvent``, then ``DoneEvent(finish_reason="replayed")``."""

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
            )
            if should_stop():  # some configurations were not replayed
                push(DoneEvent("cancelled", "", [], []))
                return
            push(ReplayEvent([r.to_dict() for r in results]))
            push(DoneEvent("replayed", "", [], []))

        return GenerationStream(self, job)

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

        return GenerationStream(self, job, queued=False)

    @staticmethod
    def drafters() -> dict[str, str]:
        return {name: cls.summary for name, cls in DRAFTERS.items()}

    def build_tables_for(self, draft: DraftSettings) -> None:
        """Start building, between requests, the loaded model's tables that ``draft``'s
        drafter uses and that are not built yet (a server calls it for its default drafter
        once the model is loaded, so the first requests find them sooner)."""

        def start() -> None:
            loaded = self._loaded
            if loaded is None or not make_drafter(draft.validated()).wants_model_bigram:
                return
            self.memory.tables.bigram(loaded, model_key(loaded))
            self._build_tables_later()

        self._loop.call_soon_threadsafe(start)

    def stop_jobs(self) -> None:
        """Cancel queued and running jobs and the background work, without waiting: each
        stops at its next pass, prompt chunk or step and ends with a Done("cancelled"), and
        every later job ends so at once. A server calls it when told to stop, so its open
        requests end before it closes their connections; ``shutdown()`` calls it too."""
        self._stopping.set()

    def shutdown(self, timeout: float = SHUTDOWN_TIMEOUT) -> None:
        """Stop the engine thread: cancel queued and running jobs (between passes) and the
        background work, let it finish its MLX work, and wait until the thread is gone, so
        none of it runs while the interpreter tears down; then save what is kept in files.
        Safe to call more than once; also run at exit."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("shutdown() was called from the engine thread itself")
        if not self._thread_stopping:
            self._thread_stopping = True
            self.stop_jobs()  # a running job stops at its next pass or prompt chunk
            try:
                self._loop.call_soon_threadsafe(self._loop.stop)
            except RuntimeError:  # the loop is already closed
                pass
        # A later call (atexit after Ctrl-C) only waits: stopping the loop again would cut
        # short its clean-up of the cancelled jobs.
        self._thread.join(timeout)
        if not self._thread.is_alive():
            _wait_until_thread_is_gone(self._thread.native_id, timeout)
        for session in list(self._sessions.values()):
            if session.drafter is not None:
                session.drafter.flush()
        self.memory.flush()

    def _submit(
        self,
        job,
        should_stop: Callable[[], bool],
        push: Callable[[Event], None],
        queued: bool = True,
    ) -> None:
        def stop() -> bool:
            return self._stopping.is_set() or should_stop()

        if not queued:  # touches no model: no turn to wait for, nothing to wait for it
            asyncio.run_coroutine_threadsafe(self._run_job(job, stop, push), self._loop)
            return

        submitted = time.perf_counter()
        with self._requests_lock:
            self._requests += 1
        asyncio.run_coroutine_threadsafe(self._serve(job, stop, push, submitted), self._loop)

    async def _answer(self, request: GenerationRequest, should_stop, push) -> None:
        request = request.validated()
        self._ensure_model(request.model, push, should_stop)
        session = self._session(request)
        try:
            for event in session.generate(request, should_stop):
                push(event)
                await asyncio.sleep(0)
        except BaseException:
            # its cache may be half-updated
            self._sessions.pop((request.client, request.chat_id), None)
            raise
        self._calibrate_later()
        self._build_tables_later()

    async def _serve(self, job, should_stop, push, submitted: float) -> None:
        """Run one job at a time (FIFO); every job ends with a Done or an Error event, whose
        timing counts the time the job waited for the engine."""
        try:
            async with self._lock:
                waited = time.perf_counter() - submitted

                def push_timed(event: Event) -> None:
                    if isinstance(event, DoneEvent) and event.timing:
                        event = replace(event, timing=with_wait(event.timing, waited))
                    push(event)

                await self._run_job(job, should_stop, push_timed)
        finally:
            with self._requests_lock:
                self._requests -= 1
            if not self._requests:
                self._no_requests.set()

    async def _run_job(self, job, should_stop, push) -> None:
        try:
            if should_stop():
                push(DoneEvent("cancelled", "", [], []))
                return
            await job(should_stop, push)
        except EngineError as error:
            push(ErrorEvent(str(error)))
        except Exception as error:  # never leave a caller waiting forever
            log.exception("Internal error in an engine job")  # the server rate-limits this log
            push(
                ErrorEvent(
                    f"Internal error ({type(error).__name__}: {error}). "
                    "Please report it with the log."
                )
            )

    def _calibrate_later(self) -> None:
        """Measure the loaded model's verify cost in the background, if never measured."""
        loaded = self._loaded
        if (
            loaded is None
            or not loaded.speculates
            or (self._calibration is not None and not self._calibration.done())
            or self.memory.adaptive.measured(model_key(loaded))
        ):
            return
        self._calibration = self._loop.create_task(self._calibrate(loaded))

    def _new_target(self, model) -> Target:
        """A model call site with a cache of its own (a distributed service mirrors it)."""
        return Target(model)

    async def _between_requests(self, loaded, step: Callable[[], bool]) -> bool:
        """Call ``step()`` until it returns True, each call under the request lock and only
        while no request waits or runs, so a request waits at most one step. False when
        stopped first: another model was loaded, or the service stops."""
        while True:
            while self._requests:  # only this loop's thread takes the count down
                self._no_requests.clear()
                await self._no_requests.wait()
            async with self._lock:
                if self._requests:  # one arrived while this step waited for the lock
                    continue
                if self._loaded is not loaded or self._stopping.is_set():
                    return False
                if step():
                    return True
            await asyncio.sleep(0)

    async def _calibrate(self, loaded) -> None:
        """Measure in short steps (``AdaptiveMemory.measure_in_steps``) between requests."""
        target = self._new_target(loaded.model)
        context = min(MEASURE_CONTEXT, loaded.context_length // 2)
        steps = self.memory.adaptive.measure_in_steps(model_key(loaded), target, context)

        finished = object()

        def step() -> bool:
            """One pass; True once the curve is measured and saved."""
            return next(steps, finished) is finished

        try:
            if not await self._between_requests(loaded, step):
                return
            log.info("Verify cost of %s measured in the background.", loaded.name)
        except asyncio.CancelledError:
            raise
        except Exception:  # measuring is an optimisation: the prior curve keeps working
            log.exception("Could not measure the verify cost of %s", loaded.name)

    def _build_tables_later(self) -> None:
        """Build the loaded model's tables that requests asked for, in the background."""
        loaded = self._loaded
        if (
            loaded is None
            or (self._table_builds is not None and not self._table_builds.done())
            or self.memory.tables.pending(loaded.model) is None
        ):
            return
        self._table_builds = self._loop.create_task(self._build_tables(loaded))

    async def _build_tables(self, loaded) -> None:
        """Every owed table of ``loaded``, in steps of ``BigramBuild.step`` between requests."""
        tables = self.memory.tables
        while (build := tables.pending(loaded.model)) is not None:
            log.info("Building the bigram table of %s in the background.", loaded.name)
            try:
                if not await self._between_requests(loaded, build.step):
                    return
            except asyncio.CancelledError:
                raise
            except Exception:  # a table is an optimisation: drafting goes on without it
                log.exception("Could not build the bigram table of %s", loaded.name)
                tables.drop(build)
                return
            log.info("The bigram table of %s is ready.", loaded.name)

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
            self._sessions.clear()
            self._loaded, self._loaded_spec = loaded, spec
            self._loop.call_soon(self._calibrate_later)  # runs once this job lets go of the lock
        loaded = self._loaded
        push(
            ModelEvent(
                loaded.name, str(loaded.path), loaded.speculation, loaded.details, loaded.facts
            )
        )

    def _session(self, request: GenerationRequest) -> ChatSession:
        def new() -> ChatSession:
            return ChatSession(self._loaded, self.memory, self._new_target, request.client)

        if request.chat_id is None:
            return new()
        key = (request.client, request.chat_id)
        session = self._sessions.pop(key, None) or new()
        self._sessions[key] = session
        while len(self._sessions) > MAX_KEPT_CHATS:
            self._evict_one()
        return session

    def _evict_one(self) -> None:
        """Forget the least recently used chat of the client who keeps the most, so one
        client opening chat after chat evicts its own, not another's."""
        clients: dict[str | None, list] = {}
        for key in self._sessions:  # oldest first
            clients.setdefault(key[0], []).append(key)
        busiest = max(clients.values(), key=len)
        del self._sessions[busiest[0]]
