"""Nothing typed or streamed is lost (issue 61): keys typed while a model loads, an answer
cut off by a failing engine or server, and the banners that said so."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from engine.events import DoneEvent, ModelEvent, ProgressEvent

from .test_app_keyboard import held_answer
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
    gate = held_answer(app)
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


def cut_after(events, passes: int, why: str):
    """``events`` up to the end of pass ``passes``, then the engine's error."""
    from engine.events import ErrorEvent, PassEvent

    kept, seen = [], 0
    for event in events:
        kept.append(event)
        seen += isinstance(event, PassEvent)
        if seen == passes:
            break
    return kept + [ErrorEvent(why)]


CUT = "The server at http://studio.local:8080/v1 stopped answering (connection reset)."


def test_an_engine_failure_keeps_the_partial_answer_with_retry_and_continue(app, qtbot):
    window, controller = app.window, app.controller
    app.scripted.queue(cut_after(answer_events(SIMPLE), 2, CUT))
    wait(qtbot, window.send("Say hello"))
    view = window.transcript.views[-1]
    assert view.text == "Hello there, friend"  # what had streamed stays
    assert view.footer.text().endswith(f"interrupted: {CUT}")
    assert f"interrupted: {CUT}" in view.footer.toolTip()
    assert view.regenerate_button.text() == "Retry" and view.regenerate_button.isVisible()
    assert view.continue_button.isVisible()
    stored = app.store.messages(controller.session.id)[-1]
    assert (stored.role, stored.content, stored.finish_reason) == (
        "assistant",
        "Hello there, friend",
        "interrupted",
    )
    assert len(stored.provenance.tokens) == 4 and window.banner.isVisible()

    app.scripted.queue(answer_events([(0, [(".", False)]), (1, [(None, False)])]))
    view.continue_button.click()  # goes on where it was cut
    wait(qtbot, controller.answer_task)
    request = app.scripted.requests[-1]
    assert list(request.continue_tokens) == [t.token for t in stored.provenance.tokens]
    whole = app.store.messages(controller.session.id)[-1]
    assert whole.content == "Hello there, friend." and whole.finish_reason == "stop"
    assert not window.banner.isVisible()  # an answer came: the failure no longer holds


def test_a_question_refused_before_any_token_gets_a_card_with_retry(app, qtbot):
    window, controller = app.window, app.controller
    refused = "The chat and Max tokens no longer fit the model's window."
    app.scripted.queue(cut_after([], 0, refused))
    wait(qtbot, window.send("A long question"))
    view = window.transcript.views[-1]
    assert view.role == "assistant" and view.footer.text() == f"Not answered: {refused}"
    assert view.regenerate_button.text() == "Retry" and not view.continue_button.isVisible()
    app.scripted.queue(answer_events(SIMPLE))
    view.regenerate_button.click()  # Retry: the question is answered in its place
    wait(qtbot, controller.answer_task)
    assert [m.role for m in controller.messages] == ["user", "assistant"]
    assert controller.messages[-1].content == "Hello there, friend."


def test_the_not_sent_banner_goes_once_the_message_is_sent(app, qtbot, monkeypatch):
    import sqlite3

    window = app.window

    def full(*_args, **_kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(app.store, "add_message", full)
    window.input.setFocus()
    qtbot.keyClicks(focused(), "kept in the box")
    qtbot.keyClick(focused(), Qt.Key_Return)
    assert window.banner.isVisible() and "was not sent" in window.banner.label.text()
    monkeypatch.undo()  # space freed
    app.scripted.queue(answer_events(SIMPLE))
    qtbot.keyClick(focused(), Qt.Key_Return)  # Send again, as the banner says
    wait(qtbot, app.controller.answer_task)
    assert not window.banner.isVisible()
    assert [v.text for v in window.transcript.views][0] == "kept in the box"
