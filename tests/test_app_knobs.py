"""Issue 44's knobs in the app: Continue after Stop and the card's action row under the
text. Views fed scripted engine events (no model)."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QPoint

from .scripted_engine import END, answer_events
from .test_app_views import app, ask, loop, wait  # noqa: F401

STOPPED = [(0, [("one", False)]), (1, [(" two", True)])]


def stopped_events(passes):
    """An answer's events as the engine streams them when the person pressed Stop."""
    events = answer_events(passes)
    return events[:-1] + [replace(events[-1], finish_reason="cancelled")]


def test_a_stopped_answer_offers_continue_and_goes_on(app, qtbot):
    window, controller = app.window, app.controller
    ask(qtbot, app, "count", stopped_events(STOPPED))
    view = window.transcript.views[-1]
    assert controller.messages[-1].finish_reason == "cancelled"
    assert view.continue_button.isVisible() and controller.can_continue
    assert "stopped it" in view.continue_button.toolTip()
    tokens = [t.token for t in controller.messages[-1].provenance.tokens]
    app.scripted.queue(answer_events([(0, [(" three", False)]), (0, [(END, False)])]))
    view.continue_button.click()
    wait(qtbot, controller.answer_task)
    assert list(app.scripted.requests[-1].continue_tokens) == tokens
    assert window.transcript.views[-1].text == "one two three"
    assert not window.transcript.views[-1].continue_button.isVisible()


def test_a_long_answers_buttons_sit_under_its_text(app, qtbot):
    window = app.window
    long_answer = [(0, [(f"line {i}\n\n", False)]) for i in range(60)]
    ask(qtbot, app, "write a lot", answer_events(long_answer))
    view = window.transcript.views[-1]
    assert view.continue_button.isVisible()
    qtbot.waitUntil(lambda: view.body.height() > 400)
    button_top = view.continue_button.mapTo(view, QPoint(0, 0)).y()
    assert button_top > view.body.geometry().bottom()
    # scrolled to the end of the answer, the button is on screen
    window.transcript.scroll_to_latest()
    viewport = window.transcript.viewport()
    top = view.continue_button.mapTo(viewport, QPoint(0, 0)).y()
    assert 0 <= top < viewport.height()
