"""The chat list's context menu (a right-click, or the Menu key on the current row).

A chat: rename, delete, move to a folder (or a new one), out of its folder, export.
A folder: rename, delete (its chats move out to the top level), collapse or open, new folder.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMenu

from .chat_list import COLLAPSED_ROLE, FOLDER_ROLE, IN_FOLDER_ROLE, is_folder


def chat_menu(panel, item) -> QMenu:
    """The menu of ``item``, a chat's or a folder's row of ``panel`` (a ``SessionsPanel``)."""
    menu = QMenu(panel)
    if is_folder(item):
        folder_id = item.data(FOLDER_ROLE)
        menu.addAction("Rename folder…", lambda: panel.renameFolderRequested.emit(folder_id))
        menu.addAction("Delete folder…", lambda: panel.deleteFolderRequested.emit(folder_id))
        collapsed = bool(item.data(COLLAPSED_ROLE))
        menu.addAction(
            "Open folder" if collapsed else "Collapse folder",
            lambda: panel.list.set_collapsed(item, not collapsed),
        )
        menu.addSeparator()
        menu.addAction("New folder…", lambda: panel.newFolderRequested.emit(""))
        return menu
    chat = item.data(Qt.UserRole)
    menu.addAction("Rename…", lambda: panel.renameRequested.emit(chat))
    menu.addAction("Delete…", lambda: panel.deleteRequested.emit(chat))
    menu.addSeparator()
    move = menu.addMenu("Move to folder")
    here = item.data(IN_FOLDER_ROLE)
    for folder in panel.folders.values():
        if folder.id != here:
            move.addAction(
                folder.name.replace("&", "&&"),
                lambda folder_id=folder.id: panel.moveRequested.emit(chat, folder_id),
            )
    if panel.folders.keys() - {here}:
        move.addSeparator()
    move.addAction("New folder…", lambda: panel.newFolderRequested.emit(chat))
    if here is not None:
        menu.addAction("Move out of folder", lambda: panel.moveRequested.emit(chat, None))
    menu.addSeparator()
    menu.addAction("Export as Markdown…", lambda: panel.exportRequested.emit(chat, "markdown"))
    menu.addAction("Export as JSON…", lambda: panel.exportRequested.emit(chat, "json"))
    return menu
