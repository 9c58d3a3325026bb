"""The list of chats under date headers: search, new, rename, delete (with confirmation)."""

from __future__ import annotations

import time
from datetime import datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLineEdit,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from .chat_dates import headers
from .chat_list import HEADER_ROLE, ChatList


class SessionsPanel(QWidget):
    newRequested = Signal()
    openRequested = Signal(str)
    renameRequested = Signal(str)
    deleteRequested = Signal(str)
    exportRequested = Signal(str, str)  # session id, "markdown" or "json"
    searchChanged = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("sessionsPanel")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(6)
        top = QHBoxLayout()
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search chats")
        self.search.setAccessibleName("Search chats")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.searchChanged)
        top.addWidget(self.search, 1)
        self.new_button = QPushButton("New")
        self.new_button.setObjectName("primary")
        self.new_button.setToolTip("Start a new chat (Ctrl+N)")
        self.new_button.clicked.connect(self.newRequested)
        top.addWidget(self.new_button)
        layout.addLayout(top)
        self.now = datetime.now  # the clock the date headers are read against
        self.list = ChatList()
        self.list.setObjectName("sessionList")
        self.list.setAccessibleName("Chats")
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.ElideRight)
        self.list.setContextMenuPolicy(Qt.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.currentItemChanged.connect(self._current_changed)
        self.list.itemDoubleClicked.connect(
            lambda item: self.renameRequested.emit(item.data(Qt.UserRole))
        )
        layout.addWidget(self.list, 1)
        bottom = QHBoxLayout()
        self.rename_button = QPushButton("Rename")
        self.rename_button.clicked.connect(lambda: self._emit_current(self.renameRequested))
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(lambda: self._emit_current(self.deleteRequested))
        bottom.addWidget(self.rename_button)
        bottom.addWidget(self.delete_button)
        layout.addLayout(bottom)
        self._updating = False

    def set_sessions(self, sessions, current_id: str | None, pinned: bool = False) -> None:
        """``pinned``: the first chat is listed because it is open, not because it matched
        the search (it is shown in italics and says so)."""
        self._updating = True
        self.list.clear()
        shown = headers([session.updated for session in sessions], self.now())
        for session, header in zip(sessions, shown):
            item = QListWidgetItem(session.title)
            item.setData(Qt.UserRole, session.id)
            item.setData(HEADER_ROLE, header)
            item.setToolTip(
                f"{session.title}\nlast active {time.strftime('%Y-%m-%d %H:%M', time.localtime(session.updated))}"
            )
            self.list.addItem(item)
            if session.id == current_id:
                self.list.setCurrentItem(item)
        if pinned and sessions:
            item = self.list.item(0)
            font = item.font()
            font.setItalic(True)
            item.setFont(font)
            title = sessions[0].title
            item.setToolTip(f"{title}\n(the open chat; it does not match the search)")
        self._updating = False
        has = self.list.currentItem() is not None
        self.rename_button.setEnabled(has)
        self.delete_button.setEnabled(has)

    def _current_changed(self, item, _previous):
        has = item is not None
        self.rename_button.setEnabled(has)
        self.delete_button.setEnabled(has)
        if item is not None and not self._updating:
            self.openRequested.emit(item.data(Qt.UserRole))

    def _emit_current(self, signal) -> None:
        item = self.list.currentItem()
        if item is not None:
            signal.emit(item.data(Qt.UserRole))

    def _menu(self, point):
        item = self.list.itemAt(point)
        if item is None:
            return
        menu = QMenu(self)
        menu.addAction("Rename…", lambda: self.renameRequested.emit(item.data(Qt.UserRole)))
        menu.addAction("Delete…", lambda: self.deleteRequested.emit(item.data(Qt.UserRole)))
        menu.addSeparator()
        menu.addAction(
            "Export as Markdown…",
            lambda: self.exportRequested.emit(item.data(Qt.UserRole), "markdown"),
        )
        menu.addAction(
            "Export as JSON…", lambda: self.exportRequested.emit(item.data(Qt.UserRole), "json")
        )
        self.menu = menu  # the menu on screen, for tests
        menu.exec(self.list.viewport().mapToGlobal(point))
