"""The model picker at the top of the chat: the loaded model's name on a button whose menu
lists the installed models and the other ways to get one, and, while a model loads, how far
it has come (a download's or a conversion's share, else a busy bar) with Cancel where a
load can stop. Nothing about a load is modal: the chat and the composer stay usable.

A view only: it says what the person chose through its signals, and ``ModelPresenter``
loads it the way Model → Installed models → Load does.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QMenu,
    QProgressBar,
    QSizePolicy,
    QToolButton,
)

from pathlib import Path

from engine.models.embedded import EMBEDDED_NAME

from ..storage.downloads import installed_models, is_loaded

MAX_NAME_CHARS = 40  # a long hub id keeps the button within a 600 px chat
BAR_WIDTH = 120  # the load's bar beside the button: a share is readable, the chat keeps room


def short_name(name: str, facts: dict) -> str:
    """'SmolLM2-135M-Instruct · float32': the model's own name (no owner) and its weights."""
    short = name.rstrip("/").rsplit("/", 1)[-1] or name  # a hub id's or a folder's last part
    if len(short) > MAX_NAME_CHARS:
        short = short[: MAX_NAME_CHARS - 1] + "…"
    weights = str(facts.get("weights") or "").split(" (")[0]  # "4-bit (group 64)" → "4-bit"
    return f"{short} · {weights}" if weights and weights != "unknown" else short


class ModelPicker(QFrame):
    """A thin bar above the transcript with the model button in its middle."""

    loadRequested = Signal(str)  # an installed model: what loads it ("" for the built-in)
    downloadRequested = Signal()
    searchRequested = Signal()
    folderRequested = Signal()
    serverRequested = Signal()
    cancelRequested = Signal()  # stop the load (a download; choosing the model again resumes)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("modelPickerBar")
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 4, 12, 0)
        self.button = QToolButton()
        self.button.setObjectName("modelPicker")
        self.button.setPopupMode(QToolButton.InstantPopup)
        self.button.setToolButtonStyle(Qt.ToolButtonTextOnly)
        self.button.setSizePolicy(QSizePolicy.Maximum, QSizePolicy.Fixed)
        self.menu = QMenu(self.button)
        self.menu.aboutToShow.connect(self.fill_menu)
        self.button.setMenu(self.menu)
        row.addStretch(1)
        row.addWidget(self.button)
        self.bar = QProgressBar()
        self.bar.setObjectName("loadBar")
        self.bar.setAccessibleName("Model loading")
        self.bar.setFixedWidth(BAR_WIDTH)
        self.bar.setTextVisible(False)  # the button says the share
        self.bar.setMaximumHeight(self.button.sizeHint().height())
        self.bar.hide()
        row.addWidget(self.bar)
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip("Stop the download; choosing the model again resumes it")
        self.cancel_button.clicked.connect(self.cancelRequested)
        self.cancel_button.hide()
        row.addWidget(self.cancel_button)
        row.addStretch(1)
        self.loaded_path = ""
        self.loading = ""
        self.show_model("", "", {}, "")

    def show_model(self, name: str, path: str, facts: dict, details: str) -> None:
        """The loaded model (``name`` "" while none is)."""
        self.loaded_path = path
        shown = short_name(name, facts) if name else "Choose a model"
        if name and Path(path).name.startswith(EMBEDDED_NAME):
            shown += " · demo"  # the built-in model: small and fast, not for real answers
        self.button.setText(shown + "  ▾")
        self.button.setToolTip(
            f"{name}\n{details}\nChoose another model to load it" if name else "Load a model"
        )
        self.button.setAccessibleName(f"Model: {name}" if name else "Choose a model")

    def show_loading(self, what: str) -> None:
        """A load began: its name on the button and a busy bar until a share is known."""
        self.loading = what
        self.button.setText(f"Loading {what}…")
        self.bar.setRange(0, 0)
        self.bar.show()
        self.cancel_button.hide()

    def show_progress(self, message: str, done: int, total: int, cancellable: bool) -> None:
        """How far the load is: a real share when the engine counts (bytes downloaded,
        tensors converted), a busy bar when it only says what it does (reading weights)."""
        if total > 1:
            self.bar.setRange(0, total)
            self.bar.setValue(min(done, total))
            share = f" {min(done, total) / total:.0%}"
        else:
            self.bar.setRange(0, 0)
            share = ""
        self.button.setText(f"Loading {self.loading or 'the model'}…{share}")
        self.button.setToolTip(message)
        self.bar.setToolTip(message)
        self.bar.setAccessibleDescription(f"{message}{share}")
        self.cancel_button.setVisible(cancellable)

    def end_loading(self) -> None:
        self.loading = ""
        self.bar.hide()
        self.cancel_button.hide()

    def fill_menu(self) -> None:
        """The installed models (the loaded one ticked) and the other ways to get one."""
        self.menu.clear()
        complete = [m for m in installed_models() if m.complete]
        for model in complete:
            action = self.menu.addAction(
                model.label, lambda name=model.name: self.loadRequested.emit(name)
            )
            action.setCheckable(True)
            action.setChecked(is_loaded(model, self.loaded_path))
            action.setToolTip(str(model.path))
        if not complete:
            self.menu.addAction("No models installed yet").setEnabled(False)
        self.menu.addSeparator()
        self.menu.addAction("Download a model…", self.downloadRequested.emit)
        self.menu.addAction("Search Hugging Face…", self.searchRequested.emit)
        self.menu.addAction("Open a folder…", self.folderRequested.emit)
        self.menu.addAction("Connect to server…", self.serverRequested.emit)
