"""The chat list widget: chats grouped under date headers ("Today", "Yesterday", …).

A header is painted above the first chat of its group by ``DateHeaderDelegate``; it is not
an item, so it cannot be selected, and the list holds exactly one item per chat."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPalette
from PySide6.QtWidgets import QListWidget, QStyledItemDelegate, QStyleOptionViewItem

HEADER_ROLE = Qt.UserRole + 1  # the group header painted above this chat, or None
HEADER_PADDING = (10, 4)  # space above and below a header's text, in pixels


def header_font(font: QFont) -> QFont:
    small = QFont(font)
    small.setPointSizeF(max(font.pointSizeF() * 0.85, 7.0))
    small.setBold(True)
    return small


def header_height(font: QFont) -> int:
    above, below = HEADER_PADDING
    return above + QFontMetrics(header_font(font)).height() + below


class DateHeaderDelegate(QStyledItemDelegate):
    def sizeHint(self, option, index):
        size = super().sizeHint(option, index)
        if index.data(HEADER_ROLE):
            return QSize(size.width(), size.height() + header_height(option.font))
        return size

    def paint(self, painter, option, index):
        header = index.data(HEADER_ROLE)
        if not header:
            super().paint(painter, option, index)
            return
        height = header_height(option.font)
        painter.save()
        painter.setFont(header_font(option.font))
        painter.setPen(option.palette.color(QPalette.Disabled, QPalette.Text))  # muted
        above, _below = HEADER_PADDING
        text_rect = QRect(option.rect.left() + 6, option.rect.top() + above, option.rect.width(), 0)
        text_rect.setBottom(option.rect.top() + height)
        painter.drawText(text_rect, Qt.AlignLeft | Qt.AlignTop, header)
        painter.restore()
        item_option = QStyleOptionViewItem(option)
        item_option.rect = option.rect.adjusted(0, height, 0, 0)
        super().paint(painter, item_option, index)


class ChatList(QListWidget):
    """A click or right-click on a header does nothing: only the chat rows react."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setItemDelegate(DateHeaderDelegate(self))
        self.setUniformItemSizes(False)

    def row_rect(self, item) -> QRect:
        """Where the chat itself is drawn: its item's rectangle below any header."""
        rect = self.visualItemRect(item)
        if item.data(HEADER_ROLE):
            rect.setTop(rect.top() + header_height(self.font()))
        return rect

    def on_header(self, point) -> bool:
        item = super().itemAt(point)
        return item is not None and not self.row_rect(item).contains(point)

    def itemAt(self, point):
        return None if self.on_header(point) else super().itemAt(point)

    def header_texts(self) -> list[str]:
        """The headers shown, top to bottom."""
        found = (self.item(i).data(HEADER_ROLE) for i in range(self.count()))
        return [header for header in found if header]

    def mousePressEvent(self, event):
        if self.on_header(event.position().toPoint()):
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseDoubleClickEvent(self, event):
        if self.on_header(event.position().toPoint()):
            event.accept()
            return
        super().mouseDoubleClickEvent(event)
