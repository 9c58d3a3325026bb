"""The open chat's own system prompt: a line above the transcript that unfolds into an editor.

The text goes to the controller (``ChatController.set_system_prompt``), which keeps it
with the chat; the settings panel's system prompt is the default a new chat starts with.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from .keyboard import tab_leaves
from .zoom import keep_lines, small_print

TYPING_PAUSE_MS = 400  # a prompt is saved once typing stops (the settings panel uses it too)
EDITOR_LINES = 4  # lines a system prompt's box shows (the settings panel's box too)


class SystemPromptBar(QFrame):
    promptEdited = Signal(str)

    def __init__(self, controller=None, parent=None):
        super().__init__(parent)
        self.setObjectName("systemPromptBar")
        self._prompt = ""
        column = QVBoxLayout(self)
        column.setContentsMargins(12, 4, 12, 4)
        column.setSpacing(4)
        row = QHBoxLayout()
        row.setSpacing(6)
        self.toggle = QToolButton()
        self.toggle.setObjectName("systemPromptToggle")
        self.toggle.setText("System prompt")
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setArrowType(Qt.RightArrow)
        self.toggle.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        self.toggle.setToolTip(
            "Instructions sent before this chat, for this chat only. New chats start with the "
            "default from Settings → System prompt."
        )
        self.toggle.toggled.connect(self._unfold)
        row.addWidget(self.toggle)
        self.summary = QLabel()
        self.summary.setObjectName("hint")
        small_print(self.summary)
        self.summary.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        row.addWidget(self.summary, 1)
        self.row = row
        column.addLayout(row)
        self.editor = QPlainTextEdit()
        self.editor.setObjectName("systemPromptEditor")
        self.editor.setPlaceholderText("No system prompt: the model gets the chat alone")
        keep_lines(self.editor, EDITOR_LINES)
        self.editor.setAccessibleName("System prompt for this chat")
        tab_leaves(self.editor)
        self.editor.setVisible(False)
        column.addWidget(self.editor)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(TYPING_PAUSE_MS)
        self._timer.timeout.connect(self.flush)
        self.editor.textChanged.connect(self._typed)
        self.editor.installEventFilter(self)
        if controller is not None:
            self.set_prompt(controller.system_prompt)
            self.promptEdited.connect(controller.set_system_prompt)
            controller.systemPromptChanged.connect(self.set_prompt)

    def attach(self, beside: QWidget, below: QWidget) -> None:
        """Another setting of the chat: ``beside`` at the line's end, ``below`` under it all."""
        self.row.addWidget(beside)
        self.layout().addWidget(below)

    def prompt(self) -> str:
        return self.editor.toPlainText()

    def set_prompt(self, text: str) -> None:
        """Show ``text`` (the chat that was opened, or the saved edit)."""
        self._timer.stop()
        self._prompt = text
        if self.editor.toPlainText() != text:
            self.editor.blockSignals(True)
            self.editor.setPlainText(text)
            self.editor.blockSignals(False)
        self._summarize()

    def flush(self) -> None:
        """Hand on an edit still waiting for its typing pause."""
        self._timer.stop()
        text = self.editor.toPlainText()
        if text != self._prompt:
            self._prompt = text
            self.promptEdited.emit(text)
        self._summarize()

    def eventFilter(self, watched, event):
        if watched is self.editor and event.type() == event.Type.FocusOut:
            self.flush()  # before Send takes the focus, so the answer gets the new prompt
        return super().eventFilter(watched, event)

    def _typed(self) -> None:
        self._timer.start()

    def _unfold(self, open_: bool) -> None:
        self.toggle.setArrowType(Qt.DownArrow if open_ else Qt.RightArrow)
        self.editor.setVisible(open_)
        if open_:
            self.editor.setFocus()
        self._summarize()

    def _summarize(self) -> None:
        text = " ".join(self._prompt.split())
        if self.toggle.isChecked():  # the editor shows it whole
            self.summary.clear()
            return
        if not text:
            self.summary.setText("none")
            self.summary.setToolTip("")
            return
        width = max(self.summary.width(), 80)
        self.summary.setText(
            QFontMetrics(self.summary.font()).elidedText(text, Qt.ElideRight, width)
        )
        self.summary.setToolTip(self._prompt)

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self._summarize()
