"""The open chat's answer format, beside its system prompt: a list (Text answers, JSON
object, JSON schema…) and, for a schema, an editor that unfolds under the line to paste it
in (choosing JSON schema… again unfolds it to change the schema).

A schema is checked (app/storage/answer_format.py) when the person presses Use schema: one that is
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
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ..storage.answer_format import JSON_SCHEMA, KINDS, TEXT, AnswerFormat, answer_format
from .keyboard import tab_leaves
from .system_prompt import EDITOR_LINES
from .zoom import keep_lines

# what the chat keeps answering with when a pasted schema is refused
KEPT = {TEXT: "free text", "json_object": "any JSON object", JSON_SCHEMA: "its earlier schema"}
PICKER_TIP = (
    "How this chat's answers are written: free text, any JSON object, or JSON that follows a "
    "schema you paste (choose JSON schema… again to change it)"
)
SHOWN_SCHEMA_CHARS = 600  # of a schema, in the list's tooltip
EXAMPLE = '{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}'


class AnswerFormatBar(QObject):
    """``picker`` (the list) goes on the system prompt's line, ``panel`` (the schema's
    editor) under it."""

    formatChosen = Signal(object)  # AnswerFormat, checked

    def __init__(self, controller=None, parent=None):
        super().__init__(parent)
        self._format = AnswerFormat()
        # one list on the system prompt's line: it fits beside it in a 600 px window
        self.picker = self.kind = QComboBox()
        self.kind.setObjectName("answerFormat")
        self.kind.setAccessibleName("Answer format for this chat")
        self.kind.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.kind.setSizePolicy(QSizePolicy.Fixed, QSizePolicy.Fixed)
        for kind, name in KINDS.items():
            self.kind.addItem(name, kind)
        self.kind.activated.connect(self._kind_chosen)
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
