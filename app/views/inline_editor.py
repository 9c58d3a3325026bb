"""An answer's text edited where it stands, in its card: a text box in place of the text,
with Save (Ctrl+Enter) and Cancel (Esc) under it.

``InlineEditor.open_on(view, save)`` puts the editor in a transcript card
(``app.views.transcript.MessageView``): the card's text, thinking, footer and buttons step aside
until the edit ends, and the card's re-rendering (a theme or highlight change) waits until
then too. ``save(text)`` says whether the edit was taken; when it was not (an
answer is being written: the banner says why), the editor opens again with the text typed.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
)

from .keyboard import tab_leaves
from .zoom import small_print

# Lines of text the box shows before it scrolls: a screenful of a long answer, no more, so
# Save and Cancel stay in sight in a 760-px window
EDITOR_LINES = 16


class AnswerEditBox(QPlainTextEdit):
    """Ctrl+Enter saves, Esc cancels; every other key edits."""

    saveRequested = Signal()
    cancelRequested = Signal()

    def keyPressEvent(self, event):  # noqa: N802 (Qt's name)
        if event.key() == Qt.Key_Escape:
            self.cancelRequested.emit()
            return
        if event.key() in (Qt.Key_Return, Qt.Key_Enter) and (
            event.modifiers() & Qt.ControlModifier
        ):
            self.saveRequested.emit()
            return
        super().keyPressEvent(event)


class InlineEditor(QFrame):
    """The edit box and its Save / Cancel row, inside one card."""

    def __init__(self, view, save: Callable[[str], bool], text: str):
        super().__init__(view)
        self.setObjectName("inlineEditor")
        self.view = view
        self._save = save
        self.original = view.text
        self._hidden = [
            w
            for w in (view.thinking, view.body, view.footer, view.actions, view.vary_row)
            if not w.isHidden()
        ]
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(4)
        self.note = QLabel(
            "The edited text replaces the answer and is what the model reads next. Its "
            "highlights and speed figures belong to the text the model wrote, so they go."
        )
        self.note.setObjectName("hint")
        small_print(self.note)
        self.note.setWordWrap(True)
        column.addWidget(self.note)
        self.box = AnswerEditBox(text)
        self.box.setAccessibleName("Edited answer")
        tab_leaves(self.box)
        lines = max(3, min(EDITOR_LINES, text.count("\n") + 2))
        self.box.setFixedHeight(lines * self.box.fontMetrics().lineSpacing() + 16)
        self.box.saveRequested.connect(self.save)
        self.box.cancelRequested.connect(self.cancel)
        self.box.textChanged.connect(self._enable_save)
        column.addWidget(self.box)
        row = QHBoxLayout()
        row.addStretch(1)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Keep the answer as it was (Esc)")
        self.cancel_button.clicked.connect(self.cancel)
        self.save_button = QPushButton("Save")
        self.save_button.setObjectName("primary")
        self.save_button.setToolTip("Replace the answer with this text (Ctrl+Enter)")
        self.save_button.clicked.connect(self.save)
        row.addWidget(self.cancel_button)
        row.addWidget(self.save_button)
        column.addLayout(row)

    @classmethod
    def open_on(cls, view, save: Callable[[str], bool], text: str | None = None) -> InlineEditor:
        """Edit ``view``'s text (or ``text``) in place; ``save(text)`` takes a changed text."""
        if isinstance(editor := view.findChild(InlineEditor), InlineEditor):
            editor.box.setFocus()  # already being edited
            return editor
        editor = cls(view, save, view.text if text is None else text)
        layout = view.layout()
        layout.insertWidget(layout.indexOf(view.body), editor)
        for widget in editor._hidden:
            widget.hide()
        view.editing = editor  # a restyle now waits until the edit ends (MessageView.refresh)
        editor.show()
        editor.box.setFocus()
        editor.box.moveCursor(editor.box.textCursor().MoveOperation.End)
        return editor

    def show_after(self, widget, shown: bool) -> None:
        """Whether the card shows ``widget`` (a part the editor put aside) once the edit
        ends: the transcript's rows change while the card is edited (a setting changed)."""
        if shown and widget not in self._hidden:
            self._hidden.append(widget)
        elif not shown and widget in self._hidden:
            self._hidden.remove(widget)

    def _enable_save(self) -> None:
        self.save_button.setEnabled(bool(self.box.toPlainText().strip()))

    def save(self) -> None:
        text = self.box.toPlainText()
        if not text.strip():
            return  # an answer cannot be emptied (Delete removes it)
        self.close_editor()  # the card as it was, before the chat is shown again
        if text != self.original and not self._save(text):
            InlineEditor.open_on(self.view, self._save, text)  # refused: nothing typed is lost

    def cancel(self) -> None:
        self.close_editor()

    def close_editor(self) -> None:
        """Take the editor away and show the card as it was, restyled if it was meanwhile
        (a theme or highlight change)."""
        for widget in self._hidden:
            widget.show()
        self.view.editing = None
        self.view.refresh_if_dirty()
        self.view.layout().removeWidget(self)
        self.setParent(None)
        self.deleteLater()
