"""Model ▸ Search Hugging Face…: type a name, press Enter; the MLX models found, each with
its quantizations; open one to see each quantization's download size, choose one and
Download: the download runs as any other (progress in the status bar, resumable) and the
model loads once it is here.

Hub calls block, so they run on threads (``Background``); each answer carries the ticket
it was asked under, and an answer to an older question is dropped. Offline, or when the hub
answers nothing in ``ANSWER_S``, the dialog says so and what still works."""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..storage.downloads import installed_models, size_text
from ..storage.hub_client import (
    ANSWER_S,
    HubUnavailable,
    explain,
    no_answer_message,
    repo_size,
    search_models,
)
from ..storage.hub_models import HubModel, Quantization, count_text

RESULT_COLUMNS = ("Model", "Parameters", "Quantizations", "Downloads", "Likes")
QUANT_COLUMNS = ("Quantization", "Download", "Downloads", "Repository")
PICK_HINT = "Choose a model above to see its quantizations and their download sizes."
START = (
    "Type part of a model's name and press Enter. The search lists models MLX can run "
    "(mlx-community conversions and others), most downloaded first."
)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


class Background(QObject):
    """Runs a blocking call on a daemon thread; what it says comes back on the GUI thread
    as ``answered(kind, ticket, result, error)``. Parentless: the thread keeps it alive
    while it runs, whatever becomes of the dialog."""

    answered = Signal(str, int, object, object)

    def start(self, kind: str, ticket: int, work: Callable[[Callable], None]) -> None:
        """``work(say)`` calls ``say(result)`` for each answer; a HubUnavailable it raises
        is said as the error."""

        def say(result=None, error=None) -> None:
            try:
                self.answered.emit(kind, ticket, result, error)
            except RuntimeError:  # the app is closing
                pass

        def run() -> None:
            try:
                work(say)
            except HubUnavailable as error:
                say(error=error)
            except Exception as error:  # never a silent thread: the dialog says it
                say(error=explain(error))

        threading.Thread(target=run, name=f"hub-{kind}", daemon=True).start()


def _table(columns: tuple[str, ...], name: str, stretch: int) -> QTableWidget:
    table = QTableWidget(0, len(columns))
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(columns)
    table.verticalHeader().hide()
    table.setSelectionBehavior(QAbstractItemView.SelectRows)
    table.setSelectionMode(QAbstractItemView.SingleSelection)
    table.setEditTriggers(QAbstractItemView.NoEditTriggers)
    table.setWordWrap(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeToContents)
    header.setSectionResizeMode(stretch, QHeaderView.Stretch)
    return table


def _fill_row(table: QTableWidget, row: int, texts, numbers: tuple[int, ...]) -> None:
    """One row; the columns in ``numbers`` right-aligned."""
    for column, text in enumerate(texts):
        item = QTableWidgetItem(text)
        item.setToolTip(text)
        if column in numbers:
            item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
        table.setItem(row, column, item)


class HubSearchDialog(QDialog):
    chosen = Signal(str)  # the hub id to download and load

    def __init__(self, api_factory: Callable[[], object], parent=None):
        super().__init__(parent)
        self.setWindowTitle("Search Hugging Face")
        self.setMinimumWidth(480)
        self.api_factory = api_factory
        self.models: list[HubModel] = []
        self.opened: HubModel | None = None
        self.sizes: dict[str, int | None] = {}  # repo → bytes a download fetches
        self.size_errors: dict[str, str] = {}
        self.tickets = {"search": 0, "sizes": 0}
        self.cancel = threading.Event()
        self.background = Background()
        self.background.answered.connect(self.answered)
        self.deadline = QTimer(self)
        self.deadline.setSingleShot(True)
        self.deadline.setInterval(int(ANSWER_S * 1000))
        self.deadline.timeout.connect(self.no_answer)
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        self.query = QLineEdit()
        self.query.setPlaceholderText("Search MLX models, for example: qwen 1.5b instruct")
        self.query.setClearButtonEnabled(True)
        self.query.returnPressed.connect(self.search)
        self.search_button = QPushButton("Search")
        self.search_button.clicked.connect(self.search)
        row.addWidget(self.query, 1)
        row.addWidget(self.search_button)
        layout.addLayout(row)
        self.status = QLabel()  # what was found, over the results
        self.status.setObjectName("hint")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self.pages = QStackedWidget()  # a message while there are no results
        self.message = QLabel(START)
        self.message.setObjectName("placeholder")
        self.message.setWordWrap(True)
        self.message.setAlignment(Qt.AlignCenter)
        self.message.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.results = _table(RESULT_COLUMNS, "hubResults", stretch=0)
        self.results.itemSelectionChanged.connect(self.open_selected)
        message_page = QWidget()
        column = QVBoxLayout(message_page)
        column.setContentsMargins(0, 12, 0, 0)
        column.addWidget(self.message)
        column.addStretch(1)
        self.pages.addWidget(message_page)
        self.pages.addWidget(self.results)
        layout.addWidget(self.pages, 3)
        self.opened_label = QLabel(PICK_HINT)
        self.opened_label.setWordWrap(True)
        layout.addWidget(self.opened_label)
        self.quantizations = _table(QUANT_COLUMNS, "hubQuantizations", stretch=3)
        self.quantizations.itemSelectionChanged.connect(self.show_actions)
        self.quantizations.itemDoubleClicked.connect(lambda _: self.download())
        layout.addWidget(self.quantizations, 2)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        self.download_button = buttons.addButton("Download and use", QDialogButtonBox.AcceptRole)
        self.download_button.setAutoDefault(False)  # Enter in the search field searches
        self.download_button.clicked.connect(self.download)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.say(START)

    # searching ----------------------------------------------------------------------------
    def _next(self, kind: str) -> int:
        self.tickets[kind] += 1
        return self.tickets[kind]

    def search(self) -> None:
        query = self.query.text().strip()
        if not query:
            self.say("Type part of a model's name first, for example: qwen.")
            return
        ticket = self._next("search")
        self._next("sizes")  # the open model's sizes are no longer wanted
        self.cancel.set()
        self.cancel = cancel = threading.Event()
        self.models, self.opened = [], None
        self.results.setRowCount(0)
        self.say(f"Searching Hugging Face for “{query}”…")
        self.deadline.start()
        factory = self.api_factory

        def work(say) -> None:
            say(search_models(factory(), query, cancel.is_set))

        self.background.start("search", ticket, work)

    def no_answer(self) -> None:
        self._next("search")  # a late answer is dropped
        self.cancel.set()
        self.say(no_answer_message(), problem=True)

    def answered(self, kind: str, ticket: int, result, error) -> None:
        if kind == "sizes" and result is not None:  # a size holds whatever is open now
            repo, size = result
            self.sizes[repo] = size
        if kind == "sizes" and isinstance(error, tuple):
            repo, error = error
            self.size_errors[repo] = str(error)
            if error.offline:
                self.status.setText(str(error))  # the results stay; their sizes cannot come
        if ticket != self.tickets[kind]:
            return
        if kind == "search":
            self.deadline.stop()
            if error is not None:
                self.say(str(error), problem=True)
            else:
                self.show_results(result)
        else:
            self.show_opened()

    def show_results(self, models: list[HubModel]) -> None:
        self.models = models
        query = self.query.text().strip()
        if not models:
            self.say(f"No MLX models on Hugging Face match “{query}”.")
            return
        repos = sum(len(m.quantizations) for m in models)
        self.status.setText(
            f"{_count(len(models), 'model')} ({_count(repos, 'download')} to choose from) for "
            f"“{query}”, most downloaded first. Open one to see its sizes."
        )
        self.show_page(results=True)
        self.results.setRowCount(len(models))
        for row, model in enumerate(models):
            labels = ", ".join(q.label for q in model.quantizations)
            tip = "\n".join(q.repo for q in model.quantizations)
            texts = (model.name, model.parameters, labels)
            counts = (count_text(model.downloads), count_text(model.likes))
            _fill_row(self.results, row, (*texts, *counts), numbers=(1, 3, 4))
            self.results.item(row, 0).setToolTip(tip)

    def say(self, text: str, problem: bool = False) -> None:
        """A message in place of the results: where to start, searching, none found, or
        why the hub gave no answer (``problem``, marked as a warning)."""
        self.message.setText(text)
        self.message.setObjectName("hubProblem" if problem else "placeholder")
        self.message.setStyle(self.message.style())  # the style sheet reads the new name
        self.message.setAlignment(Qt.AlignLeft if problem else Qt.AlignCenter)
        self.status.setText("")
        self.show_page(results=False)

    def show_page(self, results: bool) -> None:
        self.pages.setCurrentIndex(1 if results else 0)
        self.status.setVisible(results)
        self.opened_label.setVisible(results)
        self.quantizations.setVisible(results)
        self.show_opened()

    # a model's quantizations --------------------------------------------------------------
    def open_selected(self) -> None:
        rows = self.results.selectionModel().selectedRows()
        self.opened = self.models[rows[0].row()] if rows else None
        self.show_opened()
        if self.opened is None:
            return
        wanted = [q.repo for q in self.opened.quantizations if q.repo not in self.sizes]
        ticket = self._next("sizes")
        if not wanted:
            return
        factory, tickets = self.api_factory, self.tickets

        def work(say) -> None:
            api = factory()
            for repo in wanted:
                if tickets["sizes"] != ticket:  # another model was opened: stop asking
                    return
                try:
                    say((repo, repo_size(api, repo)))
                except HubUnavailable as error:
                    say(error=(repo, error))
                    if error.offline:
                        return

        self.background.start("sizes", ticket, work)

    def show_opened(self) -> None:
        model = self.opened
        selected = self.selected()
        self.quantizations.setRowCount(0 if model is None else len(model.quantizations))
        if model is None:
            self.opened_label.setText(PICK_HINT)
            self.show_actions()
            return
        self.opened_label.setText(f"<b>{model.name}</b>: choose a quantization to download.")
        here = {m.name: m for m in installed_models()}
        for row, quantization in enumerate(model.quantizations):
            _fill_row(
                self.quantizations,
                row,
                (
                    quantization.label,
                    self.size_cell(quantization, here.get(quantization.repo)),
                    count_text(quantization.downloads),
                    quantization.repo,
                ),
                numbers=(1, 2),
            )
            if quantization.repo in self.size_errors:
                self.quantizations.item(row, 1).setToolTip(self.size_errors[quantization.repo])
            if quantization.repo == selected:
                self.quantizations.selectRow(row)
        self.show_actions()

    def size_cell(self, quantization: Quantization, installed) -> str:
        repo = quantization.repo
        if repo in self.sizes:
            size = self.sizes[repo]
            text = size_text(size) if size is not None else "size unknown"
        else:
            text = "not known" if repo in self.size_errors else "asking…"
        if installed is not None:
            text += " · here" if installed.complete else " · part here, resumes"
        return text

    # choosing -----------------------------------------------------------------------------
    def selected(self) -> str | None:
        rows = self.quantizations.selectionModel().selectedRows()
        if not rows or self.opened is None:
            return None
        return self.opened.quantizations[rows[0].row()].repo

    def show_actions(self) -> None:
        self.download_button.setEnabled(self.selected() is not None)

    def download(self) -> None:
        repo = self.selected()
        if repo:
            self.chosen.emit(repo)
            self.accept()

    def done(self, result: int) -> None:
        self.cancel.set()
        self.deadline.stop()
        for kind in self.tickets:  # answers still on their way are dropped
            self._next(kind)
        super().done(result)
