"""The chat list widget: folders of chats first, then the other chats grouped under date
headers ("Today", "Yesterday", …).

A date header is painted above the first chat of its group by ``DateHeaderDelegate``; it is
not an item, so it cannot be selected. A folder is a row of its own (``FOLDER_ROLE``), its
chats indented below it and hidden while it is collapsed: a click, Space or Enter on it
toggles it, Left and Right collapse and expand it. A chat is dragged onto a folder (or onto
a chat in it) to move it there, and onto a chat outside folders to move it out."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QRect, QSize, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QListWidget,
    QStyledItemDelegate,
    QStyleOptionViewItem,
)

HEADER_ROLE = Qt.UserRole + 1  # the group header painted above this chat, or None
FOLDER_ROLE = Qt.UserRole + 2  # a folder's row: the folder's id (a chat's row: None)
IN_FOLDER_ROLE = Qt.UserRole + 3  # a chat's row: the id of the folder it is in, or None
COLLAPSED_ROLE = Qt.UserRole + 4  # a folder's row: True while its chats are hidden
HEADER_PADDING = (10, 4)  # space above and below a header's text, in pixels
INDENT = 14  # how far a chat in a folder is drawn in from the folder's row, in pixels
CHAT_MIME = "application/x-draftless-chat"  # a dragged chat: its id


def header_font(font: QFont) -> QFont:
    small = QFont(font)
    small.setPointSizeF(font.pointSizeF() * 0.85)  # no floor: it follows the zoom
    small.setBold(True)
    return small


def header_height(font: QFont) -> int:
    above, below = HEADER_PADDING
    return above + QFontMetrics(header_font(font)).height() + below


def is_folder(item) -> bool:
    return item is not None and item.data(FOLDER_ROLE) is not None


class DateHeaderDelegate(QStyledItemDelegate):
    def initStyleOption(self, option, index):
        super().initStyleOption(option, index)
        if index.data(FOLDER_ROLE) is not None:  # "▸ Work" collapsed, "▾ Work" open
            option.text = ("▸  " if index.data(COLLAPSED_ROLE) else "▾  ") + option.text
            option.font.setBold(True)

    def sizeHint(self, option, index):
        size = super().sizeHint(option, index)
        if index.data(HEADER_ROLE):
            return QSize(size.width(), size.height() + header_height(option.font))
        return size

    def paint(self, painter, option, index):
        header = index.data(HEADER_ROLE)
        if index.data(IN_FOLDER_ROLE) is not None:
            option = QStyleOptionViewItem(option)
            option.rect = option.rect.adjusted(INDENT, 0, 0, 0)
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
    """A click or right-click on a date header does nothing: only the rows react."""

    folderToggled = Signal(int, bool)  # folder id, collapsed now
    chatDropped = Signal(str, object)  # chat id, the folder id it was dropped into or None

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setItemDelegate(DateHeaderDelegate(self))
        self.setUniformItemSizes(False)
        self.setDragDropMode(QAbstractItemView.DragDrop)
        self.setDropIndicatorShown(False)  # the row under the pointer is where it goes

    def folder_row(self, folder_id: int):
        return next(
            (
                self.item(i)
                for i in range(self.count())
                if self.item(i).data(FOLDER_ROLE) == folder_id
            ),
            None,
        )

    def set_collapsed(self, item, collapsed: bool) -> None:
        """Hide or show the chats of the folder ``item``; tells ``folderToggled``."""
        item.setData(COLLAPSED_ROLE, collapsed)
        folder_id = item.data(FOLDER_ROLE)
        for i in range(self.count()):
            if self.item(i).data(IN_FOLDER_ROLE) == folder_id:
                self.item(i).setHidden(collapsed)
        self.folderToggled.emit(folder_id, collapsed)

    def keyPressEvent(self, event):
        item = self.currentItem()
        menu_key = event.key() == Qt.Key_Menu or (
            event.key() == Qt.Key_F10 and event.modifiers() == Qt.ShiftModifier
        )
        if (
            menu_key and item is not None and not item.isHidden()
        ):  # not every platform sends a menu event
            self.scrollToItem(item)
            self.customContextMenuRequested.emit(self.row_rect(item).center())
            event.accept()
            return
        if is_folder(item):
            collapsed = bool(item.data(COLLAPSED_ROLE))
            wanted = {
                Qt.Key_Left: True,
                Qt.Key_Right: False,
                Qt.Key_Space: not collapsed,
                Qt.Key_Return: not collapsed,
                Qt.Key_Enter: not collapsed,
            }.get(event.key())
            if wanted is not None and event.modifiers() in (Qt.NoModifier, Qt.KeypadModifier):
                if wanted != collapsed:
                    self.set_collapsed(item, wanted)
                event.accept()
                return
        super().keyPressEvent(event)

    # dragging a chat into or out of a folder ----------------------------------------------
    def mimeData(self, items):
        data = QMimeData()
        chats = [item.data(Qt.UserRole) for item in items if not is_folder(item)]
        if chats:
            data.setData(CHAT_MIME, chats[0].encode())
        return data

    def mimeTypes(self):
        return [CHAT_MIME]

    def folder_at(self, point) -> int | None:
        """The folder a chat dropped at ``point`` goes into (None: the top level)."""
        item = super().itemAt(point)
        if item is None:
            return None
        return item.data(FOLDER_ROLE) if is_folder(item) else item.data(IN_FOLDER_ROLE)

    def dragEnterEvent(self, event):
        if event.mimeData().hasFormat(CHAT_MIME):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event):
        self.dragEnterEvent(event)

    def dropEvent(self, event):
        if not event.mimeData().hasFormat(CHAT_MIME):
            event.ignore()
            return
        chat = bytes(event.mimeData().data(CHAT_MIME)).decode()
        # Ignored: the view must not take the row out itself; the list is rebuilt
        event.setDropAction(Qt.IgnoreAction)
        event.accept()
        self.chatDropped.emit(chat, self.folder_at(event.position().toPoint()))

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
        point = event.position().toPoint()
        if self.on_header(point):
            event.accept()
            return
        super().mousePressEvent(event)
        self._toggle_at(point, event)

    def mouseDoubleClickEvent(self, event):
        point = event.position().toPoint()
        if self.on_header(point):
            event.accept()
            return
        if is_folder(self.itemAt(point)):  # the second click of two toggles it back
            self._toggle_at(point, event)
            event.accept()
            return
        super().mouseDoubleClickEvent(event)

    def _toggle_at(self, point, event) -> None:
        item = self.itemAt(point)
        if is_folder(item) and event.button() == Qt.LeftButton:
            self.set_collapsed(item, not item.data(COLLAPSED_ROLE))
