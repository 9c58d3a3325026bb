"""The engine thread: an asyncio loop of its own that owns the model.

``EngineService.generate(request)`` returns a ``GenerationStream``: iterate it with
``async for`` from any asyncio loop (the app's qasync loop, a test's loop), and call
``cancel()`` on it to stop between passes. Requests run one at a time, first come first
served. The engine never sees Qt; callers never see MLX.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable

from .errors import EngineError
from .events import DoneEvent, ErrorEvent, Event, ModelEvent, ProgressEvent
from .settings import GenerationRequest

MAX_KEPT_CHATS = 8


def _settle_mlx_at_exit() -> None:
    """Keep MLX from aborting the process at exit after work on the engine thread.

    Seen with mlx 0.32 on Linux: a process that loaded a model on a worker thread often
    died at exit with "terminate called without an active exception" (8 of 10 runs).
    Importing mlx_lm.generate (which makes a thread-local stream) on the caller's thread
    and synchronising MLX there before interpreter teardown stopped it (0 of 12).
    """
    global _settled
    if _settled:
        return
    import mlx.core as mx
    import mlx_lm.generate  # noqa: F401

    atexit.register(mx.synchronize)
    _settled = True


_settled = False


class GenerationStream:
    """An async iterator of events for one request, with ``cancel()``."""

    def __init__(self, service: "EngineService", job):
        self._service = service
        self._job = job  # async job(should_stop, push) run on the engine loop
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

            self._service._submit(self._job, self._cancelled.is_set, push)
        event = await self._queue.get()
        if isinstance(event, (DoneEvent, ErrorEvent)):
            self._finished = True
        return event

    async def aclose(self) -> None:
        self.cancel()
        self._finished = True


class EngineService:
    """Owns the engine thread, the loaded model and the kept chat sessions."""

    def __init__(self):
        _settle_mlx_at_exit()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="draftless-engine", daemon=True)
        self._thread.start()
        self._ready.wait()
        self._loaded = None
        self._loaded_spec: object = ()
        self._sessions: OrderedDict[str, object] = OrderedDict()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._lock = asyncio.Lock()  # asyncio locks wake waiters in FIFO order
        self._loop.call_soon(self._ready.set)
        self._loop.run_forever()

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Answer ``request``: Progress/Model events while loading, then Token and Pass
        events, then one Done (or Error) event."""
        return GenerationStream(self, lambda should_stop, push: self._answer(request, should_stop, push))

    def load(self, model: str | None = None) -> GenerationStream:
        """Load (converting if needed) a model ahead of the first message; ends with
        ``DoneEvent(finish_reason="loaded")``."""
        async def job(should_stop, push):
            self._ensure_model(model, push)
            push(DoneEvent("loaded", "", [], []))

        return GenerationStream(self, job)

    @staticmethod
    def drafters() -> dict[str, str]:
        from .drafters import DRAFTERS

        return {name: cls.summary for name, cls in DRAFTERS.items()}

    def shutdown(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)

    def _submit(self, job, should_stop: Callable[[], bool], push: Callable[[Event], None]) -> None:
        asyncio.run_coroutine_threadsafe(self._serve(job, should_stop, push), self._loop)

    async def _answer(self, request: GenerationRequest, should_stop, push) -> None:
        request = request.validated()
        self._ensure_model(request.model, push)
        session = self._session(request.chat_id)
        try:
            for event in session.generate(request, should_stop):
                push(event)
                await asyncio.sleep(0)
        except BaseException:
            self._sessions.pop(request.chat_id, None)  # its cache may be half-updated
            raise

    async def _serve(self, job, should_stop, push) -> None:
        """Run one job at a time (FIFO); every job ends with a Done or an Error event."""
        async with self._lock:
            try:
                if should_stop():
                    push(DoneEvent("cancelled", "", [], []))
                    return
                await job(should_stop, push)
            except EngineError as error:
                push(ErrorEvent(str(error)))
            except Exception as error:  # never leave a caller waiting forever
                traceback.print_exc()
                push(ErrorEvent(f"Internal error ({type(error).__name__}: {error}). "
                                "Please report it with the log."))

    def _ensure_model(self, spec, push) -> None:
        """Load ``spec`` unless it is already loaded; the previous model stays loaded until
        the new one has loaded, so a failed load changes nothing. Always says which model
        answers (a ModelEvent)."""
        from .models import load_model

        if self._loaded is None or spec != self._loaded_spec:
            stage = "convert"

            def progress(done, total, message):
                nonlocal stage
                if message.startswith("Loading"):
                    stage = "load"
                elif message.startswith("Downloading"):
                    stage = "download"
                push(ProgressEvent(stage, done, total, message))

            loaded = load_model(spec, progress)
            self._sessions.clear()
            self._loaded, self._loaded_spec = loaded, spec
        loaded = self._loaded
        push(ModelEvent(loaded.name, str(loaded.path), loaded.speculation, loaded.details))

    def _session(self, chat_id: str | None):
        from .session import ChatSession

        if chat_id is None:
            return ChatSession(self._loaded)
        session = self._sessions.pop(chat_id, None) or ChatSession(self._loaded)
        self._sessions[chat_id] = session
        while len(self._sessions) > MAX_KEPT_CHATS:
            self._sessions.popitem(last=False)
        return session
