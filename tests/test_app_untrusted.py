"""Files from disk are untrusted: the chat database and settings.json in every bad state a
person can leave them in. Nothing crashes, nothing is lost, and the message says what to do.

Permission bits do not bind root, so where a test needs a read-only file or folder and the
suite runs as root, the store is opened with the effective user id of ``nobody``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.storage.settings import AppSettings, SettingsStore
from app.storage.store import Message, Store


@contextmanager
def unprivileged():
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(65534)  # nobody
    try:
        yield
    finally:
        os.seteuid(0)


@pytest.fixture
def shared(tmp_path):
    """A folder the unprivileged user can reach (pytest's own tmp folders are private)."""
    folder = Path(tempfile.mkdtemp(prefix="draftless-untrusted-"))
    folder.chmod(0o777)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir():
            path.chmod(0o777)
    shutil.rmtree(folder, ignore_errors=True)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def history(path: Path, *titles: str) -> Path:
    """A healthy database holding one chat per title (each with one message)."""
    store = Store(path)
    for title in titles:
        session = store.create_session(title)
        store.add_message(Message(None, session.id, "user", f"question in {title}"))
    store.close()
    return path


def aside(folder: Path) -> list[str]:
    return [f.name for f in folder.iterdir() if ".corrupt-" in f.name]


# --- the chat database --------------------------------------------------------------------------
def test_a_locked_database_is_waited_for_then_opened_read_only_not_moved(tmp_path):
    path = history(tmp_path / "chats.sqlite3", "kept")
    before = digest(path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another program holds the write lock
    try:
        store = Store(path, lock_wait=0.3)
        assert "locked by another program" in store.notice and "not be saved" in store.notice
        assert store.read_only and aside(tmp_path) == []
        assert [s.title for s in store.sessions()] == ["kept"]
        store.create_session("this run only")  # works, in memory
        assert [s.title for s in store.sessions()][0] == "this run only"
        store.close()
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert digest(path) == before
    again = Store(path)
    assert again.notice is None and not again.read_only
    assert [s.title for s in again.sessions()] == ["kept"]


def test_a_lock_released_while_waiting_opens_the_database_normally(tmp_path):
    path = history(tmp_path / "chats.sqlite3", "kept")
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(0.5, lambda: other.execute("ROLLBACK"))
    release.start()
    try:
        store = Store(path, lock_wait=10)
    finally:
        release.join()
        other.close()
    assert store.notice is None and not store.read_only
    store.create_session("saved")
    assert {s.title for s in Store(path).sessions()} == {"kept", "saved"}


def test_a_read_only_database_file_is_opened_read_only(shared):
    path = history(shared / "chats.sqlite3", "kept")
    path.chmod(0o444)
    before = digest(path)
    with unprivileged():
        store = Store(path)
        assert "cannot be written" in store.notice and "read-only" in store.notice
        assert store.read_only and aside(shared) == []
        assert [s.title for s in store.sessions()] == ["kept"]
        session = store.sessions()[0]
        assert store.messages(session.id)[0].content == "question in kept"
        store.create_session("this run only")
        store.close()
    assert digest(path) == before


def test_a_read_only_data_folder_keeps_its_chats_and_does_not_crash(shared):
    data = shared / "data"
    data.mkdir()
    path = history(data / "chats.sqlite3", "kept")
    data.chmod(0o555)
    with unprivileged():
        store = Store(path)
        assert store.read_only and "cannot be written" in store.notice
        assert [s.title for s in store.sessions()] == ["kept"]
        store.close()
    assert sorted(f.name for f in data.iterdir()) == ["chats.sqlite3"]


def test_an_empty_read_only_data_folder_gives_a_history_in_memory(shared):
    data = shared / "data"
    data.mkdir(mode=0o555)
    data.chmod(0o555)
    with unprivileged():
        store = Store(data / "chats.sqlite3")
        assert store.read_only and "cannot be created" in store.notice
        session = store.create_session("in memory")
        store.add_message(Message(None, session.id, "user", "hello"))
        assert [m.content for m in store.messages(session.id)] == ["hello"]
        unreachable = Store(data / "missing" / "chats.sqlite3")  # its folder cannot be made
        assert unreachable.read_only and "cannot be created" in unreachable.notice
    assert list(data.iterdir()) == []


def test_a_damaged_database_in_a_read_only_folder_is_named_and_left_in_place(shared):
    data = shared / "data"
    data.mkdir()
    path = data / "chats.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    data.chmod(0o555)
    with unprivileged():
        store = Store(path)
        assert "damaged" in store.notice and store.read_only
        assert store.sessions() == []
    assert path.read_bytes().startswith(b"this is not")


def test_a_database_from_a_newer_version_is_never_moved_aside(tmp_path):
    path = history(tmp_path / "chats.sqlite3", "from the future")
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 7")
    before = digest(path)
    store = Store(path)
    assert "newer version of Draftless" in store.notice and "schema 7" in store.notice
    assert store.read_only and aside(tmp_path) == []
    assert [s.title for s in store.sessions()] == ["from the future"]
    store.create_session("not written")
    store.close()
    assert digest(path) == before


def test_a_database_deleted_while_running_is_written_again_on_the_next_write(tmp_path):
    path = history(tmp_path / "data" / "chats.sqlite3", "older chat")
    store = Store(path)
    told = []
    store.on_notice = told.append
    session = store.create_session("current")
    store.add_message(Message(None, session.id, "user", "first"))
    shutil.rmtree(path.parent)  # the whole data folder, -wal and -shm included
    store.add_message(Message(None, session.id, "assistant", "the next answer"))
    assert path.exists() and len(told) == 1 and "was deleted" in told[0]
    store.add_message(Message(None, session.id, "user", "after"))
    assert len(told) == 1
    store.close()
    again = Store(path)
    assert again.notice is None
    assert {s.title for s in again.sessions()} == {"older chat", "current"}
    assert [m.content for m in again.messages(session.id)] == ["first", "the next answer", "after"]


# --- settings.json ------------------------------------------------------------------------------
def test_an_unknown_drafter_falls_back_is_named_once_and_the_original_is_kept(tmp_path):
    (tmp_path / "settings.json").write_text(
        json.dumps({"drafter": "telepathy", "temperature": -1, "ngram_order": 3})
    )
    store = SettingsStore(tmp_path)
    settings = store.load()
    assert (settings.drafter, settings.temperature, settings.ngram_order) == ("default", 0.0, 3)
    assert "'telepathy'" in store.message and "ngram-cache" in store.message  # the choices
    assert "temperature" in store.message and ".." not in store.message
    [kept] = [f for f in tmp_path.iterdir() if f.name.startswith("settings.json.invalid-")]
    assert kept.name in store.message and json.loads(kept.read_text())["drafter"] == "telepathy"
    again = SettingsStore(tmp_path)
    assert again.load() == settings and again.message is None
    settings.request([{"role": "user", "content": "hi"}]).validated()  # the engine accepts it


def test_settings_that_are_not_json_are_moved_aside_not_overwritten(tmp_path):
    (tmp_path / "settings.json").write_text("{broken")
    store = SettingsStore(tmp_path)
    assert store.load() == AppSettings()
    [kept] = [f for f in tmp_path.iterdir() if f.name.startswith("settings.json.corrupt-")]
    assert kept.read_text() == "{broken" and kept.name in store.message
    store.save(AppSettings(draft_count=7))
    assert kept.read_text() == "{broken"


DAMAGED_FIGURES = {
    "passes": "7",
    "drafted": [4],
    "accepted": -1,
    "emitted": 2.5,
    "tokens_per_pass": float("nan"),
    "acceptance_rate": "61%",
    "estimated_speedup": "fast",
    "greedy": "yes",
    "drafter": 3,
    "accepted_length_counts": 5,
    "position_drafted": [1, "a"],
    "per_position_acceptance": [0.5, None],
    "drafter_counters": {"calls": "x"},
}


def test_damaged_figures_of_a_stored_answer_read_as_absent_and_the_rest_shows(tmp_path):
    """A history row whose numbers are not numbers (hand-edited, another program): every
    reader of a stored answer (footer, gauge numbers, Continue's sum) gets the figures that
    are of their kind and reads the others as absent, never a traceback."""
    from app.presenters.livestats import LiveStats, footer_text
    from engine.stats import DecodeStats

    store = Store(tmp_path / "history.db")
    session = store.create_session("damaged")
    good = DecodeStats(passes=4, drafted=6, accepted=3, emitted=9, decode_s=0.3).to_dict()
    answer = store.add_message(
        Message(None, session.id, "assistant", "an answer", "stop", None, good, {"decode_s": 0.3})
    )
    damaged = {**good, **DAMAGED_FIGURES}
    with store.db:
        store.db.execute(
            "UPDATE messages SET stats = ?, timing = ? WHERE id = ?",
            (json.dumps(damaged), json.dumps({"decode_s": "slow", "prefill_s": -2}), answer.id),
        )
    (loaded,) = store.all_messages(session.id)
    assert set(loaded.stats) == set(good) - set(DAMAGED_FIGURES)  # the rest is kept as stored
    assert loaded.stats["pass_sizes"] == good["pass_sizes"] and loaded.timing == {}
    assert footer_text(9, loaded.stats, loaded.timing, "stop").startswith("9 tokens")
    live = LiveStats.of_message(loaded.stats, loaded.timing)
    assert (live.passes, live.drafted, live.stats.estimated_speedup) == (0, 0, None)
    whole = DecodeStats.from_dict(loaded.stats).merged(DecodeStats.from_dict(good))
    assert whole.passes == 4 and whole.emitted == 9
    # and the raw dicts themselves, as an older store or another caller might pass them
    assert DecodeStats.from_dict(damaged, {"decode_s": "slow"}).passes == 0
    assert footer_text(9, damaged, {"tokens_per_s": "x"}).startswith("9 tokens")
    store.close()


def test_a_chat_system_prompt_that_is_not_text_reads_as_none_so_the_default_answers(tmp_path):
    """A hand-edited history whose chat prompt is bytes: the chat reads as having no prompt
    of its own (the settings' default answers it), and so does a fork of it."""
    store = Store(tmp_path / "history.db")
    session = store.create_session("odd prompt", system_prompt="Be brief.")
    with store.db:
        store.db.execute(
            "UPDATE chat_system_prompts SET text = ? WHERE session_id = ?",
            (b"\x00\xff", session.id),
        )
    assert store.system_prompt(session.id) is None
    fork = store.fork_chat(session.id, [], "odd prompt (fork)")
    assert store.system_prompt(fork.id) is None
    store.close()
