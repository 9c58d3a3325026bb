"""The engine thread: an asyncio loop of its own on which every model call runs.

``EngineThread`` runs jobs (``async job(should_stop, push)``) one at a time, first come
first served, and work that is no request's in short steps between them
(``between_requests``). A job may bring work that touches no model (``before``: a
grammar's trial compile, in a process of its own), done before it takes its turn, so that
work waits for nobody and nobody waits for it. ``GenerationStream`` is a job's events as
an async iterator for any caller's loop, with ``cancel()``. The rest of this module keeps
MLX from aborting the process at exit after work on a thread of its own.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from ..errors import EngineError
from ..events import DoneEvent, ErrorEvent, Event
from ..stats import with_wait

log = logging.getLogger(__name__)

# seconds shutdown() waits for the thread: a job stops at its next pass, prompt chunk or
# step, each well under a second on the models the app runs, and MLX then finishes its queue
SHUTDOWN_TIMEOUT = 10.0

Push = Callable[[Event], None]
ShouldStop = Callable[[], bool]
Job = Callable[[ShouldStop, Push], Awaitable[None]]
Before = Callable[[ShouldStop], Awaitable[None]]


class ShutsDown(Protocol):
    def shutdown(self) -> None: ...


_settled = False
_running: "weakref.WeakSet[ShutsDown]" = weakref.WeakSet()


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


def shut_down_at_exit(owner: ShutsDown) -> None:
    """Call ``owner.shutdown()`` on every exit path (an error, Ctrl-C, a caller that forgot)."""
    _running.add(owner)


@atexit.register
def _shut_down_owners() -> None:
    for owner in list(_running):
        owner.shutdown()


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
    "terminate called without an active exception". Linux lists a process's threads under
    /proc/self/task; elsewhere there is no such list and this returns at once.
    """
    task = Path(f"/proc/self/task/{native_id}")
    if native_id is None or not task.parent.is_dir():
        return
    deadline = time.monotonic() + timeout
    while task.exists() and time.monotonic() < deadline:
        time.sleep(0.002)


class GenerationStream:
    """An async iterator of events for one request, with ``cancel()``."""

    def __init__(
        self, engine: "EngineThread | None", job, queued: bool = True, before: Before | None = None
    ):
        self._engine = engine
        self._job = job  # async job(should_stop, push) run on the engine loop
        self._queued = queued  # False: runs beside the queue of model jobs (a download)
        self._before = before  # async before(should_stop): done before the job's turn
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

    def _start(self, push: Push) -> None:
        """Run the job, its events going to ``push`` (a thread-safe call)."""
        self._engine.submit(self._job, self._cancelled.is_set, push, self._queued, self._before)


class EngineThread:
    """The thread and its loop, the FIFO of jobs, and the count of requests waiting or
    running (work between requests yields to it)."""

    def __init__(self):
        _settle_mlx_at_exit()
        self.requests = 0  # submitted jobs not yet done (counted from the caller's thread)
        self._requests_lock = threading.Lock()
        self._stopping = threading.Event()  # every job's should_stop says yes once set
        self._thread_stopping = False  # stop() has asked the engine loop to stop
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="draftless-engine", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._lock = asyncio.Lock()  # asyncio locks wake waiters in FIFO order
        self._no_requests = asyncio.Event()  # set when the last request is done
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
            self.loop.run_until_complete(_cancel_pending_jobs())
        finally:
            self.loop.close()
            _finish_mlx_work()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def stop_jobs(self) -> None:
        """Every job and step, queued, running or later, stops at its next check."""
        self._stopping.set()

    def stop(self, timeout: float) -> None:
        """Stop the jobs and the loop, and wait until the thread is gone (the operating
        system's thread too). Safe to call more than once: a later call only waits."""
        if threading.current_thread() is self.thread:
            raise RuntimeError("shutdown() was called from the engine thread itself")
        if not self._thread_stopping:
            self._thread_stopping = True
            self.stop_jobs()  # a running job stops at its next pass or prompt chunk
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:  # the loop is already closed
                pass
        # A later call (atexit after Ctrl-C) only waits: stopping the loop again would cut
        # short its clean-up of the cancelled jobs.
        self.thread.join(timeout)
        if not self.thread.is_alive():
            _wait_until_thread_is_gone(self.thread.native_id, timeout)

    def submit(
        self,
        job: Job,
        should_stop: ShouldStop,
        push: Push,
        queued: bool = True,
        before: Before | None = None,
    ) -> None:
        """Run ``job`` on the engine loop: in its turn, or (``queued`` False: it touches no
        model) beside the queue. ``before(should_stop)``, if given, is awaited on the loop
        first, outside the queue; an EngineError it raises is the job's error, and the job
        does not run."""

        def stop() -> bool:
            return self._stopping.is_set() or should_stop()

        if not queued:  # touches no model: no turn to wait for, nothing to wait for it
            asyncio.run_coroutine_threadsafe(self._run_job(job, stop, push), self.loop)
            return

        submitted = time.perf_counter()
        with self._requests_lock:
            self.requests += 1
        serving = self._serve(job, stop, push, submitted, before)
        asyncio.run_coroutine_threadsafe(serving, self.loop)

    async def _serve(
        self,
        job: Job,
        should_stop: ShouldStop,
        push: Push,
        submitted: float,
        before: Before | None = None,
    ):
        """Run one job at a time (FIFO), after its ``before``; every job ends with a Done or
        an Error event, whose timing counts the time the job waited for the engine."""
        try:
            if before is not None and not should_stop():
                try:
                    await before(should_stop)
                except EngineError as error:
                    push(ErrorEvent(str(error)))
                    return
                except Exception:  # the job itself does that work again, in its turn
                    log.exception("Internal error before an engine job's turn")
            async with self._lock:
                waited = time.perf_counter() - submitted

                def push_timed(event: Event) -> None:
                    if isinstance(event, DoneEvent) and event.timing:
                        event = replace(event, timing=with_wait(event.timing, waited))
                    push(event)

                await self._run_job(job, should_stop, push_timed)
        finally:
            with self._requests_lock:
                self.requests -= 1
            if not self.requests:
                self._no_requests.set()

    async def _run_job(self, job: Job, should_stop: ShouldStop, push: Push) -> None:
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

    async def between_requests(self, step: Callable[[], bool], wanted: Callable[[], bool]) -> bool:
        """Call ``step()`` until it returns True, each call under the request lock and only
        while no request waits or runs, so a request waits at most one step. False when
        stopped first: ``wanted()`` said no (another model was loaded), or the thread stops."""
        while True:
            while self.requests:  # only this loop's thread takes the count down
                self._no_requests.clear()
                await self._no_requests.wait()
            async with self._lock:
                if self.requests:  # one arrived while this step waited for the lock
                    continue
                if not wanted() or self._stopping.is_set():
                    return False
                if step():
                    return True
            await asyncio.sleep(0)
