"""The status bar is there from the start: a first message never moves the chat."""

from __future__ import annotations

from PySide6.QtWidgets import QStatusBar

from .test_app_views import app, loop  # noqa: F401


def test_status_messages_never_shift_the_layout(app, qtbot):
    window = app.window
    bar = window.findChild(QStatusBar)  # not statusBar(): that would make one now
    assert bar is not None
    qtbot.waitUntil(lambda: window.transcript.height() > 0 and bar.isVisible())
    before = (window.transcript.geometry(), window.input.geometry(), bar.geometry())
    window.copy_message("x")  # "Copied to the clipboard", the first message of many sessions
    window.show_status("Measuring this machine's verify-cost curve (once per model)…")
    window.model_presenter.engine_changed("http://127.0.0.1:8080")  # the permanent server label
    qtbot.wait(50)
    assert bar.currentMessage().startswith("Measuring")
    assert (window.transcript.geometry(), window.input.geometry(), bar.geometry()) == before
    window.show_status("")
    window.model_presenter.engine_changed("")
    qtbot.wait(50)
    assert (window.transcript.geometry(), window.input.geometry(), bar.geometry()) == before
