"""What the main window shows of models and engines: picking a model (folder, catalog,
hub id, installed; the picker at the top of the chat), connecting to a server, the download
bar and a load's progress in the picker.

The work is ``ModelControl``'s (``controller.models``); this presenter turns its signals
into views and the person's choices into its calls. Questions to the person go through
the window's ``ask_*`` methods (tests answer them)."""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QFileDialog

from ..storage.downloads import installed_models
from ..views.hub_search_view import HubSearchDialog
from ..views.model_catalog import OFFER_SCHEME, RECOMMENDED, ModelCatalogDialog, first_run_offer
from ..views.model_picker import ModelPicker
from ..views.models_view import InstalledModelsDialog
from ..engines.remote_engine import api_base
from engine.models.embedded import EMBEDDED_NAME


DOWNLOAD_TICK_MS = 1000  # a stalled download's line is said again this often


def hub_api():
    from huggingface_hub import HfApi

    return HfApi()


class ModelPresenter(QObject):
    def __init__(self, window, controller):
        super().__init__(window)
        self.window = window
        self.controller = controller
        self.models = controller.models
        models = self.models
        models.modelChanged.connect(self.model_changed)
        models.loadStarted.connect(self.load_started)
        models.loadProgress.connect(self.load_progress)
        models.loadFinished.connect(self.load_finished)
        models.downloadProgress.connect(self.download_progress)
        models.downloadFinished.connect(self.download_finished)
        models.engineChanged.connect(self.engine_changed)
        window.download_bar.cancelRequested.connect(models.cancel_download)
        self.downloading = ""  # the hub id being downloaded
        self.hub_api = hub_api  # what Search Hugging Face asks (tests put a fake here)
        self.download_clock = QTimer(self)
        self.download_clock.setInterval(DOWNLOAD_TICK_MS)
        self.download_clock.timeout.connect(self._tick_download)
        panel = window.settings_panel
        panel.openFolderRequested.connect(self.pick_folder)
        panel.hubRequested.connect(self.pick_hub)
        panel.embeddedRequested.connect(lambda: models.load_model(None))
        self.picker = ModelPicker()  # above the gauge: the first thing of the chat's column
        window.centralWidget().layout().insertWidget(0, self.picker)
        self.picker.loadRequested.connect(models.load_model)
        self.picker.downloadRequested.connect(self.pick_from_catalog)
        self.picker.searchRequested.connect(self.search_hub)
        self.picker.folderRequested.connect(self.pick_folder)
        self.picker.serverRequested.connect(self.connect_server)
        self.picker.cancelRequested.connect(models.cancel_load)
        window.transcript.offerTaken.connect(self.take_offer)
        controller.busyChanged.connect(self.enable_picker)

    def add_menu(self, menu) -> None:
        """The Model menu's entries."""
        models = self.models
        menu.addAction("Open model folder…", self.pick_folder)
        menu.addAction("Download a model…", self.pick_from_catalog)
        menu.addAction("Search Hugging Face…", self.search_hub)
        menu.addAction("Hugging Face model…", self.pick_hub)
        menu.addAction("Built-in model", lambda: models.load_model(None))
        menu.addAction("Installed models…", self.show_installed_models)
        menu.addSeparator()
        menu.addAction("Connect to server…", self.connect_server)
        menu.addAction("Use this machine's engine", lambda: models.use_engine(models.local_service))

    # picking a model ----------------------------------------------------------------------
    def pick_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self.window, "Choose an mlx-lm model folder")
        if folder:
            self.models.load_model(folder)

    def pick_from_catalog(self) -> ModelCatalogDialog:
        dialog = ModelCatalogDialog(self.window)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.chosen.connect(self.models.choose)
        dialog.open()
        return dialog

    def search_hub(self) -> HubSearchDialog:
        dialog = HubSearchDialog(self.hub_api, self.window)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.chosen.connect(self.models.choose)
        dialog.resize(min(900, max(560, self.window.width() - 80)), 640)
        dialog.open()
        return dialog

    def show_installed_models(self) -> InstalledModelsDialog:
        dialog = InstalledModelsDialog(self.models.model_path, self.window)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.loadRequested.connect(self.models.load_model)
        dialog.resumeRequested.connect(self.models.choose)  # downloads the rest, then loads
        dialog.open()
        return dialog

    def pick_hub(self) -> None:
        repo = self.window.ask_text(
            "Hugging Face model", "Model id (for example mlx-community/SmolLM2-360M-Instruct):", ""
        )
        if repo and repo.strip():
            self.models.choose(repo.strip())

    def download_progress(self, repo: str, text: str) -> None:
        meter = self.models.download_meter
        self.window.download_bar.show_progress(text, meter.done, meter.total)
        self.downloading = repo
        self.download_clock.start()

    def _tick_download(self) -> None:
        """Said again each second while bytes stall: the speed and time left follow the
        clock, not only the reports (a stalled download's time left froze)."""
        meter = self.models.download_meter
        text = meter.describe(self.downloading, time.monotonic())
        self.window.download_bar.show_progress(text, meter.done, meter.total)

    def download_finished(self, repo: str, ok: bool, why: str) -> None:
        self.download_clock.stop()
        self.window.download_bar.finish()
        if not ok:
            self.window.banner.show_message(why)

    # engines ------------------------------------------------------------------------------
    def connect_server(self):
        """Model → Connect to server…: the address (remembered) and the key (keychain)."""
        url = self.controller.settings.server_url
        keys = self.models.server_keys
        answer = self.window.ask_server(
            url, keys.get(api_base(url)) if url else None, keys.persistent
        )
        if answer is None or not answer[0]:
            return None
        return self.models.connect_server(*answer)

    def engine_changed(self, url: str) -> None:
        """Say in the status bar, for as long as it lasts, that a server answers."""
        label = self.window.server_label
        label.setText(f"Answers from the server at {url}" if url else "")
        label.setToolTip(
            f"Answers come from the Draftless server at {url}. Model → Use this machine's "
            "engine switches back."
            if url
            else ""
        )
        label.setVisible(bool(url))

    # loading ------------------------------------------------------------------------------
    def model_changed(self, name: str, path: str, speculation: str) -> None:
        details = self.models.model_details
        self.window.settings_panel.show_model(name, path, speculation, details)
        self.window.speculation_bar.show_model(name, speculation)
        self.picker.show_model(name, path, self.models.facts, details)
        self.offer_a_real_model(path)

    def offer_a_real_model(self, path: str) -> None:
        """While the built-in demo answers, the empty chat offers a real model to get."""
        demo = Path(path).name.startswith(EMBEDDED_NAME) if path else False
        here = any(m.name == RECOMMENDED.repo and m.complete for m in installed_models())
        self.window.transcript.set_offer(first_run_offer(here) if demo else "")

    def take_offer(self, link: str) -> None:
        if link.startswith(OFFER_SCHEME):
            self.models.choose(link[len(OFFER_SCHEME) :])

    def enable_picker(self, *_) -> None:
        """Another model can be chosen while no answer runs and no model loads."""
        self.picker.button.setEnabled(not self.controller.busy and not self.models.loading)

    def load_started(self, what: str) -> None:
        """In the picker, not a dialog: the composer keeps what is typed, and a message sent
        meanwhile waits for the model (``MainWindow.send``)."""
        self.window.settings_panel.set_loading(True, what)
        self.picker.show_loading(what)
        self.enable_picker()

    def load_progress(self, event) -> None:
        if event.stage == "prefill":
            return
        if not self.picker.loading:  # a load that happens inside a chat request
            self.load_started("the model")
        cancellable = event.stage == "download" and self.models.loading
        self.picker.show_progress(event.message, event.done, event.total, cancellable)

    def load_finished(self, ok: bool, message: str) -> None:
        if ok:  # a refused key or an unreachable server said before no longer holds
            self.window.banner.engine_works()
        else:
            self.window.banner.engine_failed(message)
        self.picker.end_loading()
        panel = self.window.settings_panel
        panel.set_loading(False)
        self.enable_picker()
        if self.models.model_name:
            self.model_changed(
                self.models.model_name, self.models.model_path, self.models.speculation
            )
        else:
            self.picker.show_model("", "", {}, "")
            if not ok:
                panel.show_no_model(message)
