"""The engine as its callers see it: what the app (and any other front end) may call, with no
MLX, no model and no thread behind the names.

``Engine`` is what every engine offers, this machine's (``engine.runtime.service.EngineService``) and
a Draftless server seen from the app (``app.engines.remote_engine.RemoteEngine``): ``generate`` and
``load`` return an ``EventStream`` (``async for event in stream``; ``cancel()`` stops it),
``drafters()`` names the drafters, ``shutdown()`` lets go of it. ``LocalEngine`` adds what only
an engine with the model in this process can do: ``replay`` an answer with other drafter
settings (the engine tokenizes its prompt) and ``download`` a model. (The service also offers
``build_tables_for``, ``stop_jobs`` and ``prepare``, which a caller uses where it finds them.)
Importing this module loads the request and event value types only, so a front end that types
against it does not load the decode loop (tests/test_structure.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from .drafters import DRAFTERS
from .events import Event
from .settings import DraftSettings, GenerationRequest

SERVER_PORT = 8080  # where ``python -m engine serve`` listens unless told otherwise
SERVER_KEY_VARIABLE = "DRAFTLESS_API_KEY"  # the API key it requires, when not given by flag


class EventStream(Protocol):
    """One job's events, ended by a ``DoneEvent`` or an ``ErrorEvent``."""

    def cancel(self) -> None: ...

    def __aiter__(self) -> AsyncIterator[Event]: ...


@runtime_checkable
class Engine(Protocol):
    def generate(self, request: GenerationRequest) -> EventStream:
        """Token and Pass events (Progress and Model events while a model loads), then Done."""
        ...

    def load(self, model: str | None = None) -> EventStream:
        """Make ``model`` (None: the built-in one) answer; a ModelEvent says which answers,
        then ``DoneEvent("loaded")``."""
        ...

    def drafters(self) -> dict[str, str]: ...

    def shutdown(self) -> None: ...


@runtime_checkable
class LocalEngine(Engine, Protocol):
    def replay(
        self,
        request: GenerationRequest,
        answer_tokens: list[int],
        ended: bool,
        configs: Sequence[DraftSettings],
        greedy: bool | None = None,
    ) -> EventStream:
        """A ReplayEvent (each configuration's outcome, best first), then Done."""
        ...

    def download(self, repo_id: str) -> EventStream:
        """Progress events in bytes, then ``DoneEvent("downloaded", folder)``."""
        ...


def drafter_summaries() -> dict[str, str]:
    """Each drafter's name and its one-line summary (what ``Engine.drafters`` returns)."""
    return {name: cls.summary for name, cls in DRAFTERS.items()}
