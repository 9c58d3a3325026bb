"""The Server panel: serve a model to other programs (``python -m engine serve`` started by
the app, ``local_server``), its status, the addresses to give a client and its log.

The view only: ``server_presenter`` starts and stops the server and fills it in."""

from __future__ import annotations

import secrets

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QTextOption
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.api import SERVER_KEY_VARIABLE

from ..presenters.local_server import (
    FAILED,
    LOG_LINES,
    RUNNING,
    STARTING,
    STOPPED,
    STOPPING,
    Launch,
)
from .flow_layout import FlowLayout
from .transcript import copy_text

CHATS_MODEL = ""  # the model list's first entry: whatever model the chat has loaded
EXAMPLE_LINES = 8  # the curl example's height, wrapped in the panel's width
LOG_HEIGHT_LINES = 12


def curl_example(address: str, model: str, keyed: bool) -> str:
    """A chat request to paste into a terminal; a key is named, never shown."""
    key = f' \\\n  -H "Authorization: Bearer ${SERVER_KEY_VARIABLE}"' if keyed else ""
    body = (
        f'{{"model": "{model or "default"}", "messages": [{{"role": "user", "content": "Hello"}}]}}'
    )
    return (
        f"curl {address}/v1/chat/completions \\\n"
        f'  -H "Content-Type: application/json"{key} \\\n'
        f"  -d '{body}'"
    )


def status_text(state: str, detail: str) -> str:
    if state == RUNNING:
        return f"Running at {detail}"
    if state == STARTING:
        return f"Starting: {detail}…"
    if state == STOPPING:
        return "Stopping…"
    if state == FAILED:
        return f"Failed: {detail}"
    return f"Stopped. {detail}".strip()


def _mono_box(accessible: str, lines: int) -> QPlainTextEdit:
    box = QPlainTextEdit()
    box.setReadOnly(True)
    box.setAccessibleName(accessible)
    box.setFont(QFontDatabase.systemFont(QFontDatabase.FixedFont))
    box.setWordWrapMode(QTextOption.WrapAtWordBoundaryOrAnywhere)  # the panel is narrow
    box.setTabChangesFocus(True)  # Tab leaves the box: the panel stays keyboard-reachable
    box.setFixedHeight(box.fontMetrics().lineSpacing() * lines + 12)
    return box


class ServerPanel(QWidget):
    startRequested = Signal(object)  # Launch (its model: CHATS_MODEL for the chat's)
    stopRequested = Signal()
    restartRequested = Signal()  # with the chat's new model
    copied = Signal(str)  # what was copied, for the status bar

    def __init__(self, default_port: int, parent=None):
        super().__init__(parent)
        self.setObjectName("serverPanel")
        self.setAccessibleName("Server")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(10)
        intro = QLabel(
            "Serve a model to other programs: OpenAI and Ollama clients, editors, scripts. "
            "It runs beside the chat, in a process of its own, with its own copy of the model."
        )
        intro.setObjectName("hint")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        layout.addWidget(self._serve_box(default_port))
        layout.addWidget(self._status_box())
        layout.addWidget(self._log_box())
        layout.addStretch(1)
        self.network.toggled.connect(self._show_network)
        self._show_network(False)
        self.show_state(STOPPED, "")

    def _serve_box(self, default_port: int) -> QGroupBox:
        box = QGroupBox("Serve")
        column = QVBoxLayout(box)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        self.model = QComboBox()
        self.model.setAccessibleName("Model to serve")
        self.model.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.model.setMinimumContentsLength(12)
        form.addRow("Model", self.model)
        self.model_note = QLabel()  # the whole name, which the list cuts short
        self.model_note.setObjectName("hint")
        self.model_note.setWordWrap(True)
        self.model.currentTextChanged.connect(
            lambda text: self.model_note.setText("Serves " + text.replace("The", "the", 1))
        )
        self.port = QSpinBox()
        self.port.setRange(1, 65535)
        self.port.setValue(default_port)
        self.port.setAccessibleName("Port")
        self.port.setToolTip(f"The TCP port the server listens on (default {default_port})")
        form.addRow("Port", self.port)
        column.addLayout(form)
        column.addWidget(self.model_note)
        self.network = QCheckBox("On the network")
        self.network.setAccessibleName("Reachable from other machines on the network")
        self.network.setToolTip("Off: only programs on this machine can reach the server")
        column.addWidget(self.network)
        key_row = QHBoxLayout()
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.Password)
        self.key.setPlaceholderText("API key")
        self.key.setAccessibleName("API key")
        self.make_key = QPushButton("Make one")
        self.make_key.setAccessibleName("Make a random API key")
        self.make_key.clicked.connect(lambda: self.key.setText(secrets.token_urlsafe(24)))
        key_row.addWidget(self.key, 1)
        key_row.addWidget(self.make_key)
        column.addLayout(key_row)
        self.key_note = QLabel()
        self.key_note.setObjectName("hint")
        self.key_note.setWordWrap(True)
        column.addWidget(self.key_note)
        buttons = QHBoxLayout()
        self.start_button = QPushButton("Start server")
        self.start_button.setObjectName("primary")
        self.start_button.setAccessibleName("Start server")
        self.start_button.clicked.connect(self._start)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stop")
        self.stop_button.setAccessibleName("Stop server")
        self.stop_button.clicked.connect(self.stopRequested)
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        column.addLayout(buttons)
        return box

    def _status_box(self) -> QGroupBox:
        box = QGroupBox("Status")
        column = QVBoxLayout(box)
        self.status = QLabel()
        self.status.setObjectName("serverStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.status.setAccessibleName("Server status")
        column.addWidget(self.status)
        self.restart_button = QPushButton("Restart")
        self.restart_button.setAccessibleName("Restart the server with the chat's model")
        self.restart_button.clicked.connect(self.restartRequested)
        self.restart_button.hide()
        column.addWidget(self.restart_button, 0, Qt.AlignLeft)
        self.addresses = QWidget()
        rows = QVBoxLayout(self.addresses)
        rows.setContentsMargins(0, 0, 0, 0)
        self.openai_url = self._url_row(rows, "OpenAI base URL")
        self.ollama_url = self._url_row(rows, "Ollama base URL")
        column.addWidget(self.addresses)
        self.network_note = QLabel()
        self.network_note.setObjectName("hint")
        self.network_note.setWordWrap(True)
        self.network_note.setTextInteractionFlags(Qt.TextSelectableByMouse)
        column.addWidget(self.network_note)
        self.example = _mono_box("Example request with curl", EXAMPLE_LINES)
        column.addWidget(self.example)
        copy_row = QWidget()
        copies = FlowLayout(copy_row, spacing=6, align_right=False)
        self.copy_example = QPushButton("Copy example")
        self.copy_example.setAccessibleName("Copy the curl example")
        self.copy_example.clicked.connect(lambda: self._copy(self.example.toPlainText()))
        copies.addWidget(self.copy_example)
        column.addWidget(copy_row)
        return box

    def _url_row(self, rows: QVBoxLayout, accessible: str) -> QLineEdit:
        """A base URL over its own row: the field gets the panel's whole width."""
        title = QLabel(accessible)
        title.setObjectName("hint")
        rows.addWidget(title)
        field = QLineEdit()
        field.setReadOnly(True)
        field.setAccessibleName(accessible)
        button = QPushButton("Copy")
        button.setAccessibleName(f"Copy the {accessible}")
        button.clicked.connect(lambda: self._copy(field.text()))
        row = QHBoxLayout()
        row.addWidget(field, 1)
        row.addWidget(button)
        rows.addLayout(row)
        return field

    def _log_box(self) -> QGroupBox:
        box = QGroupBox("Log")
        column = QVBoxLayout(box)
        self.log = _mono_box(f"Server log (the last {LOG_LINES} lines)", LOG_HEIGHT_LINES)
        self.log.setMaximumBlockCount(LOG_LINES)
        column.addWidget(self.log)
        return box

    # what the person does ---------------------------------------------------------------
    def _start(self) -> None:
        on_network = self.network.isChecked()
        key = self.key.text().strip() or None
        model = self.model.currentData()
        self.startRequested.emit(Launch(model or CHATS_MODEL, self.port.value(), on_network, key))

    def _copy(self, text: str) -> None:
        if text:
            copy_text(text)
            self.copied.emit(text)

    def _show_network(self, on: bool) -> None:
        self.key_note.setText(
            "Other machines can reach it: an API key is needed (keep it secret; clients "
            "send it as a Bearer token). It is kept as a server's key is."
            if on
            else "Only programs on this machine can reach it. An API key is optional here."
        )

    # what the presenter shows -------------------------------------------------------------
    def set_models(self, chats_model: str, others: list[tuple[str, str]]) -> None:
        """The choices: the chat's model first, then (label, model) pairs."""
        chosen = self.model.currentData()
        self.model.clear()
        self.model.addItem(f"The chat's model: {chats_model or 'none loaded yet'}", CHATS_MODEL)
        for label, model in others:
            self.model.addItem(label, model)
        index = self.model.findData(chosen) if chosen else 0
        self.model.setCurrentIndex(max(index, 0))

    def set_key(self, key: str | None) -> None:
        self.key.setText(key or "")

    def show_state(self, state: str, detail: str) -> None:
        self.status.setText(status_text(state, detail))
        busy = state in (STARTING, RUNNING, STOPPING)
        for control in (self.model, self.port, self.network, self.key, self.make_key):
            control.setEnabled(not busy)
        self.start_button.setEnabled(not busy)
        self.stop_button.setEnabled(state in (STARTING, RUNNING))
        if busy:
            self.restart_button.hide()
        self.addresses.setVisible(state == RUNNING)
        self.example.setVisible(state == RUNNING)
        self.copy_example.parentWidget().setVisible(state == RUNNING)
        self.network_note.setVisible(state == RUNNING and self.network.isChecked())

    def show_running(self, address: str, model: str, keyed: bool, elsewhere: str) -> None:
        """The addresses and the example of a server that answers; ``elsewhere``: how
        other machines reach it ("" when they cannot)."""
        for field, url in ((self.openai_url, f"{address}/v1"), (self.ollama_url, address)):
            field.setText(url)
            field.setCursorPosition(0)  # its start in sight where the field is narrow
        self.example.setPlainText(curl_example(address, model, keyed))
        self.network_note.setText(
            f"From other machines: {elsewhere}/v1 (Ollama: {elsewhere}), with the API key."
            if elsewhere
            else ""
        )

    def offer_restart(self, text: str) -> None:
        self.status.setText(text)
        self.restart_button.show()

    def add_log(self, line: str) -> None:
        self.log.appendPlainText(line)
