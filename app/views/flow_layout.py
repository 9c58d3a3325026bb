"""A layout that places its widgets in a row and wraps to the next row when the row is
full (Qt has none built in): a message card's buttons stay whole in a narrow chat."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem


class FlowLayout(QLayout):
    def __init__(self, parent=None, spacing: int = 4, align_right: bool = True):
        super().__init__(parent)
        self.align_right = align_right
        self._items: list[QLayoutItem] = []
        # heights for widths asked since the items last changed: Qt asks the same width
        # dozens of times per layout pass (measured: 37,000 asks while scrolling 250 cards,
        # half the GUI thread's time)
        self._heights: dict[int, int] = {}
        self.setSpacing(spacing)
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:  # noqa: N802 (Qt's name)
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int):  # noqa: N802
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int):  # noqa: N802
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self):  # noqa: N802
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:  # noqa: N802
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802
        if width not in self._heights:
            self._heights[width] = self._place(QRect(0, 0, width, 0), move=False)
        return self._heights[width]

    def invalidate(self) -> None:
        """Qt's call when an item was added, shown, hidden or changed its size hint."""
        self._heights.clear()
        super().invalidate()

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:  # noqa: N802
        """Everything on one row."""
        shown = self._shown()
        width = sum(i.sizeHint().width() for i in shown) + self.spacing() * max(0, len(shown) - 1)
        height = max((i.sizeHint().height() for i in shown), default=0)
        return QSize(width, height)

    def minimumSize(self) -> QSize:  # noqa: N802
        """One item a row: the widest item."""
        size = QSize()
        for item in self._shown():
            size = size.expandedTo(item.minimumSize())
        return size

    def _shown(self) -> list[QLayoutItem]:
        return [i for i in self._items if not (i.widget() and i.widget().isHidden())]

    def _place(self, rect: QRect, move: bool) -> int:
        """Lay the items out in rows within ``rect``; returns the height used."""
        rows: list[list[QLayoutItem]] = [[]]
        used = 0
        for item in self._shown():
            width = item.sizeHint().width()
            if rows[-1] and used + self.spacing() + width > rect.width():
                rows.append([])
                used = 0
            used += (self.spacing() if rows[-1] else 0) + width
            rows[-1].append(item)
        y = rect.y()
        for row in rows:
            if not row:
                continue
            height = max(i.sizeHint().height() for i in row)
            row_width = sum(i.sizeHint().width() for i in row) + self.spacing() * (len(row) - 1)
            x = rect.right() + 1 - row_width if self.align_right else rect.x()
            if move:
                for item in row:
                    item.setGeometry(QRect(QPoint(max(x, rect.x()), y), item.sizeHint()))
                    x += item.sizeHint().width() + self.spacing()
            y += height + self.spacing()
        return max(0, y - rect.y() - self.spacing())
