"""What the replay shows: whole drafter names in its table, and the replayed figures in the
answer's footer and the gauge while its highlights are on."""

from __future__ import annotations

from engine.events import ReplayOutcome

from .scripted_engine import END, answer_events
from .test_app_views import app, ask, loop  # noqa: F401


def replay_result(drafter, draft_count, tokens_per_pass):
    return ReplayOutcome(
        drafter=drafter,
        draft_count=draft_count,
        ngram_order=4,
        stats={"tokens_per_pass": tokens_per_pass, "acceptance_rate": 0.5, "drafted": 10},
        from_draft=(),
    )


def test_the_replay_table_shows_drafter_names_whole_in_a_narrow_panel(qtbot):
    from app.views.inspector import ReplayPanel

    panel = ReplayPanel()
    qtbot.addWidget(panel)
    panel.resize(260, 400)  # narrower than the settings column ever is
    panel.show()
    panel.message_id = 1
    panel.show_results(
        1,
        [
            replay_result("ngram-map-k4v", 64, 2.0),
            replay_result("ngram-map-k", 64, 1.9),
            replay_result("prompt-lookup", 64, 1.8),
        ],
    )
    table = panel.table
    metrics = table.fontMetrics()
    names = [table.item(row, 0).text() for row in range(table.rowCount())]
    assert len(set(names)) == 3
    for row in range(table.rowCount()):
        text = table.item(row, 0).text()
        assert table.columnWidth(0) >= metrics.horizontalAdvance(text)  # not elided
        assert text.split()[0] in table.item(row, 0).toolTip()


WORDS = ["one ", "two ", "three ", "four "] * 6
PLAIN = [(0, [(w, False)]) for w in WORDS] + [(0, [(END, False)])]


def test_the_footer_and_gauge_show_the_replay_while_its_highlights_are_on(app, qtbot):
    window = app.window
    ask(qtbot, app, "count", answer_events(PLAIN))
    view = window.transcript.views[-1]
    real_footer = view.footer.text()
    bar = window.speculation_bar
    real_gauge = bar.acceptance_label.text()
    assert "no drafts" in real_footer and bar.replaying is None
    view.inspect_button.click()
    panel = window.inspector.replay
    panel.draft_counts.setText("6")
    panel.run_button.click()
    qtbot.waitUntil(lambda: panel.table.rowCount() > 0)
    best = panel.chosen()
    panel.highlight_button.click()
    label = f"{best.drafter} k=6 n={best.ngram_order}"
    footer = view.footer.text()
    assert footer.startswith(f"Replay {label}: ")
    assert f"{best.stats['tokens_per_pass']:.1f} tokens/pass" in footer
    assert f"{best.stats['acceptance_rate']:.0%} of drafts accepted" in footer
    assert f"of {best.stats['drafted']} drafts accepted" in view.footer.toolTip()
    assert bar.replaying == label and "replay" in bar.current_label.text()
    assert f"{best.stats['acceptance_rate']:.0%}" in bar.acceptance_label.text()
    assert bar.gauge.mean == best.stats["tokens_per_pass"]
    panel.actual_button.click()
    assert view.footer.text() == real_footer
    assert bar.replaying is None and bar.acceptance_label.text() == real_gauge
