"""What a person can trust the app with: nothing typed is lost when the disk is full, a
damaged settings file is kept, text is shown as written (any `<`, emoji, scripts), the
keyboard goes where the person types. Views fed scripted engine events (no model)."""

from __future__ import annotations

import sqlite3

from PySide6.QtCore import Qt

from .scripted_engine import END, answer_events
from .test_app_views import SIMPLE, app, ask, loop, plain, wait  # noqa: F401


def type_and_send(qtbot, window, text):
    window.input.setFocus()
    qtbot.keyClicks(window.input, text)
    qtbot.keyClick(window.input, Qt.Key_Return)


# A. a full disk ---------------------------------------------------------------------------
def test_a_full_disk_keeps_the_typed_message_and_says_what_to_do(app, qtbot, monkeypatch):
    window = app.window

    def full(*_args, **_kwargs):
        raise sqlite3.OperationalError("database or disk is full")
    monkeypatch.setattr(app.store, "add_message", full)
    type_and_send(qtbot, window, "a question worth keeping")
    assert window.input.toPlainText() == "a question worth keeping"
    assert window.banner.isVisible()
    message = window.banner.label.text()
    assert "disk is full" in message and "free" in message.lower() and "Send" in message
    assert not app.controller.busy and window.send_button.isEnabled()
    assert window.transcript.views == [] and app.controller.messages == []

    monkeypatch.undo()  # space freed: the same message goes out as typed
    app.scripted.queue(plain("kept"))
    task = window.send(window.input.toPlainText())
    wait(qtbot, task)
    assert [v.text for v in window.transcript.views] == ["a question worth keeping", "kept"]
    assert window.input.toPlainText() == ""
