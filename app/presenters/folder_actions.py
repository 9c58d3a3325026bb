"""What the chat list's folder requests do: ask for names and confirmation, write the
store, say what happened. Deleting a folder never deletes a chat: its chats move out to the
top level, and both the question and the status bar say so."""

from __future__ import annotations

import sqlite3

from PySide6.QtCore import QObject

from ..views.chat_widgets import ask_to_delete
from .controller import unsaved


def chats_text(count: int) -> str:
    return "no chats" if count == 0 else "1 chat" if count == 1 else f"{count} chats"


class FolderActions(QObject):
    def __init__(self, window, controller):
        super().__init__(window)
        self.window, self.controller = window, controller
        panel = window.sessions_panel
        panel.newFolderRequested.connect(self.new_folder)
        panel.renameFolderRequested.connect(self.rename_folder)
        panel.deleteFolderRequested.connect(self.delete_folder)
        panel.moveRequested.connect(self.move)
        panel.folderToggled.connect(self.remember_collapsed)

    @property
    def store(self):
        return self.controller.store

    def _write(self, write, what: str) -> bool:
        try:
            write()
        except (sqlite3.Error, OSError) as error:
            self.controller.problem.emit(
                unsaved(error, what + ": the chat history could not be changed", "try again.")
            )
            return False
        self.controller.sessionsChanged.emit()
        return True

    def _folder(self, folder_id: int):
        return next((f for f in self.store.folders() if f.id == folder_id), None)

    def new_folder(self, session_id: str = "") -> None:
        """A new folder, named by the person; ``session_id``'s chat goes into it."""
        name = " ".join((self.window.ask_text("New folder", "Folder name:") or "").split())
        if not name:
            return

        def write():
            folder = self.store.create_folder(name)
            if session_id:
                self.store.move_to_folder(session_id, folder.id)

        self._write(write, "The folder was not made")

    def rename_folder(self, folder_id: int) -> None:
        folder = self._folder(folder_id)
        if folder is None:
            return
        asked = self.window.ask_text("Rename folder", "Folder name:", folder.name)
        name = " ".join((asked or "").split())
        if name and name != folder.name:
            self._write(
                lambda: self.store.rename_folder(folder_id, name), "The folder was not renamed"
            )

    def delete_folder(self, folder_id: int) -> None:
        folder = self._folder(folder_id)
        if folder is None:
            return
        count = sum(s.folder_id == folder_id for s in self.store.sessions())
        moves = "moves" if count == 1 else "move"
        moved = f" Its {chats_text(count)} {moves} out to the top level." if count else ""
        question = f"Delete the folder “{folder.name}”?{moved} No chat is deleted."
        if not ask_to_delete(self.window, "Delete folder", question):
            return
        done = []
        if self._write(
            lambda: done.append(self.store.delete_folder(folder_id)), "The folder was not deleted"
        ):
            are = "is" if done[0] == 1 else "are"
            out = f": its {chats_text(done[0])} {are} now at the top level" if done[0] else ""
            self.window.statusBar().showMessage(f"Folder “{folder.name}” deleted{out}.", 8000)

    def move(self, session_id: str, folder_id) -> None:
        self._write(
            lambda: self.store.move_to_folder(session_id, folder_id), "The chat was not moved"
        )

    def remember_collapsed(self, folder_id: int, collapsed: bool) -> None:
        """Kept for the next start; the list already shows it (not rebuilt, so the row the
        keyboard is on stays current)."""
        if self.window.sessions_panel.search.text().strip():
            return  # while searching folders are shown open, whatever they were
        try:
            self.store.set_folder_collapsed(folder_id, collapsed)
        except (sqlite3.Error, OSError) as error:
            self.controller.problem.emit(
                unsaved(error, "The folder's state was not saved", "it applies until you quit.")
            )
