"""Every file the app reads goes through one bounded reader (``engine.untrusted``): only a
regular file of a sane size, and a parse error of any kind, RecursionError included, is a
damaged file, set aside and named. The reported settings.json as a link to /dev/zero, as a
named pipe and nested 100,000 deep; the chat database as a pipe and with nested figures."""

from __future__ import annotations

import json
import os
import threading

import pytest

from app.storage.settings import AppSettings, SettingsStore
from app.storage.store import Message, Store
from engine.untrusted import parse_json, read_json

from .test_app_trust import build  # noqa: F401  (the app on files the test prepares)
from .test_app_views import loop  # noqa: F401

NESTED = "[" * 100_000 + "]" * 100_000  # deeper than Python's parser goes
# Generous: reading a bad file must end at once; the old reader hung on a pipe for ever
ENDS_WITHIN_S = 20


def load_settings(folder) -> tuple[AppSettings, SettingsStore]:
    """``SettingsStore(folder).load()`` on a thread, so that a hang fails the test."""
    store, loaded = SettingsStore(folder), []
    reading = threading.Thread(target=lambda: loaded.append(store.load()), daemon=True)
    reading.start()
    reading.join(ENDS_WITHIN_S)
    assert not reading.is_alive(), "reading settings.json hung"
    return loaded[0], store


def kept_aside(folder, name: str) -> list[str]:
    return [f.name for f in folder.iterdir() if f.name.startswith(f"{name}.corrupt-")]


@pytest.mark.parametrize("kind", ["link to /dev/zero", "named pipe", "nested 100,000 deep"])
def test_a_settings_file_that_is_no_settings_file_gives_the_defaults_and_is_set_aside(
    tmp_path, kind
):
    path = tmp_path / "settings.json"
    if kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "named pipe":
        os.mkfifo(path)
    else:
        path.write_text(NESTED)
    settings, store = load_settings(tmp_path)
    assert settings == AppSettings() and not path.exists()
    [kept] = kept_aside(tmp_path, "settings.json")
    assert f"The settings file {path} could not be read" in store.message
    assert kept in store.message  # named
    store.save(AppSettings(draft_count=7))  # and a good file takes its place
    assert SettingsStore(tmp_path).load().draft_count == 7


def test_the_app_starts_on_nested_settings_and_says_so(build, tmp_path):  # noqa: F811
    """The report: every launch crashed (the pipe, which hung it, is the test above's: a
    hang here would stop the suite rather than fail it)."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "settings.json").write_text(NESTED)
    application = build()
    [kept] = kept_aside(config, "settings.json")
    [note] = [m for m in application.window.banner.messages if "settings" in m]
    assert kept in note and application.controller.settings.drafter == AppSettings().drafter


def test_the_chat_database_as_a_pipe_is_set_aside_and_a_new_one_started(tmp_path):
    path = tmp_path / "chats.sqlite3"
    os.mkfifo(path)
    opened = []

    def open_store():
        store = Store(path)
        opened.append((store.notice, store.read_only))
        store.close()

    opening = threading.Thread(target=open_store, daemon=True)
    opening.start()
    opening.join(ENDS_WITHIN_S)
    assert not opening.is_alive(), "opening the chat database hung"
    [(notice, read_only)] = opened
    [kept] = kept_aside(tmp_path, "chats.sqlite3")
    assert kept in notice and not read_only and path.is_file()  # a new history, saved


def test_figures_nested_too_deep_read_as_absent_and_the_chat_opens(tmp_path):
    store = Store(tmp_path / "chats.sqlite3")
    session = store.create_session("deep")
    answer = store.add_message(Message(None, session.id, "assistant", "an answer", "stop"))
    with store.db:
        store.db.execute(
            "UPDATE messages SET stats = ?, timing = ? WHERE id = ?", (NESTED, NESTED, answer.id)
        )
    (loaded,) = store.messages(session.id)
    assert loaded.content == "an answer" and loaded.stats == {} and loaded.timing == {}
    store.close()


def test_the_reader_takes_only_regular_files_of_a_sane_size_and_json_of_any_depth(tmp_path):
    (tmp_path / "big.json").write_text(json.dumps({"x": "y" * 100}))
    with pytest.raises(ValueError, match="larger than 50 bytes"):
        read_json(tmp_path / "big.json", 50)
    with pytest.raises(ValueError, match="not a regular file"):
        read_json("/dev/zero", 1 << 20)
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json(NESTED)
    with pytest.raises(ValueError):
        parse_json(b"\xff\xfe{")
    assert read_json(tmp_path / "big.json", 1000) == {"x": "y" * 100}
