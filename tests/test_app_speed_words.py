"""Speed said in plain words (issue 61): a slowdown reads as one, a speed inside the noise
as "about as fast", tokens per pass never below 1, the gauge sized to the answer it shows,
and an inspector that suggests drafting off when nothing beats plain decoding."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from app.views.inspector import KEPT, ORDER, PER_PASS, REPLAY_COLUMNS, SPEED
from engine.stats import DecodeStats, speed_words

from .scripted_engine import END, answer_events
from .test_app_inspector import REPEATING, replayed, with_estimate
from .test_app_views import SIMPLE, app, ask, loop  # noqa: F401


@pytest.mark.parametrize(
    "speedup, words",
    [
        (0.8, "≈20% slower than plain"),
        (0.9, "≈10% slower than plain"),
        (0.985, "about as fast as plain"),
        (1.0, "about as fast as plain"),
        (1.015, "about as fast as plain"),
        (1.06, "≈6% faster than plain"),
        (1.8, "≈1.8× faster than plain"),
    ],
)
def test_speed_in_plain_words(speedup, words):
    assert speed_words(speedup) == words


def test_tokens_per_pass_counts_the_end_of_the_answer_so_it_is_never_below_one():
    plain = DecodeStats()
    for _ in range(9):
        plain.record_pass(0, 0, 1, 0.01)
    plain.record_pass(0, 0, 1, 0.01, ended=True)  # the end of the answer, a pass of its own
    assert (plain.emitted, plain.passes, plain.tokens_per_pass) == (9, 10, 1.0)
    draws = random.Random(61)
    for _ in range(200):  # any answer: each pass gives its accepted drafts and one more token
        stats = DecodeStats()
        passes = draws.randint(1, 30)
        for index in range(passes):
            drafted = draws.randint(0, 8)
            accepted = draws.randint(0, drafted)
            ended = index == passes - 1 and draws.random() < 0.7
            emitted = accepted + (0 if ended and accepted and draws.random() < 0.5 else 1)
            stats.record_pass(drafted, accepted, emitted, 0.01, ended=ended)
        assert stats.tokens_per_pass >= 1.0
        assert DecodeStats.from_dict(stats.to_dict()).tokens_per_pass == stats.tokens_per_pass


def test_a_slower_answer_says_so_under_it_and_on_the_gauge(app, qtbot):
    ask(qtbot, app, "hi", with_estimate(answer_events(SIMPLE), 0.9, "measured"))
    footer = app.window.transcript.views[-1].footer
    assert footer.text().startswith("≈10% slower than plain · ")
    assert "≈10% slower than plain (estimate)" in footer.toolTip()
    assert "faster" not in footer.text()
    speed = app.window.speculation_bar.speedup_label.text()
    assert "≈10%" in speed and "slower than plain" in speed and "faster" not in speed
    ask(qtbot, app, "again", with_estimate(answer_events(SIMPLE), 1.01, "measured"))
    footer = app.window.transcript.views[-1].footer
    assert footer.text().startswith("about as fast as plain · ")


def test_the_gauge_is_sized_to_the_answer_it_shows_not_to_the_settings(app, qtbot):
    window, controller = app.window, app.controller
    controller.update_settings(replace(controller.settings, draft_count=64))
    many = [(0, [("a", False)])] + [(8, [(c, True) for c in "bcdef"] + [("g", False)])] * 4
    ask(qtbot, app, "long drafts", answer_events(many + [(1, [(END, False)])]))
    gauge = window.speculation_bar.gauge
    assert gauge.maximum == 65
    controller.update_settings(replace(controller.settings, draft_count=2))  # Use settings, say
    assert gauge.maximum == 65 and gauge.mean > 3  # still the answer's own scale
    assert "scale from 1 to 65" in gauge.accessibleDescription()


def test_the_inspector_suggests_drafting_off_when_nothing_beats_plain(app, qtbot):
    window, controller = app.window, app.controller
    ask(qtbot, app, "count", answer_events(REPEATING))
    panel = replayed(qtbot, window)
    slower = [
        replace(r, stats={**r.stats, "estimated_speedup": 0.96 - i / 100})
        for i, r in enumerate(panel.results)
    ]
    panel.show_results(panel.message_id, slower)
    status = panel.status.text()
    assert status.startswith("Nothing here beats plain decoding")
    assert "≈4% slower than plain" in status and "faster" not in status
    assert panel.plain_button.isVisible()
    panel.plain_button.click()
    assert controller.settings.drafter == "none"
    faster = [replace(r, stats={**r.stats, "estimated_speedup": 1.5}) for r in panel.results]
    panel.show_results(panel.message_id, faster)
    assert panel.status.text().startswith("Best:") and not panel.plain_button.isVisible()


def test_replays_that_an_ngram_order_does_not_change_are_one_row(app, qtbot):
    window = app.window
    ask(qtbot, app, "count", answer_events(REPEATING))
    window.transcript.views[-1].inspect_button.click()
    panel = window.inspector.replay
    panel.draft_counts.setText("2, 4")
    panel.ngram_orders.setText("2, 3, 4")
    panel.run_button.click()
    qtbot.waitUntil(lambda: panel.table.rowCount() > 0)
    assert len(panel.results) == 4 * 2 * 3
    assert panel.table.rowCount() < len(panel.results)  # folded
    orders = [panel.table.item(r, ORDER).text() for r in range(panel.table.rowCount())]
    assert "2–4" in orders  # one row where the three orders replay the same
    row = orders.index("2–4")
    assert "n-gram orders 2–4" in panel.table.item(row, 0).toolTip()


def test_the_replay_table_reads_whole_at_600_px(app, qtbot):
    window = app.window
    window.resize(600, 800)
    ask(qtbot, app, "count", with_estimate(answer_events(REPEATING), 1.2, "measured"))
    panel = replayed(qtbot, window)  # Inspect opens the side panel, even at 600 px
    results = [
        replace(r, stats={**r.stats, "estimated_speedup": 0.5 + r.stats["tokens_per_pass"]})
        for r in panel.results
    ]
    panel.show_results(panel.message_id, results)
    table, header = panel.table, panel.table.horizontalHeader()
    metrics = header.fontMetrics()
    for column in (SPEED, PER_PASS, KEPT):
        longest = max(map(metrics.horizontalAdvance, REPLAY_COLUMNS[column].split()))
        assert table.columnWidth(column) >= longest  # every word of its header shows whole
    lines = header.height() // metrics.lineSpacing()
    assert lines >= 2  # the headers wrap instead of reading "tok…" and "sp…"
    speed_right = table.columnViewportPosition(SPEED) + table.columnWidth(SPEED)
    assert speed_right <= table.viewport().width()  # the speed column is in sight
    assert table.item(0, SPEED).text().endswith("×")
