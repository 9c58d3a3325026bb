"""Model ▸ Download a model…: the curated list (engine/models/catalog.py) in a table.

Choosing one loads it like any Hugging Face id: the engine downloads it through
huggingface_hub with byte progress and a Cancel button (a later choice of the same
model resumes the partial file), and says plainly when no hub can be reached.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from engine.models.catalog import CATALOG

from ..storage.downloads import installed_models, size_text

COLUMNS = ("Model", "Parameters", "Quantization", "Download", "Licence")
# What a first launch offers beside the built-in demo: the catalog's largest model under a
# gigabyte to download (Qwen2.5 1.5B, 4-bit, ≈870 MB, Apache-2.0), the one most likely to
# answer sensibly that a slow connection still fetches in minutes
RECOMMENDED = next(m for m in CATALOG if m.repo == "mlx-community/Qwen2.5-1.5B-Instruct-4bit")
OFFER_SCHEME = "download:"  # a link of the offer: the hub id after it


def download_text(model) -> str:
    """'≈870 MB' or '≈2.1 GB': a catalog model's download, approximately."""
    if model.download_mb >= 1024:
        return f"≈{model.download_mb / 1024:.1f} GB"
    return f"≈{model.download_mb} MB"


def first_run_offer(installed: bool) -> str:
    """Under the empty chat while the built-in model answers: it is a demo, and a real model
    to get, with its size (``installed``: it is here already, to load)."""
    model = RECOMMENDED
    verb = "Load" if installed else "Download"
    size = "" if installed else f", {download_text(model)}"
    return (
        "<p>The built-in SmolLM2 135M is a <b>demo</b>: quick to start, and its answers are "
        f"often nonsense. For real answers: <a href='{OFFER_SCHEME}{model.repo}'>{verb} "
        f"{model.name}</a> ({model.quantization}{size}, {model.licence}), or choose another "
        "under Model ▸ Download a model….</p>"
    )


class ModelCatalogDialog(QDialog):
    chosen = Signal(str)  # the hub id to download and load

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Download a model")
        self.setMinimumWidth(560)
        layout = QVBoxLayout(self)
        intro = QLabel(
            "Chat models from mlx-community on Hugging Face; sizes are approximate. "
            "A download can be cancelled; choosing the model again resumes it."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.table = QTableWidget(len(CATALOG), len(COLUMNS))
        self.table.setObjectName("modelCatalog")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        here = {m.name: m for m in installed_models()}
        for row, model in enumerate(CATALOG):
            size = download_text(model)
            if model.repo in here:  # downloaded before: whole, or the part a resume goes on from
                got = here[model.repo]
                size += " · here" if got.complete else f" · {size_text(got.size)} here, resumes"
            for column, text in enumerate(
                (model.name, model.parameters, model.quantization, size, model.licence)
            ):
                item = QTableWidgetItem(text)
                item.setData(Qt.UserRole, model.repo)
                item.setToolTip(model.repo)
                self.table.setItem(row, column, item)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.Stretch)
        self.table.itemDoubleClicked.connect(lambda _: self.accept())
        layout.addWidget(self.table)
        self.buttons = QDialogButtonBox(QDialogButtonBox.Cancel)
        self.download_button = self.buttons.addButton(
            "Download and use", QDialogButtonBox.AcceptRole
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self.table.itemSelectionChanged.connect(
            lambda: self.download_button.setEnabled(self.selected() is not None)
        )
        self.download_button.setEnabled(False)

    def selected(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        return self.table.item(rows[0].row(), 0).data(Qt.UserRole) if rows else None

    def accept(self) -> None:
        repo = self.selected()
        if repo:
            self.chosen.emit(repo)
            super().accept()
