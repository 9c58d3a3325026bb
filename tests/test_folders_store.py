"""Folders in the chat database: an additive migration (a file of schema 2, as Draftless
wrote it before folders, opens with every chat at the top level and nothing else changed),
deleting a folder never deletes a chat, forks stay in their parent's folder."""

from __future__ import annotations

import sqlite3

from app.storage.store import SCHEMA_VERSION, Message, Store

# The chat database exactly as schema 2 (before folders) created it.
SCHEMA_2 = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT NOT NULL, created REAL NOT NULL,
    updated REAL NOT NULL);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, role TEXT NOT NULL,
    content TEXT NOT NULL, finish_reason TEXT, model TEXT, stats TEXT, timing TEXT,
    created REAL NOT NULL);
CREATE INDEX messages_by_session ON messages(session_id, id);
CREATE TABLE tokens (message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL, token INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
    from_draft INTEGER NOT NULL, pass_index INTEGER NOT NULL, draft_position INTEGER,
    drafter TEXT NOT NULL, PRIMARY KEY (message_id, idx)) WITHOUT ROWID;
CREATE TABLE message_links (message_id INTEGER PRIMARY KEY REFERENCES messages(id)
    ON DELETE CASCADE, parent_id INTEGER NOT NULL);
CREATE TABLE branch_choices (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE
    CASCADE, parent_id INTEGER NOT NULL, child_id INTEGER NOT NULL,
    PRIMARY KEY (session_id, parent_id)) WITHOUT ROWID;
CREATE TABLE chat_system_prompts (session_id TEXT PRIMARY KEY REFERENCES sessions(id)
    ON DELETE CASCADE, text TEXT NOT NULL);
INSERT INTO sessions VALUES ('a', 'About pears', 1, 30), ('b', 'Bread', 2, 20);
INSERT INTO messages VALUES (1, 'a', 'user', 'pears?', NULL, NULL, '{}', '{}', 3),
    (2, 'a', 'assistant', 'Pears are fruit.', 'stop', 'm', '{}', '{}', 4),
    (3, 'b', 'user', 'bread?', NULL, NULL, '{}', '{}', 5);
INSERT INTO chat_system_prompts VALUES ('a', 'Be brief.');
PRAGMA user_version = 2;
"""
OLD_TABLES = ("sessions", "messages", "tokens", "message_links", "branch_choices")


def old_rows(path) -> dict:
    db = sqlite3.connect(path)
    rows = {table: db.execute(f"SELECT * FROM {table}").fetchall() for table in OLD_TABLES}
    db.close()
    return rows


def test_a_file_from_before_folders_opens_with_every_chat_at_the_top_level(tmp_path):
    path = tmp_path / "schema2.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA_2)
    old.commit()
    old.close()
    before = old_rows(path)
    store = Store(path)
    assert store.notice is None and not store.read_only
    assert [(s.title, s.folder_id) for s in store.sessions()] == [
        ("About pears", None),
        ("Bread", None),
    ]
    assert store.folders() == []
    assert [m.content for m in store.messages("a")] == ["pears?", "Pears are fruit."]
    assert store.system_prompt("a") == "Be brief."
    store.close()
    assert old_rows(path) == before  # the migration only adds
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()
    # and the chats can go into folders from then on
    store = Store(path)
    fruit = store.create_folder("Fruit")
    store.move_to_folder("a", fruit.id)
    store.close()
    assert Store(path).session("a").folder_id == fruit.id


def test_deleting_a_folder_moves_its_chats_out_and_deletes_none(tmp_path):
    store = Store(tmp_path / "chats.sqlite3")
    work = store.create_folder("Work")
    chats = [store.create_session(f"chat {i}") for i in range(3)]
    store.move_to_folder(chats[0].id, work.id)
    store.move_to_folder(chats[1].id, work.id)
    assert store.delete_folder(work.id) == 2
    assert store.folders() == []
    assert sorted(s.title for s in store.sessions()) == ["chat 0", "chat 1", "chat 2"]
    assert all(s.folder_id is None for s in store.sessions())


def test_folders_rename_collapse_and_chats_move_out_again(tmp_path):
    path = tmp_path / "chats.sqlite3"
    store = Store(path)
    zed, alpha = store.create_folder("zed"), store.create_folder("Alpha")
    chat = store.create_session("one")
    store.move_to_folder(chat.id, zed.id)
    store.rename_folder(zed.id, "Beta")
    store.set_folder_collapsed(alpha.id, True)
    store.close()
    store = Store(path)
    assert [(f.name, f.collapsed) for f in store.folders()] == [("Alpha", True), ("Beta", False)]
    store.move_to_folder(chat.id, None)
    assert store.session(chat.id).folder_id is None


def test_a_fork_stays_in_its_parents_folder_and_search_finds_chats_in_folders(tmp_path):
    store = Store(tmp_path / "chats.sqlite3")
    folder = store.create_folder("Fruit")
    chat = store.create_session("Pears")
    question = store.add_message(Message(None, chat.id, "user", "a quince question"))
    store.move_to_folder(chat.id, folder.id)
    fork = store.fork_chat(chat.id, [question.id], "Fork 1: Pears")
    assert fork.folder_id == folder.id and store.session(fork.id).folder_id == folder.id
    found = store.sessions("QUINCE")
    assert {(s.title, s.folder_id) for s in found} == {
        ("Pears", folder.id),
        ("Fork 1: Pears", folder.id),
    }
