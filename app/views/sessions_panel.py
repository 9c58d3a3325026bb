"""The list of chats, in folders and under date headers: search, new, rename, delete (with
confirmation), folders (new, rename, delete, collapse, move a chat in or out).

Rename and Delete (the buttons, the menu) act on the row that is current: a chat or a
folder. While searching, only the folders holding a match are shown, open."""

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
from .chat_list import (
    COLLAPSED_ROLE,
    FOLDER_ROLE,
    HEADER_ROLE,
    IN_FOLDER_ROLE,
    ChatList,
    is_folder,
)
from .chat_list_menu import chat_menu


class SessionsPanel(QWidget):
    newRequested = Signal()
    openRequested = Signal(str)
    renameRequested = Signal(str)
    deleteRequested = Signal(str)
    exportRequested = Signal(str, str)  # session id, "markdown" or "json"
    searchChanged = Signal(str)
    newFolderRequested = Signal(str)  # the chat to put in it, or "" for none
    renameFolderRequested = Signal(int)
    deleteFolderRequested = Signal(int)
    moveRequested = Signal(str, object)  # chat id, folder id or None (the top level)
    folderToggled = Signal(int, bool)  # folder id, collapsed

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
        self.list.itemDoubleClicked.connect(self._rename_chat)
        self.list.folderToggled.connect(self.folderToggled)
        self.list.chatDropped.connect(self._dropped)
        layout.addWidget(self.list, 1)
        bottom = QHBoxLayout()
        self.rename_button = QPushButton("Rename")
        self.rename_button.clicked.connect(lambda: self._act_on(self.list.currentItem(), "rename"))
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(lambda: self._act_on(self.list.currentItem(), "delete"))
        bottom.addWidget(self.rename_button)
        bottom.addWidget(self.delete_button)
        layout.addLayout(bottom)
        self._updating = False
        self.folders = {}  # every folder by id, in the list's order (the menu lists them)

    def set_sessions(
        self, sessions, current_id: str | None, pinned: bool = False, folders=()
    ) -> None:
        """``pinned``: the first chat is listed because it is open, not because it matched
        the search (it is shown in italics and says so). ``folders``: every folder; while
        searching only those holding a chat found are shown."""
        self._updating = True
        self.list.clear()
        self.folders = {folder.id: folder for folder in folders}
        searching = bool(self.search.text().strip())
        inside: dict[int, list] = {folder_id: [] for folder_id in self.folders}
        loose = []
        for session in sessions:
            inside.get(session.folder_id, loose).append(session)
        for folder in self.folders.values():
            chats = inside[folder.id]
            if searching and not chats:
                continue
            collapsed = folder.collapsed and not searching
            self._add_folder(folder, len(chats), collapsed)
            for session in chats:
                self._add_chat(session, None, current_id, folder).setHidden(collapsed)
        shown = headers([session.updated for session in loose], self.now())
        for session, header in zip(loose, shown):
            self._add_chat(session, header, current_id, None)
        if pinned and sessions:
            item = self._chat_row(sessions[0].id)
            font = item.font()
            font.setItalic(True)
            item.setFont(font)
            title = sessions[0].title
            item.setToolTip(f"{title}\n(the open chat; it does not match the search)")
        self._updating = False
        has = self.list.currentItem() is not None
        self.rename_button.setEnabled(has)
        self.delete_button.setEnabled(has)

    def _add_folder(self, folder, count: int, collapsed: bool) -> None:
        item = QListWidgetItem(folder.name)
        item.setData(FOLDER_ROLE, folder.id)
        item.setData(COLLAPSED_ROLE, collapsed)
        item.setFlags(Qt.ItemIsEnabled | Qt.ItemIsSelectable | Qt.ItemIsDropEnabled)
        chats = f"{count} chat" + ("" if count == 1 else "s")
        item.setToolTip(f"Folder {folder.name}: {chats}. Click to open or close it.")
        item.setData(Qt.AccessibleTextRole, f"Folder {folder.name}, {chats}")
        item.setData(
            Qt.AccessibleDescriptionRole, "collapsed: Right opens it" if collapsed else "open"
        )
        self.list.addItem(item)

    def _add_chat(self, session, header, current_id, folder) -> QListWidgetItem:
        item = QListWidgetItem(session.title)
        item.setData(Qt.UserRole, session.id)
        item.setData(HEADER_ROLE, header)
        item.setData(IN_FOLDER_ROLE, None if folder is None else folder.id)
        active = time.strftime("%Y-%m-%d %H:%M", time.localtime(session.updated))
        where = "" if folder is None else f"\nin the folder {folder.name}"
        item.setToolTip(f"{session.title}\nlast active {active}{where}")
        if folder is not None:
            item.setData(Qt.AccessibleDescriptionRole, f"in the folder {folder.name}")
        self.list.addItem(item)
        if session.id == current_id:
            self.list.setCurrentItem(item)
        return item

    def _chat_row(self, session_id: str):
        rows = (self.list.item(i) for i in range(self.list.count()))
        return next(item for item in rows if item.data(Qt.UserRole) == session_id)

    def _current_changed(self, item, _previous):
        has = item is not None
        self.rename_button.setEnabled(has)
        self.delete_button.setEnabled(has)
        if item is not None and not is_folder(item) and not self._updating:
            self.openRequested.emit(item.data(Qt.UserRole))

    def _rename_chat(self, item) -> None:
        if not is_folder(item):
            self.renameRequested.emit(item.data(Qt.UserRole))

    def _act_on(self, item, action: str) -> None:
        """Rename or delete the chat or folder of ``item``."""
        if item is None:
            return
        if is_folder(item):
            signal = (
                self.renameFolderRequested if action == "rename" else self.deleteFolderRequested
            )
            signal.emit(item.data(FOLDER_ROLE))
        else:
            signal = self.renameRequested if action == "rename" else self.deleteRequested
            signal.emit(item.data(Qt.UserRole))

    def _dropped(self, session_id: str, folder_id) -> None:
        row = self._chat_row(session_id)
        if row.data(IN_FOLDER_ROLE) != folder_id:
            self.moveRequested.emit(session_id, folder_id)

    def _menu(self, point):
        if self.list.on_header(point):
            return
        item = self.list.itemAt(point)
        menu = chat_menu(self, item) if item is not None else QMenu(self)
        if item is None:
            menu.addAction("New folder…", lambda: self.newFolderRequested.emit(""))
        self.menu = menu  # the menu on screen, for tests
        menu.exec(self.list.viewport().mapToGlobal(point))
