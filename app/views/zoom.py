"""Zoom for the whole window: the transcript's text steps (``TranscriptView.set_zoom``) and
every other part of the window at the same factor, text boxes keeping their lines.

With a style sheet in use, a font set on the window does not reach the widgets the sheet
styles (each holds a font of its own, unlike plain Qt), so ``zoom_window`` gives each part
of the window its font at the new size; widgets made later take their parent's. The
transcript sizes its own cards (a long chat's cards are built as the reader comes near).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QPlainTextEdit, QWidget


def zoom_window(window: QWidget, before: float, after: float, keep: QWidget) -> None:
    """Every part of ``window`` but ``keep`` (and what it holds) from zoom ``before`` to
    ``after`` (1 is the application's text size)."""
    if after == before:
        return
    parts = [w for w in [window, *window.findChildren(QWidget)] if not _inside(w, keep)]
    sizes = [w.font().pointSizeF() * after / before for w in parts]  # before any changes
    for widget, size in zip(parts, sizes):
        if size > 0:  # a font sized in pixels by the style sheet keeps its size
            font = QFont(widget.font())
            font.setPointSizeF(size)
            widget.setFont(font)


def _inside(widget: QWidget, keep: QWidget) -> bool:
    return widget is keep or keep.isAncestorOf(widget)


def zoom_of(widget: QWidget) -> float:
    """How much bigger than the application's ``widget``'s text is."""
    base = QApplication.font().pointSizeF()
    return widget.font().pointSizeF() / base if base > 0 else 1.0


class LinesTall(QObject):
    """Keeps a text box ``lines`` lines tall at any text size (fixed heights in pixels
    showed fewer lines as the text grew)."""

    def __init__(self, editor: QPlainTextEdit, lines: float):
        super().__init__(editor)
        self.lines = lines
        editor.installEventFilter(self)
        self.fit(editor)

    def fit(self, editor: QPlainTextEdit) -> None:
        margins = 2 * (editor.frameWidth() + editor.document().documentMargin())
        editor.setFixedHeight(round(self.lines * editor.fontMetrics().lineSpacing() + margins))

    def eventFilter(self, watched, event):
        if event.type() == QEvent.FontChange:
            self.fit(watched)
        return super().eventFilter(watched, event)


def keep_lines(editor: QPlainTextEdit, lines: float) -> None:
    """``editor`` stays ``lines`` lines of its text tall, whatever the zoom."""
    LinesTall(editor, lines)


CAPTION = 0.85  # small print (captions, message footers) to the text around it


def caption_font(font: QFont, around: QFont) -> QFont:
    """``font`` at ``CAPTION`` times the size of the text ``around`` it."""
    small = QFont(font)
    if around.pointSizeF() > 0:
        small.setPointSizeF(around.pointSizeF() * CAPTION)
    return small


class SmallPrint(QObject):
    """Sizes ``label`` as small print of its parent's text when it is first shown (from
    then on ``zoom_window`` scales it with the rest). A size in the style sheet stayed the
    same at every zoom."""

    def __init__(self, label: QWidget):
        super().__init__(label)
        label.installEventFilter(self)

    def eventFilter(self, watched, event):
        if event.type() in (QEvent.Polish, QEvent.ParentChange):
            parent = watched.parentWidget()
            around = parent.font() if parent is not None else QApplication.font()
            watched.setFont(caption_font(watched.font(), around))
        return super().eventFilter(watched, event)


def small_print(label: QWidget) -> QWidget:
    """``label`` as small print: smaller than the text around it, zoomed with it."""
    SmallPrint(label)
    return label
