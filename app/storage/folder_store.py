"""Folders of chats in the chat database (a mixin of ``app.storage.store.Store``).

Two tables of their own, added by schema 3, so a file written before folders existed opens
with every chat at the top level: a chat without a ``chat_folders`` row is in no folder.
Deleting a folder deletes its rows (ON DELETE CASCADE), which moves its chats out to the
top level; no chat is ever deleted with a folder.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

FOLDER_SCHEMA = """
CREATE TABLE IF NOT EXISTS folders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    collapsed INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS chat_folders (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    folder_id INTEGER NOT NULL REFERENCES folders(id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS chat_folders_by_folder ON chat_folders(folder_id);
"""


@dataclass
class Folder:
    id: int
    name: str
    collapsed: bool = False


class FolderStore:
    """Create, rename, delete, collapse folders and move chats in and out of them."""

    def folders(self) -> list[Folder]:
        """Every folder, by name (ignoring case)."""
        rows = self.db.execute("SELECT id, name, collapsed FROM folders").fetchall()
        found = [Folder(id, str(name), bool(collapsed)) for id, name, collapsed in rows]
        return sorted(found, key=lambda folder: (folder.name.casefold(), folder.id))

    def create_folder(self, name: str) -> Folder:
        with self._writing():
            cursor = self.db.execute(
                "INSERT INTO folders (name, created) VALUES (?, ?)", (name, time.time())
            )
        return Folder(cursor.lastrowid, name)

    def rename_folder(self, folder_id: int, name: str) -> None:
        with self._writing():
            self.db.execute("UPDATE folders SET name = ? WHERE id = ?", (name, folder_id))

    def delete_folder(self, folder_id: int) -> int:
        """Delete the folder; its chats move out to the top level. How many moved."""
        with self._writing():
            moved = self.db.execute(
                "SELECT count(*) FROM chat_folders WHERE folder_id = ?", (folder_id,)
            ).fetchone()[0]
            self.db.execute("DELETE FROM chat_folders WHERE folder_id = ?", (folder_id,))
            self.db.execute("DELETE FROM folders WHERE id = ?", (folder_id,))
        return moved

    def set_folder_collapsed(self, folder_id: int, collapsed: bool) -> None:
        with self._writing():
            self.db.execute(
                "UPDATE folders SET collapsed = ? WHERE id = ?", (int(collapsed), folder_id)
            )

    def move_to_folder(self, session_id: str, folder_id: int | None) -> None:
        """Put the chat in the folder; None: out to the top level."""
        with self._writing():
            if folder_id is None:
                self.db.execute("DELETE FROM chat_folders WHERE session_id = ?", (session_id,))
            else:
                self.db.execute(
                    "INSERT OR REPLACE INTO chat_folders VALUES (?, ?)", (session_id, folder_id)
                )
