"""Model → Connect to server…: the server's address and its API key (typed unseen)."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit, QVBoxLayout

from ..engines.remote_engine import TIMEOUTS_NOTE
from .zoom import small_print

DEFAULT_URL = "http://127.0.0.1:8080"


class ServerDialog(QDialog):
    def __init__(self, url: str, key: str | None, keychain: bool, parent=None):
        super().__init__(parent)
        self.setObjectName("serverDialog")
        self.setWindowTitle("Connect to server")
        layout = QVBoxLayout(self)
        intro = QLabel(
            "Answers come from a Draftless server (<code>python -m engine serve</code>) "
            "instead of this machine's engine."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        form = QFormLayout()
        self.url = QLineEdit(url or DEFAULT_URL)
        self.url.setPlaceholderText("for example http://studio.local:8080")
        self.url.setMinimumWidth(320)
        form.addRow("Address", self.url)
        self.key = QLineEdit(key or "")
        self.key.setEchoMode(QLineEdit.Password)
        self.key.setPlaceholderText("empty if the server needs none")
        form.addRow("API key", self.key)
        layout.addLayout(form)
        self.note = QLabel(
            (
                "The key is kept in the system keychain."
                if keychain
                else "No system keychain is available here: the key is kept until "
                "Draftless quits, and asked for again next time."
            )
            + " "
            + TIMEOUTS_NOTE
        )
        self.note.setObjectName("hint")
        small_print(self.note)
        self.note.setWordWrap(True)
        layout.addWidget(self.note)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Ok).setText("Connect")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def values(self) -> tuple[str, str | None]:
        return self.url.text().strip(), self.key.text().strip() or None
