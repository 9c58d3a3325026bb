"""The window by keyboard: Tab leaves every text field, Ctrl+Tab types a tab where one is
wanted, and Tab walks the controls in the order a person reads the screen.

Qt's own Tab order is the order the widgets were made in; the model picker, the cards of
the transcript and the chips are made later than the docks, so Tab jumped from the composer
to the chat list and reached the picker last. ``screen_order`` orders the focusable controls
by the window's columns (the chat list, the chat, the side panels, the status bar), then
row by row, left to right, whenever Tab is pressed, so the cards made since are in place.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt
from PySide6.QtWidgets import QDockWidget, QPlainTextEdit, QScrollArea, QTextEdit, QWidget

TAB_MODIFIERS = Qt.ControlModifier | Qt.MetaModifier  # Ctrl (Cmd on a Mac), or the Mac's Ctrl


class TypesTab(QObject):
    """Ctrl+Tab types a tab character into the text field it watches (Tab moves on)."""

    def eventFilter(self, watched, event):
        if (
            event.type() == QEvent.KeyPress
            and event.key() == Qt.Key_Tab
            and event.modifiers() & TAB_MODIFIERS
        ):
            watched.insertPlainText("\t")
            return True
        return super().eventFilter(watched, event)


def tab_leaves(editor: QPlainTextEdit | QTextEdit) -> None:
    """Tab and Shift+Tab move the focus out of ``editor``; Ctrl+Tab types a tab in it."""
    editor.setTabChangesFocus(True)
    typist = TypesTab(editor)
    editor.installEventFilter(typist)


def focusable(widget: QWidget, window: QWidget) -> bool:
    """A control Tab stops at: on the screen, enabled, taking Tab focus, of ``window``."""
    return (
        widget.isVisible()
        and widget.isEnabled()
        and bool(widget.focusPolicy() & Qt.TabFocus)
        and widget.focusProxy() is None
        and widget.window() is window
        and not _holds_controls(widget)
        and not _in_hidden_tab(widget)
    )


def _holds_controls(widget: QWidget) -> bool:
    """A plain scroll area around a panel of controls (the settings): its controls take the
    focus, not the frame (the transcript scrolls its cards, which it also holds)."""
    return isinstance(widget, QScrollArea) and widget.objectName() != "transcript"


def _in_hidden_tab(widget: QWidget) -> bool:
    """In a dock tabbed behind another (Qt keeps it "visible", out of sight)."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QDockWidget):
            return parent.visibleRegion().isEmpty()
        parent = parent.parentWidget()
    return False


def reading_order(rects: list[tuple[QWidget, QRect]]) -> list[QWidget]:
    """Row by row, each row left to right: a widget is on the row of the first one above it
    when it begins above that one's middle (a button beside a taller text box). A control
    that holds others (the transcript and its cards' buttons) comes just before them."""
    widgets = [w for w, _ in rects]
    holders = [w for w in widgets if any(w is not o and w.isAncestorOf(o) for o in widgets)]
    rows: list[list[tuple[QWidget, QRect]]] = []
    for widget, rect in sorted(rects, key=lambda item: (item[1].top(), item[1].left())):
        if widget in holders:
            continue
        if rows and rect.top() < rows[-1][0][1].center().y():
            rows[-1].append((widget, rect))
        else:
            rows.append([(widget, rect)])
    ordered = [w for row in rows for w, _ in sorted(row, key=lambda i: (i[1].left(), i[1].top()))]
    for holder in holders:
        first = next((i for i, w in enumerate(ordered) if holder.isAncestorOf(w)), len(ordered))
        ordered.insert(first, holder)
    return ordered


def screen_order(window, columns: list[QWidget]) -> list[QWidget]:
    """The focusable controls of ``window`` column by column (``columns``: the widgets that
    hold each column, left to right), each in reading order. A control no column holds (the
    tabs of docks tabbed together) follows the column it stands in."""
    found = [w for w in window.findChildren(QWidget) if focusable(w, window)]
    spans = [(c, _rect_in(c, window)) for c in columns if c.isVisible()]
    held: list[list[QWidget]] = [[] for _ in spans]
    loose: list[list[QWidget]] = [[] for _ in range(len(spans) + 1)]
    for widget in found:
        holder = next((i for i, (c, _) in enumerate(spans) if c.isAncestorOf(widget)), None)
        if holder is not None:
            held[holder].append(widget)
            continue
        middle = _rect_in(widget, window).center().x()
        beside = (i for i, (_, r) in enumerate(spans) if r.left() <= middle <= r.right())
        loose[next(beside, len(spans))].append(widget)
    ordered: list[QWidget] = []
    for group in [g for pair in zip(held, loose) for g in pair] + [loose[-1]]:
        ordered += reading_order([(w, _rect_in(w, window)) for w in group])
    return ordered


def _rect_in(widget: QWidget, window: QWidget) -> QRect:
    return QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())


def move_focus(window, columns: list[QWidget], forward: bool) -> bool:
    """Tab (``forward``) or Shift+Tab from the focused control in screen order; False when
    the focus is not on one of ``window``'s controls (Qt's own order then applies)."""
    order = screen_order(window, columns)
    current = window.focusWidget()
    while current is not None and current not in order and current is not window:
        current = current.parentWidget()  # a part of a control (a spin box's line edit)
    if not order or current not in order:
        return False
    target = order[(order.index(current) + (1 if forward else -1)) % len(order)]
    target.setFocus(Qt.TabFocusReason if forward else Qt.BacktabFocusReason)
    _show(target)
    return True


def _show(widget: QWidget) -> None:
    """Scroll every scroll area around ``widget`` to it (the settings, the transcript)."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QScrollArea) and parent.widget() is not None:
            parent.ensureWidgetVisible(widget, 0, 20)
        parent = parent.parentWidget()
