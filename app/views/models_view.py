"""Views of model files: the download bar in the status bar (progress, speed, time left,
Cancel) and the Installed models dialog (sizes, Load, Resume an incomplete download,
Delete). The rules are in
``app.storage.downloads``; the work is the controller's."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..storage.downloads import (
    InstalledModel,
    delete_installed,
    installed_models,
    is_loaded,
    size_text,
)
from .zoom import small_print


class DownloadBar(QWidget):
    """A running download, beside the chat: what, how far, how fast, how long; Cancel."""

    cancelRequested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel()
        self.bar = QProgressBar()
        self.bar.setFixedWidth(120)
        self.bar.setTextVisible(False)
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip("Stop the download; choosing the model again resumes it")
        self.cancel_button.clicked.connect(self.cancelRequested.emit)
        row.addWidget(self.label)
        row.addWidget(self.bar)
        row.addWidget(self.cancel_button)
        self.hide()

    def show_progress(self, text: str, done: int = 0, total: int = 0) -> None:
        self.label.setText(text)
        self.bar.setRange(0, total if total > 0 else 0)
        if total > 0:
            self.bar.setValue(min(done, total))
        self.show()

    def finish(self) -> None:
        self.hide()


class InstalledModelsDialog(QDialog):
    """The models on this machine with their sizes; Load one, Resume a download that
    stopped part-way (it cannot load before), or Delete one (asked first)."""

    loadRequested = Signal(str)  # what loads it ("" for the built-in model)
    resumeRequested = Signal(str)  # the hub id whose download goes on

    def __init__(self, loaded_path: str, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Installed models")
        self.setMinimumWidth(560)
        self.loaded_path = loaded_path
        self.models: list[InstalledModel] = []
        layout = QVBoxLayout(self)
        self.table = QTableWidget(0, 2)
        self.table.setHorizontalHeaderLabels(["Model", "Size on disk"])
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().hide()
        layout.addWidget(self.table)
        self.total = QLabel()
        layout.addWidget(self.total)
        self.message = QLabel()  # why a delete was refused
        self.message.setObjectName("hint")
        small_print(self.message)
        self.message.setWordWrap(True)
        layout.addWidget(self.message)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        self.load_button = QPushButton("Load")
        self.resume_button = QPushButton("Resume download")
        self.delete_button = QPushButton("Delete…")
        for button in (self.load_button, self.resume_button, self.delete_button):
            buttons.addButton(button, QDialogButtonBox.ActionRole)
        buttons.rejected.connect(self.reject)
        self.load_button.clicked.connect(self.load_selected)
        self.resume_button.clicked.connect(self.resume_selected)
        self.table.itemSelectionChanged.connect(self.show_actions)
        self.delete_button.clicked.connect(self.delete_selected)
        layout.addWidget(buttons)
        self.refresh()

    def refresh(self) -> None:
        self.models = installed_models()
        self.table.setRowCount(len(self.models))
        for row, model in enumerate(self.models):
            loaded = is_loaded(model, self.loaded_path)
            state = " — loaded" if loaded else "" if model.complete else " — incomplete download"
            name = QTableWidgetItem(model.label + state)
            name.setToolTip(
                str(model.path)
                if model.complete
                else f"{model.path}\nThe download stopped part-way: Resume it, or Delete it."
            )
            size = QTableWidgetItem(size_text(model.size) + ("" if model.complete else " so far"))
            size.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
            self.table.setItem(row, 0, name)
            self.table.setItem(row, 1, size)
        self.table.resizeColumnToContents(0)
        total = sum(m.size for m in self.models)
        self.total.setText(
            f"{len(self.models)} model{'s' if len(self.models) != 1 else ''}, "
            f"{size_text(total)} in all"
            if self.models
            else "No models yet: the built-in model is prepared at the first launch."
        )
        self.show_actions()

    def show_actions(self) -> None:
        """Load a complete model, Resume an incomplete download, Delete either."""
        model = self.selected()
        self.load_button.setEnabled(model is not None and model.complete)
        self.resume_button.setEnabled(model is not None and not model.complete)
        self.delete_button.setEnabled(model is not None)

    def selected(self) -> InstalledModel | None:
        rows = self.table.selectionModel().selectedRows()
        return self.models[rows[0].row()] if rows else None

    def load_selected(self) -> None:
        model = self.selected()
        if model is not None and model.complete:
            self.loadRequested.emit(model.name)
            self.accept()

    def resume_selected(self) -> None:
        model = self.selected()
        if model is not None and not model.complete:
            self.resumeRequested.emit(model.name)
            self.accept()

    def delete_selected(self) -> None:
        model = self.selected()
        if model is None:
            return
        question = (
            f"Delete {model.label}? This frees {size_text(model.size)}; downloading or "
            "preparing it again takes time."
        )
        if QMessageBox.question(self, "Delete model", question) != QMessageBox.Yes:
            return
        try:
            delete_installed(model, self.loaded_path)
            self.message.setText(f"Deleted {model.label}.")
        except (ValueError, OSError) as error:
            self.message.setText(str(error))
        self.refresh()
