"""A first launch for a real user (issue 61, item 18): the built-in model is labelled a demo,
and the empty chat offers a real model from the catalog, with its size."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.views.model_catalog import RECOMMENDED
from engine.events import ModelEvent
from engine.models.embedded import EMBEDDED_NAME

from .test_app_views import SIMPLE, answer_events, app, ask, loop  # noqa: F401


def built_in_loaded(app):
    app.controller.models.model_loaded(
        ModelEvent(EMBEDDED_NAME, f"/cache/models/{EMBEDDED_NAME}-f32", "on")
    )


def test_the_built_in_model_is_a_demo_and_the_empty_chat_offers_a_real_one(app, qtbot):
    window = app.window
    built_in_loaded(app)
    picker = window.model_presenter.picker
    assert "demo" in picker.button.text()
    welcome = window.transcript.placeholder
    assert welcome.isVisible() and "demo" in welcome.text()
    assert f"Download {RECOMMENDED.name}" in welcome.text() and "≈870 MB" in welcome.text()
    welcome.setFocus()
    qtbot.keyClick(welcome, Qt.Key_Tab)  # onto the offer's link, as the keyboard reaches it
    qtbot.keyClick(welcome, Qt.Key_Return)
    qtbot.waitUntil(lambda: app.scripted.downloads == [RECOMMENDED.repo])


def test_a_real_model_loaded_offers_nothing_and_is_no_demo(app, qtbot):
    window = app.window
    built_in_loaded(app)
    app.controller.models.model_loaded(ModelEvent("Qwen2.5-1.5B", "/downloads/qwen", "on"))
    assert "demo" not in window.model_presenter.picker.button.text()
    assert "Download" not in window.transcript.placeholder.text()
    ask(qtbot, app, "hi", answer_events(SIMPLE))
    assert not window.transcript.placeholder.isVisible()
