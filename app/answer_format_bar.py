"""The open chat's answer format, beside its system prompt: a list (Text, JSON object, JSON
schema) and, for a schema, an editor that unfolds under the line to paste it in.

A schema is checked (app/answer_format.py) when the person presses Use schema: one that is
not JSON, not an object or past the engine's limits is named in a line under the editor,
nothing is saved and the text stays there to fix. The controller keeps the format with the
chat (``ChatController.set_answer_format``).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from .answer_format import JSON_SCHEMA, KINDS, TEXT, AnswerFormat, answer_format
from .keyboard import tab_leaves
from .system_prompt import EDITOR_LINES
from .zoom import keep_lines

# what the chat keeps answering with when a pasted schema is refused
KEPT = {TEXT: "free text", "json_object": "any JSON object", JSON_SCHEMA: "its earlier schema"}
PICKER_TIP = (
    "How this chat's answers are written: free text, any JSON object, or JSON that follows a "
    "schema you paste"
)
SHOWN_SCHEMA_CHARS = 600  # of a schema, in the list's tooltip
EXAMPLE = '{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}'


class AnswerFormatBar(QObject):
    """``picker`` goes on the system prompt's line, ``panel`` (the schema editor) under it."""

    formatChosen = Signal(object)  # AnswerFormat, checked

    def __init__(self, controller=None, parent=None):
        super().__init__(parent)
        self._format = AnswerFormat()
        self.picker = QWidget()
        row = QHBoxLayout(self.picker)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        label = QLabel("Answer")
        label.setObjectName("hint")
        self.kind = QComboBox()
        self.kind.setObjectName("answerFormat")
        self.kind.setAccessibleName("Answer format for this chat")
        for kind, name in KINDS.items():
            self.kind.addItem(name, kind)
        label.setBuddy(self.kind)
        self.kind.activated.connect(self._kind_chosen)
        self.edit_button = QToolButton()
        self.edit_button.setText("Edit schema")
        self.edit_button.setToolTip("Show this chat's JSON schema to change it")
        self.edit_button.clicked.connect(self._open_editor)
        for widget in (label, self.kind, self.edit_button):
            row.addWidget(widget)
        self.panel = self._schema_panel()
        if controller is not None:
            self.show_format(controller.answer_format)
            self.formatChosen.connect(controller.set_answer_format)
            controller.answerFormatChanged.connect(self.show_format)
        else:
            self.show_format(self._format)

    def _schema_panel(self) -> QWidget:
        panel = QWidget()
        column = QVBoxLayout(panel)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(4)
        self.editor = QPlainTextEdit()
        self.editor.setObjectName("schemaEditor")
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.FixedFont))
        self.editor.setPlaceholderText(f"Paste a JSON schema, such as {EXAMPLE}")
        self.editor.setAccessibleName("JSON schema for this chat")
        keep_lines(self.editor, EDITOR_LINES)
        tab_leaves(self.editor)
        column.addWidget(self.editor)
        self.notice = QLabel()
        self.notice.setObjectName("formatNotice")
        self.notice.setWordWrap(True)
        column.addWidget(self.notice)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(lambda: self.show_format(self._format))
        self.use_button = QPushButton("Use schema")
        self.use_button.setToolTip("Check the schema and answer in this chat by it from now on")
        self.use_button.clicked.connect(self.use_schema)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.use_button)
        column.addLayout(buttons)
        panel.setVisible(False)
        return panel

    def show_format(self, chosen: AnswerFormat) -> None:
        """Show the chat's format (the chat opened, or the one just saved), the editor folded."""
        self._format = chosen
        self.kind.setCurrentIndex(self.kind.findData(chosen.kind))
        shown = chosen.text[:SHOWN_SCHEMA_CHARS] + (
            "…" if len(chosen.text) > SHOWN_SCHEMA_CHARS else ""
        )
        self.kind.setToolTip(
            f"{PICKER_TIP}.\n\nThis chat's schema:\n{shown}" if shown else PICKER_TIP
        )
        self.edit_button.setVisible(chosen.kind == JSON_SCHEMA)
        self.editor.setPlainText(chosen.text)
        self.notice.clear()
        self.notice.setVisible(False)
        self.panel.setVisible(False)

    def _kind_chosen(self, index: int) -> None:
        kind = self.kind.itemData(index)
        if kind == JSON_SCHEMA:
            self._open_editor()
        elif kind != self._format.kind:
            self.formatChosen.emit(answer_format(kind))

    def _open_editor(self) -> None:
        self.kind.setCurrentIndex(self.kind.findData(JSON_SCHEMA))
        self.edit_button.setVisible(False)
        self.panel.setVisible(True)
        self.editor.setFocus()

    def use_schema(self) -> None:
        """Save the pasted schema for the chat, or say under the editor why it cannot be."""
        try:
            chosen = answer_format(JSON_SCHEMA, self.editor.toPlainText())
        except ValueError as error:
            self.notice.setText(
                f"{error} Not saved: this chat keeps answering in {KEPT[self._format.kind]}."
            )
            self.notice.setVisible(True)
            return
        self.formatChosen.emit(chosen)
