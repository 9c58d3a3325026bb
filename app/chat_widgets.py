"""Small parts of the main window: the composer (text box, Send and Stop), the bar shown
while an earlier question is edited, and the banner above the transcript."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
)


class ChatInput(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line."""

    submitted = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("chatInput")
        self.setPlaceholderText("Message Draftless — Enter to send, Shift+Enter for a new line")
        self.setTabChangesFocus(True)
        self.setFixedHeight(72)

    def keyPressEvent(self, event):
        if event.key() in (Qt.Key_Return, Qt.Key_Enter) and not (
            event.modifiers() & Qt.ShiftModifier
        ):
            self.submitted.emit(self.toPlainText())
            return
        super().keyPressEvent(event)


class Composer(QFrame):
    """The message box with Send and Stop beside it."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("composer")
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 8, 12, 10)
        self.input = ChatInput()
        row.addWidget(self.input, 1)
        buttons = QVBoxLayout()
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("primary")
        self.send_button.setToolTip("Send (Enter)")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stop")
        self.stop_button.setToolTip("Stop the answer after the current pass (Esc)")
        self.stop_button.setEnabled(False)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        row.addLayout(buttons)


class EditBar(QFrame):
    """Shown above the composer while an earlier question is being edited."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("editBar")
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 4, 12, 0)
        label = QLabel(
            "Editing an earlier question: Send starts a new branch from it "
            "(the earlier version stays, ← → switch)."
        )
        label.setWordWrap(True)
        row.addWidget(label, 1)
        self.cancel_button = QPushButton("Cancel edit")
        row.addWidget(self.cancel_button)
        self.hide()


class Banner(QFrame):
    """A dismissable line above the transcript for errors and notices.

    A failure of the engine (a model that did not load, a server that refused the key, an
    answer that failed) is marked with ``engine_failed``; ``engine_works`` (a load or an
    answer that succeeded) takes such a message away, since it no longer holds. Other
    notices stay until dismissed."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("banner")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 6, 6)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.PlainText)  # messages quote paths and errors as they are
        self.label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addWidget(self.label, 1)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        layout.addWidget(close, 0, Qt.AlignTop)
        self.messages: list[str] = []
        self.engine_failures: set[str] = set()
        self.hide()

    def show_message(self, text: str) -> None:
        self.messages.append(text)
        self.label.setText(text)
        self.show()

    def engine_failed(self, text: str) -> None:
        """``text`` (shown now or about to be) tells of an engine failure."""
        if text:
            self.engine_failures.add(text)

    def engine_works(self) -> None:
        """The engine loaded or answered: a failure it reported earlier is gone."""
        if self.label.text() in self.engine_failures:
            self.hide()
        self.engine_failures.clear()


def ask_to_delete(parent, title: str, question: str) -> bool:
    """Ask ``question`` with Delete and Cancel (the default); True when Delete was pressed."""
    box = QMessageBox(QMessageBox.Warning, title, question, QMessageBox.Cancel, parent)
    box.setObjectName("confirmDelete")
    delete = box.addButton("Delete", QMessageBox.DestructiveRole)
    box.setDefaultButton(QMessageBox.Cancel)
    box.exec()
    return box.clickedButton() is delete
