"""Find within the open chat (Ctrl+F): a bar above the transcript that steps through the
places a text occurs, opening each card and marking the words there.

Matching folds case and Unicode forms as the chat search does (``store.folded``), over every
message of the chat, the ones whose cards are not built yet included; the transcript builds
the card of a match when it is shown (``TranscriptView.view_of``).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QTextEdit,
    QToolButton,
)

from ..storage.store import folded
from . import theme
from .zoom import small_print


def find_matches(messages, query: str) -> list[tuple[int, int]]:
    """(message id, occurrence) of each place ``query`` occurs in ``messages``, in order."""
    wanted = folded(query)
    if not wanted.strip():
        return []
    return [
        (message.id, n)
        for message in messages
        if message.id is not None
        for n in range(folded(message.content).count(wanted))
    ]


class FindEdit(QLineEdit):
    """Enter: the next match; Shift+Enter: the one before; Esc: close the bar."""

    stepRequested = Signal(int)
    closeRequested = Signal()

    def keyPressEvent(self, event):  # noqa: N802 (Qt's name)
        if event.key() in (Qt.Key_Return, Qt.Key_Enter):
            self.stepRequested.emit(-1 if event.modifiers() & Qt.ShiftModifier else 1)
            return
        if event.key() == Qt.Key_Escape:
            self.closeRequested.emit()
            return
        super().keyPressEvent(event)


class FindBar(QFrame):
    """'Find in this chat' with the match count, ↑ ↓ and ✕; hidden until Ctrl+F."""

    closed = Signal()

    def __init__(self, controller, transcript, parent=None):
        super().__init__(parent)
        self.setObjectName("findBar")
        self.controller = controller
        self.transcript = transcript
        self.matches: list[tuple[int, int]] = []
        self.index = -1
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 4, 12, 4)
        row.setSpacing(6)
        self.edit = FindEdit()
        self.edit.setPlaceholderText("Find in this chat — Enter for the next, Shift+Enter back")
        self.edit.setAccessibleName("Find in this chat")
        self.edit.setClearButtonEnabled(True)
        self.edit.textChanged.connect(lambda _: self.search())
        self.edit.stepRequested.connect(self.step)
        self.edit.closeRequested.connect(self.close_bar)
        row.addWidget(self.edit, 1)
        self.count = QLabel()
        self.count.setObjectName("hint")
        small_print(self.count)
        row.addWidget(self.count)
        for text, name, step in (("↑", "Previous match", -1), ("↓", "Next match", 1)):
            button = QToolButton()
            button.setText(text)
            button.setToolTip(f"{name} ({'Shift+' if step < 0 else ''}Enter)")
            button.setAccessibleName(name)
            button.setAutoRaise(True)
            button.clicked.connect(lambda *_, step=step: self.step(step))
            row.addWidget(button)
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Close (Esc)")
        close.setAccessibleName("Close find")
        close.setAutoRaise(True)
        close.clicked.connect(self.close_bar)
        row.addWidget(close)
        self.hide()
        controller.sessionOpened.connect(lambda _: self.search(show=False))

    def open(self, query: str | None = None) -> None:
        """Show the bar with the focus in it (``query``: look for that, from the start)."""
        self.show()
        if query is not None and query != self.edit.text():
            self.edit.setText(query)  # searches
        else:
            self.search()
        self.edit.setFocus()
        self.edit.selectAll()

    def close_bar(self) -> None:
        self._mark(None)
        self.hide()
        self.closed.emit()

    def search(self, show: bool = True) -> None:
        """Find the text again in the open chat and show its first match."""
        self._mark(None)
        self.matches = find_matches(self.controller.messages, self.edit.text())
        self.index = -1
        if show and self.isVisible():
            self.step(1)
        else:
            self._count()

    def step(self, step: int) -> None:
        """Show the next (1) or previous (-1) match, around the ends."""
        if not self.matches:
            self._count()
            return
        self.index = (self.index + step) % len(self.matches)
        self._count()
        self._show(*self.matches[self.index])

    def _count(self) -> None:
        if not self.edit.text().strip():
            self.count.setText("")
        elif not self.matches:
            self.count.setText("not found")
        else:
            self.count.setText(f"{max(self.index, 0) + 1} of {len(self.matches)}")

    def _show(self, message_id: int, occurrence: int) -> None:
        """Open the card of ``message_id``, mark the match and scroll it into sight."""
        view = self.transcript.view_of(message_id)
        if view is None:
            return
        self._mark(view.body, occurrence)
        self.transcript.show_card(view, self._marked_top(view))

    def _mark(self, body, occurrence: int = 0) -> None:
        """Paint the ``occurrence``-th place of the text in ``body`` (None: clear the mark)."""
        previous = getattr(self, "_marked", None)
        if previous is not None:
            try:
                previous.setExtraSelections([])
            except RuntimeError:  # its card was released meanwhile
                pass
        self._marked, self._cursor = body, None
        if body is None:
            return
        cursor = QTextCursor(body.document())
        for _ in range(occurrence + 1):
            found = body.document().find(self.edit.text(), cursor)
            if found.isNull():
                break
            cursor = found
        if not cursor.hasSelection():
            return  # the rendered text folds it differently (an accent, Markdown): the card
        mark = QTextEdit.ExtraSelection()
        mark.cursor = cursor
        mark.format.setBackground(QColor(theme.current().mark))
        mark.format.setForeground(QColor(theme.current().base))
        body.setExtraSelections([mark])
        self._cursor = cursor

    def _marked_top(self, view) -> int:
        """Where the marked words begin in the card (0: its top)."""
        if self._cursor is None:
            return 0
        top = view.body.cursorRect(self._cursor).top()
        return max(view.body.mapTo(view, view.body.rect().topLeft()).y() + top, 0)
