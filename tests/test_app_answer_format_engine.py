"""On the real engine (the tiny random-weight model): a chat with a JSON schema is answered
with JSON that follows it; a chat without one is answered as before, in free text."""

from __future__ import annotations

import json

from PySide6.QtGui import QKeySequence
from PySide6.QtTest import QTest

from .test_app_answer_format import choose, paste, use
from .test_app_gui import dirs, engine_service, finish, loop, make_app, send  # noqa: F401

SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "mood": {"enum": ["calm", "busy"]}},
    "required": ["ok", "mood"],
    "additionalProperties": False,
}


def test_an_answer_under_a_schema_parses_and_follows_it(make_app, qtbot):
    application = make_app()
    window, recorder = application.window, application.recorder
    window.settings_panel.max_tokens.setValue(64)

    finish(qtbot, send(qtbot, window, "Say something"), 60)
    plain = window.controller.messages[-1]
    plain_chat = window.controller.session.id
    assert recorder.requests[-1].json_schema is None
    assert plain.role == "assistant" and plain.finish_reason == "length"  # free text runs on

    QTest.keySequence(window, QKeySequence.New)  # Ctrl+N
    assert window.controller.session is None or window.controller.session.id != plain_chat
    bar = window.answer_format_bar
    choose(bar, "JSON schema…")
    paste(bar.editor, json.dumps(SCHEMA))
    use(bar)
    finish(qtbot, send(qtbot, window, "Say something"), 60)
    answer = window.controller.messages[-1]
    assert recorder.requests[-1].json_schema == SCHEMA
    assert answer.finish_reason == "stop"
    assert window.controller.session.id != plain_chat
    value = json.loads(answer.content)
    assert set(value) == {"ok", "mood"}
    assert isinstance(value["ok"], bool) and value["mood"] in ("calm", "busy")
