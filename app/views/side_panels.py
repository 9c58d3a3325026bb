"""The window's side panels (the chat list; the settings and inspector, tabbed): they fold
when the chat would get narrower than it can use and come back when the window grows, and
showing one never widens the window. Which ones fit is ``panel_layout.fitting``; this
class applies it to the docks."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QFrame, QMainWindow, QScrollArea, QWidget

from .panel_layout import Panel, fitting


class SidePanels:
    def __init__(
        self, window: QMainWindow, groups: dict[str, list[QDockWidget]], widths: dict[str, int]
    ):
        """``groups`` in folding order, each a list of docks shown together (tabs)."""
        self.window = window
        self.groups = groups
        self.widths = widths  # the width each group needs, unclipped
        self.wanted = {group: True for group in groups}  # what the person has open
        self.folded: dict[str, list[QDockWidget]] = {}  # folded for room: back on growing
        self._fitting = False
        for group, docks in groups.items():
            for dock in docks:
                dock.toggleViewAction().triggered.connect(
                    lambda checked, group=group, dock=dock: self.toggled(group, dock, checked)
                )

    def open_docks(self, group: str) -> list[QDockWidget]:
        return [
            d for d in self.groups[group] if d.toggleViewAction().isChecked() and not d.isFloating()
        ]

    def room_taken(self, group: str) -> int:
        """A group whose open panels all float beside the window takes none of its width."""
        docks = [d for d in self.groups[group] if d.toggleViewAction().isChecked()]
        return 0 if docks and all(d.isFloating() for d in docks) else self.widths[group]

    def fit(self, width: int | None = None, keep: str | None = None) -> None:
        """Show the wanted panels that fit beside the chat, fold the others. Showing a panel
        never widens the window: what does not fit folds instead."""
        window = self.window
        if self._fitting:
            return
        self._fitting = True
        width = window.width() if width is None else width
        try:
            panels = [Panel(g, self.room_taken(g), self.wanted[g]) for g in self.groups]
            shown = fitting(width, panels, keep)
            for group in self.groups:  # fold first, so that showing finds the room
                if group not in shown and self.open_docks(group):
                    self.folded[group] = sorted(
                        self.open_docks(group),  # the raised tab first
                        key=lambda d: not d.isVisible(),
                    )
                    for dock in self.folded[group]:
                        dock.hide()
            for group in self.groups:
                docks = self.folded.pop(group, None) if group in shown else None
                if docks:
                    raised = docks[0]
                    for dock in docks:
                        dock.show()
                    raised.raise_()
                    self.give_width(raised, group)
        finally:
            self._fitting = False
        if window.width() > width and window.isVisible():
            window.resize(width, window.height())

    def give_width(self, dock: QDockWidget, group: str) -> None:
        """A panel that opens gets its own width back (once the layout has placed it)."""

        def resize():
            if dock.isVisible() and not dock.isFloating() and dock.width() < self.widths[group]:
                self.window.resizeDocks([dock], [self.widths[group]], Qt.Horizontal)

        resize()
        QTimer.singleShot(0, dock, resize)  # dropped if the panel is deleted first

    def toggled(self, group: str, dock: QDockWidget, checked: bool) -> None:
        """The person opened or closed a panel (View menu, its close button)."""
        if checked:
            self.open(group, dock)
        else:
            self.wanted[group] = bool(self.open_docks(group))
            self.folded.pop(group, None)

    def open(self, group: str, dock: QDockWidget) -> None:
        window = self.window
        width = window.width()
        self.wanted[group] = True
        self.folded.pop(group, None)
        self.fit(width, keep=group)
        dock.show()
        dock.raise_()
        self.give_width(dock, group)
        if window.width() > width:  # the panel's minimum pushed the window wider
            window.resize(width, window.height())


def make_dock(window: QMainWindow, title: str, widget: QWidget, area) -> QDockWidget:
    """A closable, movable dock holding ``widget``, scrolled when the window is short."""
    dock = QDockWidget(title, window)
    dock.setObjectName(title.lower() + "Dock")
    scroller = widget
    if not isinstance(widget, QScrollArea):  # a short window scrolls the panel, never clips it
        scroller = QScrollArea()
        scroller.setObjectName(title.lower() + "Scroller")
        scroller.setAccessibleName(title)
        scroller.setWidget(widget)
        scroller.setWidgetResizable(True)
        scroller.setFrameShape(QFrame.NoFrame)
        scroller.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)  # panels fit their width
    dock.setWidget(scroller)
    dock.setFeatures(
        QDockWidget.DockWidgetMovable
        | QDockWidget.DockWidgetClosable
        | QDockWidget.DockWidgetFloatable
    )
    window.addDockWidget(area, dock)
    return dock


def tab_width(docks: list[QDockWidget], least: int) -> int:
    """Docks tabbed together share one width: what the widest content needs (its scroll
    bar included), at least ``least``; each dock gets it as its minimum. Returns it."""
    needed = max(
        least,
        *(
            dock.widget().widget().minimumSizeHint().width()
            + dock.widget().verticalScrollBar().sizeHint().width()
            + 4
            for dock in docks
        ),
    )
    for dock in docks:
        dock.setMinimumWidth(needed)
    return needed
