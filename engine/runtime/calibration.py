"""Readying the loaded model between requests, in short steps on the engine thread.

Work that is not any request's runs between answers (``EngineThread.between_requests``):
no step starts while a request waits or runs, so a request waits at most one step for it.
Two kinds:
- a model whose verify cost was never measured on this machine answers at once on a prior
  curve, while the calibrator measures it (one timed pass, or one chunk of its context no
  longer than the longest timed pass, a step);
- a model table a request asked for and that was not built yet (the N-Grammys bigram,
  ``BUILD_ROWS`` tokens a step; suffix-static's n-gram table of the tokenizer, a chunk of the
  corpus or a part of the counting a step): the request answers without it, and the
  calibrator builds it; the next request after it is built gets it.
Either stops, between steps, when another model is loaded or the engine thread stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..drafters import make_drafter
from ..policy.verify_cost import MEASURE_CONTEXT
from ..settings import DraftSettings
from .model_ngrams import model_key, wanted_tables

if TYPE_CHECKING:
    from ..loop.decode import Target
    from ..models import LoadedModel
    from .engine_thread import EngineThread
    from .memory import EngineMemory

log = logging.getLogger(__name__)


class Calibrator:
    """Measures the loaded model's verify cost and builds the model tables requests asked
    for, between requests. ``loaded()`` is the model loaded now (None: none yet);
    ``new_target(model)`` makes a model call site with a cache of its own."""

    def __init__(
        self,
        engine: EngineThread,
        memory: EngineMemory,
        loaded: Callable[[], LoadedModel | None],
        new_target: Callable[..., Target],
    ):
        self.engine = engine
        self.memory = memory
        self.loaded = loaded
        self.new_target = new_target
        self._measuring: asyncio.Task | None = None
        self._table_builds: asyncio.Task | None = None

    def after_answer(self) -> None:
        """What an answer may have left owed: the curve, a table it asked for."""
        self.measure_later()
        self.build_tables_later()

    def measure_later(self) -> None:
        """Measure the loaded model's verify cost in the background, if never measured."""
        loaded = self.loaded()
        if (
            loaded is None
            or not loaded.speculates
            or (self._measuring is not None and not self._measuring.done())
            or self.memory.adaptive.measured(model_key(loaded))
        ):
            return
        self._measuring = self.engine.loop.create_task(self._measure(loaded))

    def build_tables_for(self, draft: DraftSettings) -> None:
        """Start building the loaded model's tables that ``draft``'s drafter uses and that
        are not built yet (callable from any thread)."""

        def start() -> None:
            loaded = self.loaded()
            names = wanted_tables(make_drafter(draft.validated())) if loaded is not None else []
            if not names:
                return
            self.memory.tables.builds(names, loaded, model_key(loaded))
            self.build_tables_later()

        self.engine.loop.call_soon_threadsafe(start)

    def build_tables_later(self) -> None:
        """Build the loaded model's tables that requests asked for, in the background."""
        loaded = self.loaded()
        if (
            loaded is None
            or (self._table_builds is not None and not self._table_builds.done())
            or self.memory.tables.pending(loaded.model) is None
        ):
            return
        self._table_builds = self.engine.loop.create_task(self._build_tables(loaded))

    async def _between_requests(self, loaded: LoadedModel, step: Callable[[], bool]) -> bool:
        """``step()`` until done, between requests, while ``loaded`` is still the model."""
        return await self.engine.between_requests(step, lambda: self.loaded() is loaded)

    def measurement(self, loaded: LoadedModel, target: Target | None = None):
        """``AdaptiveMemory.measure_in_steps`` of ``loaded``: a generator of (steps done,
        steps in all), one pass or context chunk a step. On a cache of its own after
        ``MEASURE_CONTEXT`` tokens, or on ``target``'s at the context it holds (every pass
        undone: a chat's cache is left as it was, and nothing is read again)."""
        context = 0 if target is not None else min(MEASURE_CONTEXT, loaded.context_length // 2)
        target = target if target is not None else self.new_target(loaded.model)
        return self.memory.adaptive.measure_in_steps(model_key(loaded), target, context)

    async def _measure(self, loaded: LoadedModel) -> None:
        """Measure in short steps (``AdaptiveMemory.measure_in_steps``) between requests."""
        steps = self.measurement(loaded)
        key = model_key(loaded)
        finished = object()

        def step() -> bool:
            """One pass; True once the curve is measured and saved (here, or by a request
            that measured it: ``EngineService.measure``)."""
            return self.memory.adaptive.measured(key) or next(steps, finished) is finished

        try:
            if not await self._between_requests(loaded, step):
                return
            log.info("Verify cost of %s measured in the background.", loaded.name)
        except asyncio.CancelledError:
            raise
        except Exception:  # measuring is an optimisation: the prior curve keeps working
            log.exception("Could not measure the verify cost of %s", loaded.name)

    async def _build_tables(self, loaded: LoadedModel) -> None:
        """Every owed table of ``loaded``, in steps of its build's ``step`` between requests."""
        tables = self.memory.tables
        while (build := tables.pending(loaded.model)) is not None:
            log.info("Building the %s of %s in the background.", build.what, loaded.name)
            try:
                if not await self._between_requests(loaded, build.step):
                    return
            except asyncio.CancelledError:
                raise
            except Exception:  # a table is an optimisation: drafting goes on without it
                log.exception("Could not build the %s of %s", build.what, loaded.name)
                tables.drop(build)
                return
            log.info("The %s of %s is ready.", build.what, loaded.name)
