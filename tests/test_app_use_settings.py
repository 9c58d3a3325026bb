""" "Use settings" keeps the proof: after a replay's setting is applied (a fixed draft count),
the next answers on the real engine still say how much faster than plain they were."""

from __future__ import annotations

from .test_app_gui import dirs, engine_service, finish, loop, make_app, send, set_max_tokens  # noqa: F401


def test_answers_with_a_replayed_setting_show_their_speedup(make_app, qtbot):
    application = make_app()
    window, controller = application.window, application.controller
    set_max_tokens(window, 24)
    finish(qtbot, send(qtbot, window, "abc abc abc abc abc abc"))
    window.transcript.views[-1].inspect_button.click()
    panel = window.inspector.replay
    panel.draft_counts.setText("4")
    panel.run_button.click()
    qtbot.waitUntil(lambda: panel.table.rowCount() > 0, timeout=30_000)
    panel.apply_button.click()
    assert not controller.settings.adaptive and controller.settings.draft_count == 4
    finish(qtbot, send(qtbot, window, "abc abc abc abc abc abc"))
    request = application.recorder.requests[-1]
    assert not request.draft.adaptive  # the answer was written with the fixed setting
    view = window.transcript.views[-1]
    assert view.stats["estimated_speedup"] and view.stats["estimate_curve"]
    assert "faster than plain" in view.footer.toolTip()
    if view.stats["drafted"]:  # at a glance too: the figure, or that it is not measured yet
        assert "faster than plain" in view.footer.text() or (
            "speed-up not measured yet" in view.footer.text()
        )
