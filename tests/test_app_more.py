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
