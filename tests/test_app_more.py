"""The app on a server, in narrow windows, with long chats: views fed scripted engine
events (no model)."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from .scripted_engine import END, ScriptedService, answer_events
from .test_app_views import app, ask, loop, wait  # noqa: F401


class ServerLike(ScriptedService):
    """What the controller sees of ``RemoteEngine``: answers, no ``replay``."""

    replay = property(lambda self: (_ for _ in ()).throw(
        AttributeError("'RemoteEngine' object has no attribute 'replay'")))


WORDS = ["one ", "two ", "three ", "four "] * 6
REPEATING = [(0, [(w, False)]) for w in WORDS] + [(0, [(END, False)])]


# 1. replay of a server's answer -------------------------------------------------------------
def test_replay_of_a_server_answer_runs_here_from_its_tokens_as_estimates(app, qtbot):
    window, controller = app.window, app.controller
    remote = ServerLike()
    controller.service = remote  # as after Connect to server…
    remote.queue(answer_events(REPEATING))
    wait(qtbot, window.send("count"))
    view = window.transcript.views[-1]
    view.inspect_button.click()
    panel = window.inspector.replay
    panel.draft_counts.setText("2, 4")
    panel.run_button.click()
    qtbot.waitUntil(lambda: panel.table.rowCount() > 0 or "Replay" not in panel.status.text()
                    or panel.run_button.isEnabled(), timeout=5000)
    assert panel.table.rowCount() == 3 * 2, panel.status.text()
    assert panel.run_button.isEnabled()
    assert all(not r["exact"] and "prompt not recorded" in r["notes"][0] for r in panel.results)
    assert panel.results[0]["stats"]["tokens_per_pass"] > 1.5  # the repeats are found
    assert "estimates" in panel.status.text().lower()
    assert not window.banner.isVisible()


def test_a_replay_that_fails_says_so_in_the_panel(app, qtbot, monkeypatch):
    window, controller = app.window, app.controller
    ask(qtbot, app, "count", answer_events(REPEATING))
    window.transcript.views[-1].inspect_button.click()
    panel = window.inspector.replay

    def broken(*_args, **_kwargs):
        raise RuntimeError("the engine thread is gone")
    monkeypatch.setattr(app.scripted, "replay", broken)
    panel.run_button.click()
    qtbot.waitUntil(panel.run_button.isEnabled, timeout=5000)
    assert "Replay failed" in panel.status.text() and "engine thread is gone" in panel.status.text()
    assert panel.table.rowCount() == 0


# 2. narrow windows --------------------------------------------------------------------------
def resize(window, width, height=760):
    for _ in range(2):  # docks settle in a second layout pass
        window.resize(width, height)
        QApplication.processEvents()


def chat_width(window):
    return window.transcript.viewport().width()


def test_side_panels_fold_before_the_chat_and_come_back_at_full_width(app, qtbot):
    from app.panel_layout import CHAT_MIN

    window = app.window
    ask(qtbot, app, "a question " * 30, answer_events(REPEATING))
    for width in (600, 700):
        resize(window, width)
        assert window.width() == width
        assert chat_width(window) >= CHAT_MIN - 40, (width, chat_width(window))
        assert not window.sessions_dock.isVisible() and not window.settings_dock.isVisible()
    for width in (1280, 1920):
        resize(window, width)
        assert window.sessions_dock.isVisible() and window.settings_dock.isVisible()
        assert window.sessions_dock.width() >= 200, window.sessions_dock.width()
        delete = window.sessions_panel.delete_button
        assert delete.width() >= delete.sizeHint().width()  # not clipped
        assert chat_width(window) >= CHAT_MIN - 40


def test_showing_a_panel_in_a_narrow_window_never_widens_it(app, qtbot):
    window = app.window
    ask(qtbot, app, "a question", answer_events(REPEATING))
    resize(window, 600)
    window.sessions_dock.toggleViewAction().trigger()  # View ▸ Chats
    QApplication.processEvents()
    assert window.sessions_dock.isVisible() and window.width() == 600
    assert window.sessions_dock.width() >= 200 and chat_width(window) >= 300
    window.show_settings()  # Ctrl+,: the settings column takes the chat list's place
    QApplication.processEvents()
    assert window.settings_dock.isVisible() and window.width() == 600
    assert not window.sessions_dock.isVisible()
    panel = window.settings_panel
    assert panel.widget().width() >= panel.widget().minimumSizeHint().width()  # nothing clipped
    window.transcript.views[-1].inspect_button.click()
    QApplication.processEvents()
    assert window.inspector_dock.isVisible() and window.width() == 600
    resize(window, 1280)  # both come back, the chat list at its full width
    assert window.sessions_dock.isVisible() and window.inspector_dock.isVisible()
    assert window.sessions_dock.width() >= 200
    window.sessions_dock.toggleViewAction().trigger()  # closed by the person: stays closed
    resize(window, 1300)
    assert not window.sessions_dock.isVisible()
