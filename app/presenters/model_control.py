"""Which engine answers and which model it has loaded: loading a model, downloading one in
the background, and switching between this machine's engine and a Draftless server.

``ModelControl`` belongs to a ``ChatController``, which hands it what the two share: the
settings (a model that loads is remembered), whether an answer is running (no switching
during one) and the task set that ``wait_idle`` waits on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from engine.api import Engine, LocalEngine
from engine.events import DoneEvent, ErrorEvent, ModelEvent, ProgressEvent
from engine.models import HUB_ID

from ..storage.downloads import DownloadMeter
from ..storage.server_keys import ServerKeys
from ..storage.settings import AppSettings

log = logging.getLogger(__name__)


class ModelControl(QObject):
    modelChanged = Signal(str, str, str)  # name, path, speculation
    loadProgress = Signal(object)  # ProgressEvent
    loadStarted = Signal(str)  # what is being loaded
    loadFinished = Signal(bool, str)  # ok, error message
    engineChanged = Signal(str)  # the server's address answers now; "" for this machine's engine
    downloadProgress = Signal(str, str)  # hub id, what to show (share, speed, time left)
    downloadFinished = Signal(str, bool, str)  # hub id, ok, why not
    problem = Signal(str)  # a message for the person

    def __init__(
        self,
        service: LocalEngine,
        settings: Callable[[], AppSettings],
        update_settings: Callable[[AppSettings], None],
        is_busy: Callable[[], bool],
        spawn: Callable[[Coroutine], asyncio.Task],
        parent=None,
    ):
        super().__init__(parent)
        self.service: Engine = service  # this machine's engine or an app.engines.remote_engine's
        self.local_service = service
        self.settings = settings
        self.update_settings = update_settings
        self.is_busy = is_busy
        self.spawn = spawn
        self.model_name = ""
        self.model_path = ""
        self.speculation = ""
        self.model_details = ""  # architecture · size · quantization
        self.facts: dict = {}  # the loaded model's (``ModelEvent.facts``): context_length…
        self.loading = False
        self._load_stream = None  # the running explicit load, for cancel_load
        self.download_stream = None  # the running download (one at a time)
        self.download_meter = DownloadMeter()
        self.server_keys = ServerKeys()

    @property
    def server_url(self) -> str:
        """The address of the server that answers; "" while this machine's engine does."""
        return "" if self.service is self.local_service else getattr(self.service, "url", "")

    def load_model(self, spec: str | None) -> asyncio.Task:
        """Load the embedded default (None), a folder or a hub id; remember it on success.
        While a server answers, this machine's engine loads it and answers from then on."""
        spec = spec or None
        self.loading = True
        self.loadStarted.emit(spec or "the built-in model")
        if self.server_url:
            return self.spawn(self._switch(self.local_service, spec))
        return self.spawn(self._load(spec))

    def choose(self, spec: str | None) -> asyncio.Task | None:
        """The model a person picked: a hub id downloads in the background, then loads;
        anything else (a folder, None for the built-in model) loads now."""
        if spec and HUB_ID.match(spec) and not Path(spec).expanduser().exists():
            return self.download(spec)
        return self.load_model(spec)

    def download(self, repo: str, then_load: bool = True) -> asyncio.Task | None:
        """Download a hub model in the background (chatting goes on) and, once it is here,
        load it; None when another download is running (the banner says so)."""
        if self.download_stream is not None:
            self.problem.emit("Another model is downloading: wait for it, or cancel it first.")
            return None
        self.download_stream = self.local_service.download(repo)
        return self.spawn(self._follow_download(repo, self.download_stream, then_load))

    async def _follow_download(self, repo: str, stream, then_load: bool) -> None:
        meter, ok, why = DownloadMeter(), False, "The download stopped."
        self.download_meter = meter
        try:
            async for event in stream:
                if isinstance(event, ProgressEvent):
                    meter.update(event.done, event.total, time.monotonic())
                    self.downloadProgress.emit(repo, meter.describe(repo))
                elif isinstance(event, DoneEvent):
                    ok = True
                elif isinstance(event, ErrorEvent):
                    why = event.message
        except Exception as error:  # never leave the download shown forever
            why = f"The download failed: {error}"
        finally:
            self.download_stream = None
            try:
                self.downloadFinished.emit(repo, ok, "" if ok else why)
            except RuntimeError:  # the app quit while it downloaded: nobody is left to tell
                return
        if ok and then_load:
            self.load_model(repo)

    def cancel_download(self) -> None:
        """Stop the download; choosing the model again resumes it from the bytes kept."""
        if self.download_stream is not None:
            self.download_stream.cancel()

    def cancel_load(self) -> None:
        """Stop a model download; choosing the same model again resumes it."""
        cancel = getattr(self._load_stream, "cancel", None)
        if cancel:
            cancel()

    def use_engine(self, engine) -> asyncio.Task | None:
        """Answer with ``engine`` (this machine's service or an ``app.engines.remote_engine``) once
        it answers; if it does not, keep the current one and say why."""
        if self.is_busy():
            self.problem.emit("Stop the answer before switching engines.")
            return None
        self.loading = True
        self.loadStarted.emit(getattr(engine, "url", "this machine's engine"))
        return self.spawn(self._switch(engine, self.settings().model))

    def connect_server(self, url: str, key: str | None) -> asyncio.Task | None:
        """Answer from the Draftless server at ``url``; once it answers, its address is
        remembered in the settings and its key in the keychain (``server_keys``)."""
        from ..engines.remote_engine import RemoteEngine, api_base

        if self.is_busy():
            self.problem.emit("Stop the answer before switching engines.")
            return None
        try:
            engine = RemoteEngine(url, key)
        except Exception as error:
            self.problem.emit(f"Cannot connect to {url}: {error}")
            return None
        base = api_base(url)

        async def connect() -> bool:
            if not await self._switch(engine, self.settings().model):
                return False
            if url.strip() != self.settings().server_url:
                self.update_settings(replace(self.settings(), server_url=url.strip()))
            self.server_keys.set(base, key)
            return True

        self.loading = True
        self.loadStarted.emit(base)
        return self.spawn(connect())

    async def _switch(self, engine, spec: str | None) -> bool:
        """Answer with ``engine`` from now on if it loads ``spec``; else keep the current."""
        previous, self.service = self.service, engine
        if not await self._load(spec):
            self.service = previous
            return False
        if previous is not engine:
            self.engineChanged.emit(self.server_url)
        return True

    async def _load(self, spec: str | None) -> bool:
        ok, message = False, "The engine stopped without loading the model."
        self._load_stream = stream = self.service.load(spec)
        try:
            async for event in stream:
                if isinstance(event, ProgressEvent):
                    self.loadProgress.emit(event)
                elif isinstance(event, ModelEvent):
                    self.model_loaded(event)
                elif isinstance(event, DoneEvent):
                    ok = event.finish_reason != "cancelled"
                    message = "" if ok else "Loading cancelled."
                elif isinstance(event, ErrorEvent):
                    message = event.message
        except Exception as error:
            log.exception("load failed")
            message = f"Loading failed: {error}"
        self._load_stream = None
        self.loading = False
        if ok:
            if spec != self.settings().model:
                self.update_settings(replace(self.settings(), model=spec))
        else:
            self.problem.emit(message)
        self.loadFinished.emit(ok, message)
        return ok

    def model_loaded(self, event: ModelEvent) -> None:
        self.model_name, self.model_path, self.speculation = (
            event.name,
            event.path,
            event.speculation,
        )
        self.model_details = event.details
        self.facts = dict(event.facts or {})
        self.modelChanged.emit(event.name, event.path, event.speculation)
        build_tables = getattr(self.service, "build_tables_for", None)  # this machine's engine
        if build_tables is not None:  # its drafter's tables, between requests, from now
            build_tables(self.settings().draft())
