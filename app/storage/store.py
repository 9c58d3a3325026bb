"""Sessions, messages, per-token provenance and statistics in SQLite.

Every write commits at once, so killing the app loses at most the answer being written.
The database file is untrusted input, and only a file that fails SQLite's integrity check
is called corrupt and renamed aside (with a timestamp) for a fresh one. A file that is
locked by another program, read-only, in a read-only folder or written by a newer
Draftless is left exactly as it is: its chats are copied into memory, this run works on
that copy, and ``notice`` says that nothing of this run will be saved. A database deleted
while the app runs is written back from the open connection on the next write.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import unicodedata
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

from engine import paths as engine_paths
from engine.stats import stored_figures
from engine.untrusted import move_aside, parse_json

from .folder_store import FOLDER_SCHEMA, FolderStore
from .provenance import Provenance, TokenInfo

DB_FILE = "draftless.sqlite3"
# 2: chat_system_prompts, 3: chat_answer_formats, 4: folders (an older file gains the tables
# on opening)
SCHEMA_VERSION = 4
LOCK_WAIT_S = 5.0  # how long to wait for another program's lock before giving up
# An answer's stats hold this key (true) when the chat template opened the <think> block
# its text starts in (``Provenance.opened_thinking``): the stats are a JSON column, so an
# older Draftless reads such a file unchanged
OPENED_THINKING = "opened_thinking"

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
-- A chat's own system prompt. A chat without a row (written before chats had their own)
-- is answered with the default system prompt from the settings.
CREATE TABLE IF NOT EXISTS chat_system_prompts (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    text TEXT NOT NULL
);
-- A chat's answer format (app/storage/answer_format.py): its kind and the schema as pasted. A chat
-- without a row is answered in free text.
CREATE TABLE IF NOT EXISTS chat_answer_formats (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    schema TEXT NOT NULL
);
"""
SCHEMA += FOLDER_SCHEMA


@dataclass
class Session:
    id: str
    title: str
    created: float
    updated: float
    folder_id: int | None = None  # None: at the top level of the chat list


class StoredProvenance:
    """``Message.provenance``: a stored answer's tokens are read on first use, so opening a
    long chat reads only its text (measured: building every answer's provenance was 90% of
    ``Store.messages``, 1.8 s for 5,000 messages of ~260 tokens). What was read can be
    dropped (``Message.drop_read_provenance``) and is read again when next used. Assigning
    a value replaces what would have been read, for good."""

    def __set_name__(self, owner, name: str) -> None:
        self.attribute = "_" + name

    def __get__(self, message, owner=None) -> Provenance | None:
        if message is None:  # the dataclass asks the class for the field's default
            return None
        values = message.__dict__
        if self.attribute not in values and "_read_provenance" in values:
            values[self.attribute] = values["_read_provenance"]()
        return values.get(self.attribute)

    def __set__(self, message, value: Provenance | None) -> None:
        message.__dict__.pop("_read_provenance", None)
        message.__dict__[self.attribute] = value


@dataclass
class Message:
    id: int | None
    session_id: str
    role: str  # "user" or "assistant"
    content: str
    finish_reason: str | None = None  # "stop", "length", "cancelled", "error", "edited"
    model: str | None = None
    stats: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    provenance: Provenance | None = StoredProvenance()  # read on first use
    created: float = 0.0
    parent_id: int = 0  # the message it follows in its branch (0: none)
    versions: list[int] = field(
        default_factory=list
    )  # ids of it and its alternatives, oldest first

    def read_provenance_when_used(
        self, read: Callable[[], Provenance], opened_thinking: bool = False
    ) -> None:
        """``provenance`` is ``read()`` on first use (and again after it is dropped);
        ``opened_thinking`` is what its ``opened_thinking`` will say."""
        self.__dict__.pop("_provenance", None)
        self._read_provenance = read
        self._stored_opened_thinking = opened_thinking

    @property
    def opened_thinking(self) -> bool:
        """Whether the chat template opened the ``<think>`` block this answer's text starts
        in (``Provenance.opened_thinking``), known without reading a stored answer's tokens
        (``chat_turns`` asks it of every answer of the chat, for every question)."""
        values = self.__dict__
        if values.get("_provenance") is None and "_read_provenance" in values:
            return values["_stored_opened_thinking"]
        return self.provenance is not None and self.provenance.opened_thinking

    def drop_read_provenance(self) -> None:
        """Free the provenance read from the store (a long chat's card that scrolled far
        away); it is read again when next used. A provenance that was assigned stays."""
        if "_read_provenance" in self.__dict__:
            self.__dict__.pop("_provenance", None)


class Damaged(sqlite3.DatabaseError):
    """The file fails SQLite's integrity check."""


class NewerSchema(sqlite3.DatabaseError):
    """The file was written by a newer Draftless: readable, perhaps, but not ours to change."""


# SQLite's primary result codes (``sqlite3.Error.sqlite_errorcode & 0xff``). Only a damaged
# file is replaced; any other failure (permissions, a full disk) leaves the file alone.
_LOCKED = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_DAMAGED = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB


def _cause(error: sqlite3.Error) -> str:
    """'locked', 'corrupt' or 'unwritable' for an error met while opening the database."""
    if isinstance(error, Damaged):
        return "corrupt"
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        code &= 0xFF
        return "locked" if code in _LOCKED else "corrupt" if code in _DAMAGED else "unwritable"
    text = str(error).lower()  # Python < 3.11 has no error codes
    if "locked" in text or "busy" in text:
        return "locked"
    if "malformed" in text or "not a database" in text:
        return "corrupt"
    return "unwritable"


class Store(FolderStore):
    def __init__(self, path: Path | None = None, lock_wait: float = LOCK_WAIT_S):
        self.path = Path(path) if path else engine_paths.data_dir() / DB_FILE
        self.notice: str | None = None  # what happened to the file at start, for the person
        self.read_only = False  # True: this run works on a copy in memory; nothing is saved
        self.on_notice: Callable[[str], None] | None = None  # problems met later, while running
        self._file_id: tuple[int, int] | None = None
        self.db = self._connect(lock_wait)

    # opening ------------------------------------------------------------------------------
    def _connect(self, lock_wait: float) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = self._open(lock_wait)
        except NewerSchema as error:
            return self._copy_in_memory(
                f"The chat history {self.path} was written by a newer version of Draftless "
                f"({error}). It was left untouched and opened read-only: chats from this "
                "session will not be saved. Update Draftless to keep chatting in it."
            )
        except (sqlite3.Error, OSError) as error:
            cause = _cause(error) if isinstance(error, sqlite3.Error) else "unwritable"
            if cause == "locked":
                return self._copy_in_memory(
                    f"The chat history {self.path} is locked by another program (waited "
                    f"{lock_wait:g} s). It was opened read-only: chats from this session will "
                    "not be saved. Close the other program and restart Draftless."
                )
            if cause == "unwritable" and not self.path.exists():
                self.notice = (
                    f"The chat history cannot be created at {self.path} ({error}). "
                    "Chats from this session will not be saved. Check the "
                    "permissions of that folder and the free space on the disk."
                )
                return self._memory()
            if cause == "unwritable":
                return self._copy_in_memory(
                    f"The chat history {self.path} cannot be written ({error}). It was left "
                    "untouched and opened read-only: chats from this session will not be "
                    "saved. Check the permissions of the file and its folder, and the free "
                    "space on the disk."
                )
            return self._replace_corrupt(error, lock_wait)
        self._remember_file()
        return db

    def _open(self, lock_wait: float) -> sqlite3.Connection:
        """The database, checked and writable; raises what went wrong."""
        if self.path.exists() and not self.path.is_file():  # a FIFO would hang SQLite's read
            raise Damaged("it is not a regular file")
        db = sqlite3.connect(self.path, timeout=lock_wait)
        try:
            db.execute("PRAGMA foreign_keys = ON")
            check = db.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise Damaged(f"integrity check: {check}")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise NewerSchema(f"schema {version}; this version reads up to {SCHEMA_VERSION}")
            db.execute("PRAGMA journal_mode = WAL")
            # Prove that writes will work (a read-only file only fails at the first write),
            # waiting up to ``lock_wait`` for another program's lock; nothing is changed.
            db.execute("BEGIN IMMEDIATE")
            db.execute(f"PRAGMA user_version = {version}")
            db.execute("ROLLBACK")
            if version < SCHEMA_VERSION:
                db.executescript(SCHEMA)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                db.commit()
        except BaseException:
            db.close()
            raise
        return db

    def _replace_corrupt(self, error: sqlite3.Error, lock_wait: float) -> sqlite3.Connection:
        try:
            moved = self._move_aside()
            db = self._open(lock_wait)
        except (sqlite3.Error, OSError) as problem:
            self.notice = (
                f"The chat history {self.path} is damaged ({error}) and could not be "
                f"replaced ({problem}). Chats from this session will not be saved."
            )
            return self._memory()
        self.notice = (
            f"The chat history database could not be read ({error}). It was moved "
            f"aside to {moved.name} and a new, empty history was started."
        )
        self._remember_file()
        return db

    def _copy_in_memory(self, notice: str) -> sqlite3.Connection:
        """This run's database: a copy of the file's chats in memory (the file is not touched)."""
        memory = self._memory(schema=False)
        uri = self.path.resolve().as_uri()
        copied = False
        # immutable=1: read even where SQLite cannot create its -shm file (read-only folder)
        for options in ("mode=ro", "mode=ro&immutable=1"):
            try:
                source = sqlite3.connect(f"{uri}?{options}", uri=True, timeout=1.0)
                try:
                    source.backup(memory)
                    copied = True
                finally:
                    source.close()
                break
            except sqlite3.Error:
                continue
        if not copied and self.path.exists():
            notice += " Its chats could not be read either, so the list starts empty."
        self.notice = notice
        try:
            version = memory.execute("PRAGMA user_version").fetchone()[0]
            if version <= SCHEMA_VERSION:
                memory.executescript(SCHEMA)
        except sqlite3.Error:
            memory.close()
            return self._memory()
        return memory

    def _memory(self, schema: bool = True) -> sqlite3.Connection:
        self.read_only = True
        memory = sqlite3.connect(":memory:")
        memory.execute("PRAGMA foreign_keys = ON")
        if schema:
            memory.executescript(SCHEMA)
        return memory

    def _remember_file(self) -> None:
        stat = os.stat(self.path)
        self._file_id = (stat.st_dev, stat.st_ino)

    def _move_aside(self) -> Path:
        target = move_aside(self.path)
        for suffix in ("-wal", "-shm"):
            extra = self.path.with_name(self.path.name + suffix)
            if extra.exists():
                extra.rename(target.with_name(target.name + suffix))
        return target

    # writing ------------------------------------------------------------------------------
    @contextmanager
    def _writing(self):
        """One committed write, into the file that is really at ``path``."""
        self._recreate_if_deleted()
        with self.db:
            yield self.db

    def _recreate_if_deleted(self) -> None:
        """Deleting an open database leaves the connection writing into a file nobody can
        reach again. Write everything the connection still holds into a new file instead."""
        if self.read_only or self._file_id is None or self.path.exists():
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fresh = sqlite3.connect(self.path)
            self.db.backup(fresh)
            fresh.execute("PRAGMA journal_mode = WAL")
            fresh.execute("PRAGMA foreign_keys = ON")
        except (sqlite3.Error, OSError) as error:
            memory = self._memory(schema=False)
            self.db.backup(memory)
            self.db.close()
            self.db = memory
            self._tell(
                f"The chat history {self.path} was deleted while Draftless was running "
                f"and could not be written again ({error}). Your chats are kept in "
                "memory until you quit, but they will not be saved."
            )
            return
        self.db.close()
        self.db = fresh
        self._remember_file()
        self._tell(
            f"The chat history {self.path} was deleted while Draftless was running. "
            "It was written again from the chats still open, and saving continues."
        )

    def _tell(self, text: str) -> None:
        if self.on_notice is not None:
            self.on_notice(text)
        else:
            self.notice = text

    def close(self) -> None:
        self.db.close()

    # sessions -----------------------------------------------------------------------------
    def create_session(self, title: str = "New chat", system_prompt: str | None = None) -> Session:
        """A new chat, with its own ``system_prompt`` when one is given (one write: a chat
        is never left without the prompt it was made with)."""
        now = time.time()
        session = Session(uuid.uuid4().hex, title, now, now)
        with self._writing():
            self.db.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?)",
                (session.id, session.title, session.created, session.updated),
            )
            if system_prompt is not None:
                self.db.execute(
                    "INSERT INTO chat_system_prompts VALUES (?, ?)", (session.id, system_prompt)
                )
        return session

    def sessions(self, search: str = "") -> list[Session]:
        """Newest first; ``search`` matches titles and message text, ignoring case and
        Unicode forms ("été" finds "ÉTÉ", "strasse" finds "Straße")."""
        if search:
            self.db.create_function("folded", 1, folded, deterministic=True)
            rows = self.db.execute(
                "SELECT DISTINCT s.id, s.title, s.created, s.updated, f.folder_id "
                "FROM sessions s LEFT JOIN messages m ON m.session_id = s.id "
                "LEFT JOIN chat_folders f ON f.session_id = s.id "
                "WHERE instr(folded(s.title), ?1) OR instr(folded(m.content), ?1) "
                "ORDER BY s.updated DESC",
                (folded(search),),
            )
        else:
            rows = self.db.execute(
                "SELECT s.id, s.title, s.created, s.updated, f.folder_id FROM sessions s "
                "LEFT JOIN chat_folders f ON f.session_id = s.id ORDER BY s.updated DESC"
            )
        return [Session(*row) for row in rows]

    def session(self, session_id: str) -> Session | None:
        row = self.db.execute(
            "SELECT s.id, s.title, s.created, s.updated, f.folder_id FROM sessions s "
            "LEFT JOIN chat_folders f ON f.session_id = s.id WHERE s.id = ?",
            (session_id,),
        ).fetchone()
        return Session(*row) if row else None

    def rename_session(self, session_id: str, title: str) -> None:
        with self._writing():
            self.db.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))

    def delete_session(self, session_id: str) -> None:
        with self._writing():
            self.db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    def system_prompt(self, session_id: str) -> str | None:
        """The chat's own system prompt; None for a chat that has none of its own."""
        row = self.db.execute(
            "SELECT text FROM chat_system_prompts WHERE session_id = ?", (session_id,)
        ).fetchone()
        return row[0] if row and isinstance(row[0], str) else None

    def set_system_prompt(self, session_id: str, text: str) -> None:
        with self._writing():
            self.db.execute(
                "INSERT OR REPLACE INTO chat_system_prompts VALUES (?, ?)", (session_id, text)
            )

    def answer_format(self, session_id: str) -> tuple[str, str] | None:
        """The chat's answer format as stored (its kind, the schema's text), unchecked;
        None for a chat answered in free text."""
        row = self.db.execute(
            "SELECT kind, schema FROM chat_answer_formats WHERE session_id = ?", (session_id,)
        ).fetchone()
        if row is None:
            return None
        return tuple(value if isinstance(value, str) else "" for value in row)

    def set_answer_format(self, session_id: str, kind: str, schema: str) -> None:
        with self._writing():
            self.db.execute(
                "INSERT OR REPLACE INTO chat_answer_formats VALUES (?, ?, ?)",
                (session_id, kind, schema),
            )

    # messages -----------------------------------------------------------------------------
    def add_message(self, message: Message) -> Message:
        message.created = message.created or time.time()
        with self._writing():
            cursor = self.db.execute(
                "INSERT INTO messages (session_id, role, content, finish_reason, model, stats, "
                "timing, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    message.session_id,
                    message.role,
                    message.content,
                    message.finish_reason,
                    message.model,
                    stored_stats(message),
                    json.dumps(message.timing),
                    message.created,
                ),
            )
            message.id = cursor.lastrowid
            self._insert_tokens(message)
            self.db.execute(
                "UPDATE sessions SET updated = ? WHERE id = ?",
                (message.created, message.session_id),
            )
        return message

    def update_message(self, message: Message) -> None:
        """Write a stored message's new text, finish reason, numbers and tokens at once (an
        answer that was continued)."""
        with self._writing():
            self.db.execute(
                "UPDATE messages SET content = ?, finish_reason = ?, stats = ?, timing = ? "
                "WHERE id = ?",
                (
                    message.content,
                    message.finish_reason,
                    stored_stats(message),
                    json.dumps(message.timing),
                    message.id,
                ),
            )
            self.db.execute("DELETE FROM tokens WHERE message_id = ?", (message.id,))
            self._insert_tokens(message)
            self.db.execute(
                "UPDATE sessions SET updated = ? WHERE id = ?", (time.time(), message.session_id)
            )

    def _insert_tokens(self, message: Message) -> None:
        if message.provenance is None:
            return
        self.db.executemany(
            "INSERT INTO tokens VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    message.id,
                    i,
                    t.token,
                    t.start,
                    t.end,
                    int(t.from_draft),
                    t.pass_index,
                    t.draft_position,
                    t.drafter,
                )
                for i, t in enumerate(message.provenance.tokens)
            ],
        )

    def link(self, message: Message, parent_id: int) -> None:
        """Place ``message`` after ``parent_id`` (0: first) and make it the chosen branch."""
        message.parent_id = parent_id
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO message_links VALUES (?, ?)", (message.id, parent_id)
            )
            self.db.execute(
                "INSERT OR REPLACE INTO branch_choices VALUES (?, ?, ?)",
                (message.session_id, parent_id, message.id),
            )

    def choose(self, session_id: str, message_id: int) -> None:
        """Show the branch that goes through ``message_id``."""
        row = self.db.execute(
            "SELECT parent_id FROM message_links WHERE message_id = ?", (message_id,)
        ).fetchone()
        if row is not None:
            with self.db:
                self.db.execute(
                    "INSERT OR REPLACE INTO branch_choices VALUES (?, ?, ?)",
                    (session_id, row[0], message_id),
                )

    def delete_message(self, message_id: int) -> None:
        """Remove one message (its tokens too): what followed it now follows the message
        before it, and the branch shown there goes on through it."""
        row = self.db.execute(
            "SELECT m.session_id, l.parent_id FROM messages m "
            "LEFT JOIN message_links l ON l.message_id = m.id WHERE m.id = ?",
            (message_id,),
        ).fetchone()
        if row is None:
            return
        session_id, parent = row
        if parent is None:  # unlinked: it follows the message before it (see ``messages``)
            parent = self.db.execute(
                "SELECT coalesce(max(id), 0) FROM messages WHERE session_id = ? AND id < ?",
                (session_id, message_id),
            ).fetchone()[0]
        after = self.db.execute(  # the next message, if it is unlinked it follows this one
            "SELECT min(id) FROM messages WHERE session_id = ? AND id > ?",
            (session_id, message_id),
        ).fetchone()[0]
        with self._writing():
            if after is not None:
                self.db.execute(
                    "INSERT OR IGNORE INTO message_links VALUES (?, ?)", (after, message_id)
                )
            self.db.execute(
                "UPDATE message_links SET parent_id = ? WHERE parent_id = ?", (parent, message_id)
            )
            chosen = self.db.execute(
                "SELECT child_id FROM branch_choices WHERE session_id = ? AND parent_id = ?",
                (session_id, message_id),
            ).fetchone()
            self.db.execute(
                "DELETE FROM branch_choices WHERE session_id = ? AND parent_id = ?",
                (session_id, message_id),
            )
            if chosen is not None:
                self.db.execute(
                    "UPDATE branch_choices SET child_id = ? "
                    "WHERE session_id = ? AND parent_id = ? AND child_id = ?",
                    (chosen[0], session_id, parent, message_id),
                )
            self.db.execute("DELETE FROM branch_choices WHERE child_id = ?", (message_id,))
            self.db.execute("DELETE FROM messages WHERE id = ?", (message_id,))

    def fork_chat(self, session_id: str, message_ids: list[int], title: str) -> Session:
        """A new chat holding copies of ``message_ids`` of ``session_id``, one after
        another (tokens and figures included), the chat's own system prompt and answer
        format, in its folder."""
        now = time.time()
        fork = Session(uuid.uuid4().hex, title, now, now)
        with self._writing():
            self.db.execute("INSERT INTO sessions VALUES (?, ?, ?, ?)", (fork.id, title, now, now))
            parent = 0
            for message_id in message_ids:
                copied = self.db.execute(
                    "INSERT INTO messages (session_id, role, content, finish_reason, model, "
                    "stats, timing, created) SELECT ?, role, content, finish_reason, model, "
                    "stats, timing, created FROM messages WHERE id = ? AND session_id = ?",
                    (fork.id, message_id, session_id),
                )
                if copied.rowcount != 1:
                    continue  # not a message of that chat
                copy = copied.lastrowid
                self.db.execute(
                    "INSERT INTO tokens SELECT ?, idx, token, start, end, from_draft, "
                    "pass_index, draft_position, drafter FROM tokens WHERE message_id = ?",
                    (copy, message_id),
                )
                self.db.execute("INSERT INTO message_links VALUES (?, ?)", (copy, parent))
                self.db.execute(
                    "INSERT INTO branch_choices VALUES (?, ?, ?)", (fork.id, parent, copy)
                )
                parent = copy
            self.db.execute(
                "INSERT INTO chat_system_prompts SELECT ?, text FROM chat_system_prompts "
                "WHERE session_id = ?",
                (fork.id, session_id),
            )
            self.db.execute(
                "INSERT INTO chat_answer_formats SELECT ?, kind, schema "
                "FROM chat_answer_formats WHERE session_id = ?",
                (fork.id, session_id),
            )
            self.db.execute(
                "INSERT INTO chat_folders SELECT ?, folder_id FROM chat_folders "
                "WHERE session_id = ?",
                (fork.id, session_id),
            )
            row = self.db.execute(
                "SELECT folder_id FROM chat_folders WHERE session_id = ?", (fork.id,)
            ).fetchone()
            fork.folder_id = row[0] if row else None
        return fork

    def messages(self, session_id: str) -> list[Message]:
        """The chat as shown: from the first message, each step the chosen (else newest)
        of the messages that follow; each carries its alternatives in ``versions``."""
        every = self.all_messages(session_id)
        links = dict(
            self.db.execute(
                "SELECT l.message_id, l.parent_id FROM message_links l JOIN messages m "
                "ON m.id = l.message_id WHERE m.session_id = ?",
                (session_id,),
            ).fetchall()
        )
        chosen = dict(
            self.db.execute(
                "SELECT parent_id, child_id FROM branch_choices WHERE session_id = ?", (session_id,)
            ).fetchall()
        )
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
            "FROM messages WHERE session_id = ? ORDER BY id",
            (session_id,),
        ).fetchall()
        result = []
        for row in rows:
            stats, timing = stored_figures(_json(row[6]), _json(row[7]))  # figures of their kind
            opened_thinking = stats.pop(OPENED_THINKING, None) is True
            message = Message(*row[:6], stats, timing, None, row[8])
            if message.role == "assistant":
                message.read_provenance_when_used(
                    partial(self._provenance, message.id, message.content, opened_thinking),
                    opened_thinking,
                )
            result.append(message)
        return result

    def _provenance(self, message_id: int, text: str, opened_thinking: bool) -> Provenance:
        """A stored answer's provenance, from its tokens; without them (no highlights) when
        they cannot be read any more (the history was closed as the app quits)."""
        try:
            rows = self.db.execute(
                "SELECT token, start, end, from_draft, pass_index, draft_position, drafter "
                "FROM tokens WHERE message_id = ? ORDER BY idx",
                (message_id,),
            ).fetchall()
        except sqlite3.Error:
            rows = []
        tokens = [
            TokenInfo(token, bool(from_draft), pass_index, draft_position, drafter, start, end)
            for token, start, end, from_draft, pass_index, draft_position, drafter in rows
        ]
        provenance = Provenance.from_tokens(text, tokens)
        provenance.opened_thinking = opened_thinking
        return provenance


def stored_stats(message: Message) -> str:
    """The stats column of ``message``: its figures, and ``OPENED_THINKING`` when the chat
    template opened the think block its text starts in (read back onto its provenance)."""
    stats = dict(message.stats)
    if message.provenance is not None and message.provenance.opened_thinking:
        stats[OPENED_THINKING] = True
    return json.dumps(stats)


def folded(text: str | None) -> str:
    """``text`` for comparing: Unicode's NFKC case folding (composed and decomposed accents,
    full-width letters and case differences all fold to the same string)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFD", text or "").casefold())


def _json(text: str | None) -> dict:
    """A JSON column's object; {} for one that is not (damaged: its figures read as absent)."""
    try:
        value = parse_json(text) if text else {}
    except (ValueError, TypeError):  # TypeError: not text at all (a blob)
        return {}
    return value if isinstance(value, dict) else {}
