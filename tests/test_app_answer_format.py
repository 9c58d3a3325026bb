"""A chat's answer format, chosen beside its system prompt: off by default, any JSON object,
or a pasted schema that is checked before it is kept; stored with the chat and sent with
each of its requests (scripted engine; the real model's JSON is in
test_app_answer_format_engine.py)."""

from __future__ import annotations

import json
import sqlite3

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.storage.answer_format import ANY_OBJECT, JSON_SCHEMA
from app.storage.store import Store
from engine.formats.schemas import MAX_SCHEMA_CHARS

from .scripted_engine import END, answer_events
from .test_app_views import app, ask, loop  # noqa: F401

HI = [(0, [("Hi", False)]), (0, [(END, False)])]
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "people": {"type": "integer"}},
    "required": ["city", "people"],
}


def choose(bar, name):
    """Pick ``name`` in the answer-format list with the keyboard."""
    bar.kind.setFocus()
    key = Qt.Key_Down if bar.kind.findText(name) > bar.kind.currentIndex() else Qt.Key_Up
    while bar.kind.currentText() != name:
        QTest.keyClick(bar.kind, key)


def click_item(bar, name):
    """Open the list and click ``name`` in it, as a person picks it again."""
    bar.kind.showPopup()
    view = bar.kind.view()
    spot = view.visualRect(view.model().index(bar.kind.findText(name), 0)).center()
    QTest.mouseClick(view.viewport(), Qt.LeftButton, pos=spot)


def paste(editor, text):
    editor.setFocus()
    QTest.keyClick(editor, Qt.Key_A, Qt.ControlModifier)
    QApplication.clipboard().setText(text)
    QTest.keyClick(editor, Qt.Key_V, Qt.ControlModifier)


def use(bar):
    QTest.mouseClick(bar.use_button, Qt.LeftButton)


def test_json_object_and_a_pasted_schema_go_with_the_chats_requests(app, qtbot):
    window, controller = app.window, app.controller
    bar = window.answer_format_bar
    assert bar.kind.currentText() == "Text answers" and bar.kind.isVisible()
    ask(qtbot, app, "plain", answer_events(HI))
    assert app.scripted.requests[-1].json_schema is None  # off by default
    plain_chat = controller.session.id

    window.new_chat()
    choose(bar, "JSON object")
    assert not bar.panel.isVisible()
    ask(qtbot, app, "an object", answer_events(HI))
    assert app.scripted.requests[-1].json_schema == ANY_OBJECT
    object_chat = controller.session.id

    window.new_chat()
    assert bar.kind.currentText() == "Text answers"  # a new chat starts in free text
    choose(bar, "JSON schema…")
    assert bar.panel.isVisible() and bar.editor.hasFocus()
    paste(bar.editor, json.dumps(SCHEMA, indent=2))
    use(bar)
    assert not bar.panel.isVisible()
    ask(qtbot, app, "a city", answer_events(HI))
    assert app.scripted.requests[-1].json_schema == SCHEMA
    ask(qtbot, app, "another", answer_events(HI))
    assert app.scripted.requests[-1].json_schema == SCHEMA  # every request of the chat
    click_item(bar, "JSON schema…")  # chosen again: the schema, to change it
    assert bar.panel.isVisible() and json.loads(bar.editor.toPlainText()) == SCHEMA
    QTest.mouseClick(bar.cancel_button, Qt.LeftButton)
    schema_chat = controller.session.id

    for chat, shown, sent in (
        (plain_chat, "Text answers", None),
        (object_chat, "JSON object", ANY_OBJECT),
        (schema_chat, "JSON schema…", SCHEMA),
    ):
        controller.open_session(chat)
        assert bar.kind.currentText() == shown
        ask(qtbot, app, "again", answer_events(HI))
        assert app.scripted.requests[-1].json_schema == sent

    reopened = Store(app.store.path)  # as the next start reads it
    assert reopened.answer_format(schema_chat) == (JSON_SCHEMA, json.dumps(SCHEMA, indent=2))
    reopened.close()


def test_a_bad_schema_is_named_inline_and_not_saved(app, qtbot):
    window, controller = app.window, app.controller
    bar = window.answer_format_bar
    choose(bar, "JSON object")
    chat = controller.session.id
    choose(bar, "JSON schema…")
    for text, said in (
        ('{"type": "object",', "not JSON"),
        ("[1, 2]", "must be a JSON object"),
        (json.dumps({"enum": ["x" * MAX_SCHEMA_CHARS]}), f"at most {MAX_SCHEMA_CHARS:,}"),
        ('{"a":' * 3000 + "1" + "}" * 3000, "nested too deeply"),
        ('{"a":' * 100 + "{}" + "}" * 100, "more than 64 levels"),
    ):
        paste(bar.editor, text)
        use(bar)
        assert bar.notice.isVisible() and said in bar.notice.text()
        assert "keeps answering in any JSON object" in bar.notice.text()
        assert bar.editor.toPlainText() == text and bar.panel.isVisible()  # kept to fix
        assert app.store.answer_format(chat) == ("json_object", "")
    ask(qtbot, app, "still an object", answer_events(HI))
    assert app.scripted.requests[-1].json_schema == ANY_OBJECT

    QTest.mouseClick(bar.cancel_button, Qt.LeftButton)
    assert bar.kind.currentText() == "JSON object" and not bar.panel.isVisible()


def test_a_damaged_stored_schema_is_named_and_the_chat_answers_in_text(app, qtbot):
    window, controller = app.window, app.controller
    ask(qtbot, app, "hello", answer_events(HI))
    chat = controller.session.id
    app.store.set_answer_format(chat, JSON_SCHEMA, "{not json")
    said = []
    controller.problem.connect(said.append)
    window.new_chat()
    controller.open_session(chat)
    assert any("answer format could not be used" in s for s in said)
    assert window.answer_format_bar.kind.currentText() == "Text answers"
    ask(qtbot, app, "again", answer_events(HI))
    assert app.scripted.requests[-1].json_schema is None
    assert app.store.answer_format(chat) == (JSON_SCHEMA, "{not json")  # left as it was


def test_a_history_file_from_before_answer_formats_opens_and_gains_them(tmp_path):
    path = tmp_path / "v2.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT NOT NULL, "
        "created REAL NOT NULL, updated REAL NOT NULL);"
        "CREATE TABLE chat_system_prompts (session_id TEXT PRIMARY KEY, text TEXT NOT NULL);"
        "INSERT INTO sessions VALUES ('old', 'An old chat', 1, 1);"
        "INSERT INTO chat_system_prompts VALUES ('old', 'Be brief.');"
        "PRAGMA user_version = 2;"
    )
    old.commit()
    old.close()
    store = Store(path)
    assert store.notice is None and not store.read_only
    assert [s.title for s in store.sessions()] == ["An old chat"]
    assert store.system_prompt("old") == "Be brief." and store.answer_format("old") is None
    store.set_answer_format("old", "json_object", "")
    fork = store.fork_chat("old", [], "Its fork")
    store.close()
    again = Store(path)
    assert again.answer_format("old") == again.answer_format(fork.id) == ("json_object", "")
    again.close()


def test_a_server_gets_the_chats_schema_as_response_format():
    from app.engines.remote_engine import request_body
    from engine.settings import GenerationRequest

    turns = [{"role": "user", "content": "a city"}]
    assert "response_format" not in request_body(GenerationRequest(messages=turns))
    body = request_body(GenerationRequest(messages=turns, json_schema=SCHEMA))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA},
    }
