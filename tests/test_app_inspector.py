"""The inspector and the answer's footer, read by a person: hints that fit the state, figures
in words with their definitions, a replay table that fits its panel, and a footer of the
figures that matter (the rest on hover). Views fed scripted engine events (no model)."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt

from app.views.inspector import SPEED
from engine.stats import DEFINITIONS

from .scripted_engine import END, answer_events
from .test_app_views import SIMPLE, app, ask, loop  # noqa: F401

WORDS = ["one ", "two ", "three ", "four "] * 6
REPEATING = [(0, [(w, False)]) for w in WORDS] + [(0, [(END, False)])]


def replayed(qtbot, window):
    """Inspect the last answer and replay it; the panel once its table is filled."""
    window.transcript.views[-1].inspect_button.click()
    panel = window.inspector.replay
    panel.run_button.click()
    qtbot.waitUntil(lambda: panel.table.rowCount() > 0)
    return panel


def with_estimate(events, speedup, curve):
    """A scripted answer whose engine estimated ``speedup`` on ``curve``."""
    events[-1].stats.update(estimated_speedup=speedup, estimate_curve=curve)
    return events


# the inspector --------------------------------------------------------------------------------
def test_best_goes_with_its_chat(app, qtbot):
    window, controller = app.window, app.controller
    panel = window.inspector.replay
    ask(qtbot, app, "count", answer_events(REPEATING))
    replayed(qtbot, window)
    assert panel.status.text().startswith("Best:")
    first_chat = controller.session.id
    window.new_chat()  # another chat, no answers: no "Best" over an empty table
    qtbot.waitUntil(lambda: controller.session.id != first_chat)
    assert panel.table.rowCount() == 0 and "Best" not in panel.status.text()
    ask(qtbot, app, "again", answer_events(SIMPLE))
    assert panel.table.rowCount() == 0 and "Best" not in panel.status.text()
    controller.open_session(first_chat)  # back: its answer is ticked, not yet replayed again
    qtbot.waitUntil(lambda: window.inspector.list.count() == 1)
    assert panel.table.rowCount() == 0 and "Best" not in panel.status.text()


def test_the_replay_hint_fits_what_is_ticked(app, qtbot):
    window, controller = app.window, app.controller
    panel = window.inspector.replay
    assert panel.status.text().startswith("Tick an answer")  # nothing to replay yet
    assert not panel.run_button.isEnabled()
    ask(qtbot, app, "count", answer_events(REPEATING))
    assert window.inspector.checked_ids() == {controller.messages[-1].id}
    assert "Press Replay" in panel.status.text() and "#1" in panel.status.text()
    assert panel.run_button.isEnabled()
    item = window.inspector.list.item(0)  # unticked: nothing to replay; ticked: that one
    item.setCheckState(Qt.Unchecked)
    assert panel.message_id is None and panel.status.text().startswith("Tick an answer")
    assert not panel.run_button.isEnabled()
    item.setCheckState(Qt.Checked)
    assert panel.message_id == item.data(Qt.UserRole) and "Press Replay" in panel.status.text()
    assert panel.run_button.isEnabled()


def test_the_inspector_says_its_figures_in_words_with_their_definitions(app, qtbot):
    ask(qtbot, app, "hi", answer_events(SIMPLE))
    summary = app.window.inspector.summary
    text = summary.text()
    assert "4 forward passes" in text
    assert "6 draft tokens sent, 2 accepted (33%)" in text
    assert "3 drafts sent, 1 accepted" in text
    assert "calls" not in text and "gen drafts" not in text and "acc drafts" not in text
    for key in ("passes", "drafted", "accepted", "gen_drafts", "acc_drafts"):
        assert DEFINITIONS[key] in summary.toolTip()  # the one definition, engine/stats.py


def test_the_replay_table_fits_its_panel_at_1280_px(app, qtbot, tmp_path):
    window = app.window
    window.resize(1280, 800)
    ask(qtbot, app, "count", answer_events(REPEATING))
    panel = replayed(qtbot, window)
    table, header = panel.table, panel.table.horizontalHeader()
    assert table.isColumnHidden(SPEED)  # the scripted engine has no verify-cost curve: no speeds
    results = [
        replace(r, stats={**r.stats, "estimated_speedup": 1.0 + r.stats["tokens_per_pass"]})
        for r in panel.results
    ]
    panel.show_results(panel.message_id, results)  # as a machine whose curve was measured
    assert not table.isColumnHidden(SPEED) and table.item(0, SPEED).text().endswith("×")
    shown = [c for c in range(table.columnCount()) if not table.isColumnHidden(c)]
    assert sum(table.columnWidth(c) for c in shown) <= table.viewport().width()
    assert not table.horizontalScrollBar().isVisible()
    for column in shown:  # every value whole; a cut header says itself whole on hover
        assert table.columnWidth(column) >= table.sizeHintForColumn(column)
        assert header.model().headerData(column, header.orientation(), Qt.ToolTipRole)
    window.grab().save(str(tmp_path / "inspector-1280.png"))


# the footer ---------------------------------------------------------------------------------
def test_the_footer_gives_the_figures_that_matter_and_the_rest_on_hover(app, qtbot):
    ask(qtbot, app, "hi", with_estimate(answer_events(SIMPLE), 2.14, "measured"))
    footer = app.window.transcript.views[-1].footer
    assert footer.text() == "≈2.1× faster than plain · 1.5 tokens/pass · 33% of drafts accepted"
    details = footer.toolTip().split("\n")
    assert details[:4] == [
        "5 tokens",
        "4 passes",
        "1.5 tokens/pass",
        "2 of 6 drafts accepted (33%)",
    ]
    assert "≈2.1× faster than plain (estimate)" in details
    assert any(line.startswith("first token") for line in details)


def test_a_speedup_not_yet_measured_is_said_so_not_guessed_on_every_answer(app, qtbot):
    guess = "a guess: not measured for this model yet"
    ask(qtbot, app, "hi", with_estimate(answer_events(SIMPLE), 1.31, guess))
    footer = app.window.transcript.views[-1].footer
    assert footer.text() == "speed-up not measured yet · 1.5 tokens/pass · 33% of drafts accepted"
    assert "×" not in footer.text() and "guess" not in footer.text()
    assert f"≈1.3× faster than plain ({guess})" in footer.toolTip()  # the guess, on hover only
    speedup = app.window.speculation_bar.speedup_label.text()
    assert "not measured yet" in speedup and "1.3" not in speedup
