"""Sessions, messages, per-token provenance and statistics in SQLite.

Every write commits at once, so killing the app loses at most the answer being written.
A database that cannot be opened or fails its integrity check is renamed aside (with a
timestamp) and a fresh one is started; ``notice`` then says what happened.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .paths import data_dir
from .provenance import Provenance, TokenInfo

DB_FILE = "draftless.sqlite3"
SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    finish_reason TEXT,
    model TEXT,
    stats TEXT,
    timing TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages(session_id, id);
CREATE TABLE IF NOT EXISTS tokens (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    token INTEGER NOT NULL,
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    from_draft INTEGER NOT NULL,
    pass_index INTEGER NOT NULL,
    draft_position INTEGER,
    drafter TEXT NOT NULL,
    PRIMARY KEY (message_id, idx)
) WITHOUT ROWID;
-- Branches: regenerated answers and edited questions keep the earlier versions. A message
-- without a link follows the message before it (chats written before branches existed).
CREATE TABLE IF NOT EXISTS message_links (
    message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    parent_id INTEGER NOT NULL  -- 0: the first message of the chat
);
CREATE TABLE IF NOT EXISTS branch_choices (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    parent_id INTEGER NOT NULL,
    child_id INTEGER NOT NULL,
    PRIMARY KEY (session_id, parent_id)
) WITHOUT ROWID;
"""


@dataclass
class Session:
    id: str
    title: str
    created: float
    updated: float


@dataclass
class Message:
    id: int | None
    session_id: str
    role: str  # "user" or "assistant"
    content: str
    finish_reason: str | None = None  # "stop", "length", "cancelled", "error"
    model: str | None = None
    stats: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    provenance: Provenance | None = None
    created: float = 0.0
    parent_id: int = 0  # the message it follows in its branch (0: none)
    versions: list[int] = field(default_factory=list)  # ids of it and its alternatives, oldest first


class Store:
    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else data_dir() / DB_FILE
        self.notice: str | None = None
        try:
            self.db = self._open()
        except sqlite3.DatabaseError as error:
            moved = self._move_aside()
            self.notice = (f"The chat history database could not be read ({error}). It was moved "
                           f"aside to {moved.name} and a new, empty history was started.")
            self.db = self._open()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path)
        try:
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA journal_mode = WAL")
            check = db.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(f"integrity check: {check}")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise sqlite3.DatabaseError(f"it was written by a newer Draftless (schema {version})")
            db.executescript(SCHEMA)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.commit()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _move_aside(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while target.exists():
            n += 1
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        self.path.rename(target)
        for suffix in ("-wal", "-shm"):
            extra = self.path.with_name(self.path.name + suffix)
            if extra.exists():
                extra.rename(target.with_name(target.name + suffix))
        return target

    def close(self) -> None:
        self.db.close()

    # sessions -----------------------------------------------------------------------------
    def create_session(self, title: str = "New chat") -> Session:
        now = time.time()
        session = Session(uuid.uuid4().hex, title, now, now)
        with self.db:
            self.db.execute("INSERT INTO sessions VALUES (?, ?, ?, ?)",
                            (session.id, session.title, session.created, session.updated))
        return session

    def sessions(self, search: str = "") -> list[Session]:
        """Newest first; ``search`` matches titles and message text (case-insensitive)."""
        if search:
            escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            pattern = f"%{escaped}%"
            rows = self.db.execute(
                "SELECT DISTINCT s.id, s.title, s.created, s.updated FROM sessions s "
                "LEFT JOIN messages m ON m.session_id = s.id "
                r"WHERE s.title LIKE ? ESCAPE '\' OR m.content LIKE ? ESCAPE '\' "
                "ORDER BY s.updated DESC", (pattern, pattern))
        else:
            rows = self.db.execute("SELECT id, title, created, updated FROM sessions "
                                   "ORDER BY updated DESC")
        return [Session(*row) for row in rows]

    def session(self, session_id: str) -> Session | None:
        row = self.db.execute("SELECT id, title, created, updated FROM sessions WHERE id = ?",
                              (session_id,)).fetchone()
        return Session(*row) if row else None

    def rename_session(self, session_id: str, title: str) -> None:
        with self.db:
            self.db.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))

    def delete_session(self, session_id: str) -> None:
        with self.db:
            self.db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    # messages -----------------------------------------------------------------------------
    def add_message(self, message: Message) -> Message:
        message.created = message.created or time.time()
        with self.db:
            cursor = self.db.execute(
                "INSERT INTO messages (session_id, role, content, finish_reason, model, stats, "
                "timing, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (message.session_id, message.role, message.content, message.finish_reason,
                 message.model, json.dumps(message.stats), json.dumps(message.timing),
                 message.created))
            message.id = cursor.lastrowid
            if message.provenance is not None:
                self.db.executemany(
                    "INSERT INTO tokens VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(message.id, i, t.token, t.start, t.end, int(t.from_draft), t.pass_index,
                      t.draft_position, t.drafter)
                     for i, t in enumerate(message.provenance.tokens)])
            self.db.execute("UPDATE sessions SET updated = ? WHERE id = ?",
                            (message.created, message.session_id))
        return message

    def delete_message(self, message_id: int) -> None:
        with self.db:
            self.db.execute("DELETE FROM messages WHERE id = ?", (message_id,))

    def link(self, message: Message, parent_id: int) -> None:
        """Place ``message`` after ``parent_id`` (0: first) and make it the chosen branch."""
        message.parent_id = parent_id
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO message_links VALUES (?, ?)",
                            (message.id, parent_id))
            self.db.execute("INSERT OR REPLACE INTO branch_choices VALUES (?, ?, ?)",
                            (message.session_id, parent_id, message.id))

    def choose(self, session_id: str, message_id: int) -> None:
        """Show the branch that goes through ``message_id``."""
        row = self.db.execute("SELECT parent_id FROM message_links WHERE message_id = ?",
                              (message_id,)).fetchone()
        if row is not None:
            with self.db:
                self.db.execute("INSERT OR REPLACE INTO branch_choices VALUES (?, ?, ?)",
                                (session_id, row[0], message_id))

    def messages(self, session_id: str) -> list[Message]:
        """The chat as shown: from the first message, each step the chosen (else newest)
        of the messages that follow; each carries its alternatives in ``versions``."""
        every = self.all_messages(session_id)
        links = dict(self.db.execute(
            "SELECT l.message_id, l.parent_id FROM message_links l JOIN messages m "
            "ON m.id = l.message_id WHERE m.session_id = ?", (session_id,)).fetchall())
        chosen = dict(self.db.execute(
            "SELECT parent_id, child_id FROM branch_choices WHERE session_id = ?",
            (session_id,)).fetchall())
        children: dict[int, list[Message]] = {}
        previous = 0
        for message in every:
            message.parent_id = links.get(message.id, previous)
            children.setdefault(message.parent_id, []).append(message)
            previous = message.id
        path, parent = [], 0
        while children.get(parent):
            options = children[parent]
            pick = next((m for m in options if m.id == chosen.get(parent)), options[-1])
            pick.versions = [m.id for m in options]
            path.append(pick)
            parent = pick.id
        return path

    def all_messages(self, session_id: str) -> list[Message]:
        """Every message of the chat, all branches, oldest first."""
        rows = self.db.execute(
            "SELECT id, session_id, role, content, finish_reason, model, stats, timing, created "
            "FROM messages WHERE session_id = ? ORDER BY id", (session_id,)).fetchall()
        result = []
        for row in rows:
            message = Message(row[0], row[1], row[2], row[3], row[4], row[5],
                              _json(row[6]), _json(row[7]), None, row[8])
            if message.role == "assistant":
                tokens = [TokenInfo(token, bool(from_draft), pass_index, draft_position, drafter,
                                    start, end)
                          for token, start, end, from_draft, pass_index, draft_position, drafter
                          in self.db.execute(
                              "SELECT token, start, end, from_draft, pass_index, draft_position, "
                              "drafter FROM tokens WHERE message_id = ? ORDER BY idx",
                              (message.id,))]
                message.provenance = Provenance.from_tokens(message.content, tokens)
            result.append(message)
        return result


def _json(text: str | None) -> dict:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
