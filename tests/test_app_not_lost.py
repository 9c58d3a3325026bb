"""Nothing typed or streamed is lost (issue 61): keys typed while a model loads, an answer
cut off by a failing engine or server, and the banners that said so."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from engine.events import DoneEvent, ModelEvent, ProgressEvent

from .test_app_views import SIMPLE, answer_events, app, loop, wait  # noqa: F401

QUESTION = "What is speculative decoding? Answer in two sentences."


def focused():
    return QApplication.focusWidget()


def held_load(app, name="other-model"):
    """A model load that reports 3 of 10 converted and then waits for ``gate.set()``."""
    gate = asyncio.Event()
    app.scripted.load_script = [
        ProgressEvent("convert", 3, 10, "Converting weights (3/10)"),
        gate,
        ModelEvent(name, "/elsewhere", "on"),
        DoneEvent("loaded", "", [], []),
    ]
    return gate


def test_keys_typed_while_a_model_loads_survive_and_send_once_it_has_loaded(app, qtbot):
    window, controller = app.window, app.controller
    gate = held_load(app)
    task = controller.models.load_model("/models/other")
    qtbot.wait(600)  # longer than any grace before a dialog would come up
    qtbot.keyClicks(focused(), QUESTION)  # the person types on, where the focus is
    qtbot.keyClick(focused(), Qt.Key_Return)
    assert window.input.toPlainText() == QUESTION and app.scripted.requests == []
    assert QApplication.activeModalWidget() is None
    picker = window.model_presenter.picker  # the load's progress is shown there
    assert "30%" in picker.button.text()
    assert picker.bar.isVisible() and (picker.bar.value(), picker.bar.maximum()) == (3, 10)
    assert window.composer.note.isVisible() and "Sends when" in window.composer.note.text()
    app.scripted.queue(answer_events(SIMPLE))  # the answer it will get
    gate.set()
    wait(qtbot, task)
    qtbot.waitUntil(lambda: controller.answer_task is not None)
    wait(qtbot, controller.answer_task)
    [request] = app.scripted.requests
    assert request.messages[-1]["content"] == QUESTION
    assert controller.session.title.startswith("What is speculative decoding?")
    assert window.input.toPlainText() == "" and not window.composer.note.isVisible()
    assert controller.models.model_name == "other-model" and not picker.bar.isVisible()


def test_enter_during_an_answer_says_why_nothing_was_sent(app, qtbot):
    window = app.window
    gate = asyncio.Event()
    events = answer_events(SIMPLE)
    app.scripted.queue(events[:2] + [gate] + events[2:])
    task = window.send("first")
    window.input.setFocus()
    qtbot.keyClicks(focused(), "second")
    qtbot.keyClick(focused(), Qt.Key_Return)
    assert window.input.toPlainText() == "second"
    assert "answer is being written" in window.composer.note.text()
    assert window.composer.note.isVisible()
    gate.set()
    wait(qtbot, task)
    assert not window.composer.note.isVisible()  # it no longer holds
