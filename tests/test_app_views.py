"""The app's views fed scripted engine events (no model), as napari tests its Qt views
against bare models. End-to-end runs on a real model live in test_app_gui.py."""

from __future__ import annotations

import asyncio

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from app.views.render import highlighted_positions
from engine.stats import DecodeStats, summary_line

from .scripted_engine import END, ScriptedService, answer_events


@pytest.fixture
def loop(qapp):
    import qasync

    event_loop = qasync.QEventLoop(qapp, already_running=True)
    asyncio.set_event_loop(event_loop)
    yield event_loop
    event_loop._QEventLoop__is_running = False
    asyncio.events._set_running_loop(None)
    event_loop.close()
    asyncio.set_event_loop(None)


@pytest.fixture
def app(loop, tmp_path, monkeypatch, qtbot):
    from app.__main__ import Application

    monkeypatch.setenv("DRAFTLESS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DRAFTLESS_CONFIG_DIR", str(tmp_path / "config"))
    service = ScriptedService()
    application = Application(service=service, theme_name="light")
    application.scripted = service
    qtbot.addWidget(application.window)
    application.window.resize(1100, 760)
    application.window.show()
    wait(qtbot, application.start("scripted"))
    yield application
    application.window.close()
    application.store.close()


def wait(qtbot, task, seconds=10):
    qtbot.waitUntil(task.done, timeout=int(seconds * 1000))
    return task.result()


def ask(qtbot, application, text, events):
    application.scripted.queue(events)
    return wait(qtbot, application.window.send(text))


SIMPLE = [
    (0, [("Hello", False)]),
    (3, [(" there", True), (",", True), (" friend", False)]),
    (2, [(".", False)]),
    (1, [(END, False)]),
]


# 1. deleting a chat -------------------------------------------------------------------------
def answer_dialog(qtbot, button_text, seen):
    """Press ``button_text`` in the confirmation box once it is up (the real QMessageBox)."""

    def press():
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            QTimer.singleShot(20, press)
            return
        seen.append(box.text())
        [button] = [b for b in box.buttons() if b.text().replace("&", "") == button_text]
        button.click()

    QTimer.singleShot(0, press)


def test_delete_asks_with_the_real_dialog_and_cancel_keeps_the_chat(app, qtbot):
    window = app.window
    ask(qtbot, app, "keep or delete me", answer_events(SIMPLE))
    session_id = app.controller.session.id
    seen = []
    answer_dialog(qtbot, "Cancel", seen)
    window.delete_chat(session_id)
    assert seen and "keep or delete me" in seen[0]
    assert app.store.session(session_id) is not None
    answer_dialog(qtbot, "Delete", seen)
    window.delete_chat(session_id)
    assert app.store.session(session_id) is None
    assert window.sessions_panel.list.count() == 0 and window.transcript.views == []


# 4. numbers ---------------------------------------------------------------------------------
def test_an_accepted_end_token_is_no_visible_accepted_draft():
    stats = DecodeStats()
    assert stats.record_pass(drafted=2, accepted=2, emitted=2, seconds=0.1, ended=False) == (2, 2)
    assert stats.record_pass(drafted=1, accepted=1, emitted=1, seconds=0.1, ended=True) == (0, 0)
    assert (stats.passes, stats.emitted, stats.accepted, stats.drafted) == (2, 2, 2, 3)
    # the passes produced 3 tokens, the accepted end of the answer among them
    assert stats.tokens_per_pass == 1.5 and stats.first_token_s == pytest.approx(0.1)


def test_footer_gauge_and_inspector_show_numbers_that_add_up(app, qtbot):
    # nine visible tokens, all the target's own; the one accepted guess was the end token
    passes = [(0, [(c, False)]) for c in "Nine toks"] + [(1, [(END, True)])]
    ask(qtbot, app, "hi", answer_events(passes))
    view = app.window.transcript.views[-1]
    # the end of the answer took a pass of its own: it counts, so plain decoding reads 1.0
    assert view.footer.text() == "1.0 tokens/pass · 0% of drafts accepted"
    details = view.footer.toolTip()  # every figure, one a line, on hover
    assert details.startswith("9 tokens\n10 passes\n1.0 tokens/pass\n0 of 1 drafts accepted (0%)")
    assert highlighted_positions(view.body.document()) == []
    bar = app.window.speculation_bar
    assert "0%" in bar.acceptance_label.text() and bar.gauge.mean == pytest.approx(1.0)

    ask(qtbot, app, "again", answer_events(SIMPLE))
    view = app.window.transcript.views[-1]
    stats = view.stats
    assert (stats["emitted"], stats["passes"], stats["accepted"], stats["drafted"]) == (5, 4, 2, 6)
    assert view.footer.toolTip().split("\n") == summary_line(stats, view.timing, "stop").split(
        " · "
    )
    assert view.footer.toolTip().startswith(
        "5 tokens\n4 passes\n1.5 tokens/pass\n2 of 6 drafts accepted (33%)"
    )
    assert "first token" in view.footer.toolTip()
    assert view.footer.text() == "1.5 tokens/pass · 33% of drafts accepted"
    assert bar.gauge.mean == pytest.approx(1.5) and "33%" in bar.acceptance_label.text()
    assert "1.5 tokens/pass" in app.window.inspector.list.item(1).text()
    view.inspect_button.click()
    assert app.window.inspector.positions.series[0].values == pytest.approx(
        stats["per_position_acceptance"]
    )


def test_the_estimated_speedup_comes_from_the_cost_curve():
    stats = DecodeStats()
    for _ in range(4):
        stats.record_pass(3, 3, 4, 0.1)
    cost = {1: 1.0, 4: 1.5}.__getitem__  # verifying 4 tokens costs 1.5 plain passes
    assert stats.estimate_speedup(cost) == pytest.approx(16 / 6)
    line = summary_line(stats.to_dict(), stats.timing_dict())
    assert "≈2.7× faster than plain (estimate)" in line


# 3. the gauge belongs to the open chat ------------------------------------------------------
def test_the_gauge_shows_the_open_chats_latest_answer(app, qtbot):
    window, bar = app.window, app.window.speculation_bar
    fast = [
        (4, [("a", True), ("b", True), ("c", True), ("d", True), ("e", False)]),
        (4, [(END, True)]),
    ]
    ask(qtbot, app, "fast chat", answer_events(fast))
    fast_id = app.controller.session.id
    assert bar.gauge.mean == pytest.approx(3.0)  # 5 tokens and the end in 2 passes
    assert "–" in bar.current_label.text()  # no stale "this pass" after the answer ended
    window.new_chat()
    assert bar.gauge.mean == 0 and "–" in bar.acceptance_label.text()
    ask(qtbot, app, "slow chat", answer_events([(0, [(c, False)]) for c in "slow"]))
    slow_id = app.controller.session.id
    assert bar.gauge.mean == pytest.approx(1.0)
    app.controller.open_session(fast_id)
    assert bar.gauge.mean == pytest.approx(3.0) and "50%" in bar.acceptance_label.text()

    # an answer streaming in another chat does not move this chat's gauge
    gate = asyncio.Event()
    app.controller.open_session(slow_id)
    events = answer_events(fast)
    app.scripted.queue(events[:6] + [gate] + events[6:])  # paused after the first pass
    task = window.send("more")
    qtbot.waitUntil(lambda: app.controller.answer.live.passes == 1)
    assert bar.gauge.mean == pytest.approx(5.0) and bar.gauge.current == 5
    app.controller.open_session(fast_id)
    assert bar.gauge.mean == pytest.approx(3.0)
    app.controller.open_session(slow_id)
    assert bar.gauge.mean == pytest.approx(5.0) and bar.gauge.active
    gate.set()
    wait(qtbot, task)


# 7. prompt reading --------------------------------------------------------------------------
def test_reading_a_long_prompt_shows_progress(app, qtbot):
    from engine.events import ProgressEvent

    gate = asyncio.Event()
    events = answer_events(SIMPLE)
    app.scripted.queue(
        [
            ProgressEvent("prefill", 0, 2048, "Reading the prompt…"),
            ProgressEvent("prefill", 1024, 2048, "Reading the prompt…"),
            gate,
        ]
        + events
    )
    task = app.window.send("a long chat")
    view = None
    qtbot.waitUntil(
        lambda: (
            app.window.transcript.streaming_view is not None
            and "50%" in app.window.transcript.streaming_view.body.toPlainText()
        )
    )
    view = app.window.transcript.streaming_view
    assert "Reading the prompt" in view.body.toPlainText() and "2,048" in view.body.toPlainText()
    gate.set()
    wait(qtbot, task)
    assert view.body.toPlainText() == "Hello there, friend."


# 11. replay ---------------------------------------------------------------------------------
def test_replay_table_switches_highlights_and_applies_the_best_settings(app, qtbot):
    window = app.window
    words = ["one ", "two ", "three ", "four "] * 6
    passes = [(0, [(w, False)]) for w in words] + [(0, [(END, False)])]
    ask(qtbot, app, "count", answer_events(passes))
    view = window.transcript.views[-1]
    assert highlighted_positions(view.body.document()) == []  # plain run: nothing accepted
    view.inspect_button.click()
    panel = window.inspector.replay
    assert panel.message_id == view.message_id and panel.run_button.isEnabled()
    panel.draft_counts.setText("2, 6, 99")  # 99 is out of range and dropped
    panel.ngram_orders.setText("2")
    panel.run_button.click()
    qtbot.waitUntil(lambda: panel.table.rowCount() > 0)
    configs = app.scripted.replays[-1]
    assert sorted({(c.drafter, c.draft_count, c.ngram_order) for c in configs}) == [
        (d, k, 2)
        for d in ("ngram-cache", "prompt-lookup", "suffix", "suffix-static")
        for k in (2, 6)
    ]
    per_pass = [r.stats["tokens_per_pass"] for r in panel.results]
    assert per_pass == sorted(per_pass, reverse=True) and per_pass[0] > 1.5
    assert float(panel.table.item(0, 2).text()) == pytest.approx(per_pass[0], abs=0.01)

    best = panel.chosen()
    assert best is panel.results[0]
    panel.highlight_button.click()
    flags = best.from_draft
    assert any(flags) and "replay" in view.who.text()
    painted = set(highlighted_positions(view.body.document()))
    expected = {i for i, token in enumerate(view.provenance.tokens) if flags[i]}
    drafted_chars = {
        c
        for i in expected
        for c in range(view.provenance.tokens[i].start, view.provenance.tokens[i].end)
    }
    shown = set(view.body.render_map.by_position.values())  # Markdown drops the last space
    assert {view.body.render_map.source_index(p) for p in painted} == drafted_chars & shown
    panel.actual_button.click()
    assert highlighted_positions(view.body.document()) == [] and view.who.text() == "Draftless"

    panel.apply_button.click()
    settings = app.controller.settings
    assert (settings.drafter, settings.draft_count, settings.ngram_order, settings.adaptive) == (
        best.drafter,
        best.draft_count,
        2,
        False,
    )  # exactly what was replayed
    assert window.settings_panel.draft_count.value() == best.draft_count


# 5 and 9. code blocks and the accepted-draft highlight --------------------------------------
CODE_ANSWER = [
    (0, [("Here:\n\n", False)]),
    (3, [("```python\n", True), ("def ", True), ("add", False)]),
    (2, [("(a, b):\n", True), ("    return ", True), ("a + b", False)]),
    (0, [("\n```\n", False)]),
    (0, [("Done.", False)]),
    (0, [(END, False)]),
]


def contrast(a, b) -> float:
    def luminance(color):
        channels = [color.redF(), color.greenF(), color.blueF()]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_code_blocks_have_colours_a_label_and_a_copy_link(app, qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QTextCharFormat, QTextCursor

    from app.views.theme import LIGHT

    from .test_app_gui import point_of

    ask(qtbot, app, "code please", answer_events(CODE_ANSWER))
    view = app.window.transcript.views[-1]
    document = view.body.document()
    text = view.body.toPlainText()
    assert "python   Copy\ndef add(a, b):" in text
    keyword = document.find("def").selectionStart()
    name = document.find("add", keyword).selectionStart()

    def format_at(position):
        cursor = QTextCursor(document)
        cursor.setPosition(position + 1)  # the format of the character before the cursor
        return cursor.charFormat()

    assert format_at(keyword).foreground().color() != format_at(name).foreground().color(), (
        "no syntax colours"
    )
    # "def " was an accepted draft: its background and underline sit on top of its colour
    painted = set(highlighted_positions(document))
    assert keyword in painted and name not in painted
    drafted = format_at(keyword)
    assert drafted.background().color().name() == LIGHT.draft
    assert drafted.underlineStyle() != QTextCharFormat.NoUnderline
    assert drafted.underlineColor().name() == LIGHT.mark
    assert drafted.foreground().color().name() != LIGHT.text  # still the keyword's colour

    copy = document.find("Copy").selectionStart()
    QGuiApplication.clipboard().clear()
    qtbot.mouseClick(view.body.viewport(), Qt.LeftButton, pos=point_of(view.body, copy + 1))
    assert QGuiApplication.clipboard().text() == "def add(a, b):\n    return a + b"
    assert "Done." in text and view.body.source_index_at(point_of(view.body, copy)) is None


@pytest.mark.parametrize("dark", [False, True])
def test_the_accepted_draft_mark_reaches_3_to_1_against_every_background(dark):
    from PySide6.QtGui import QColor

    from app.views.theme import DARK, LIGHT

    colors = DARK if dark else LIGHT
    mark = QColor(colors.mark)
    for background in (colors.base, colors.code, colors.draft, colors.window):
        assert contrast(mark, QColor(background)) >= 3.0, background


# 6. layout ----------------------------------------------------------------------------------
def test_narrow_and_wide_windows_keep_panels_usable_and_lines_readable(app, qtbot):
    from PySide6.QtCore import Qt

    from app.views.transcript import READABLE_WIDTH

    window = app.window
    ask(qtbot, app, "a question " * 30, answer_events(SIMPLE))
    window.resize(700, 760)
    QApplication.processEvents()
    window.resize(700, 760)
    QApplication.processEvents()
    assert window.width() == 700
    assert not window.sessions_dock.isVisible()  # folded away; View ▸ Chats brings it back
    panel = window.settings_panel  # a scroll area itself: its content must fit its width
    assert panel.widget().width() >= panel.widget().minimumSizeHint().width()  # nothing clipped
    assert panel.widget().width() <= panel.viewport().width()
    assert window.transcript.viewport().width() >= 300
    window.resize(1920, 1080)
    QApplication.processEvents()
    assert window.sessions_dock.isVisible()
    for view in window.transcript.views:
        assert view.width() <= READABLE_WIDTH

    # text zoom and the settings shortcut
    body = window.transcript.views[-1].body
    before = body.document().defaultFont().pointSizeF()
    qtbot.keyClick(window.input, Qt.Key_Plus, Qt.ControlModifier)
    assert body.document().defaultFont().pointSizeF() > before
    qtbot.keyClick(window.input, Qt.Key_0, Qt.ControlModifier)
    assert body.document().defaultFont().pointSizeF() == before
    window.settings_dock.hide()
    qtbot.keyClick(window.input, Qt.Key_Comma, Qt.ControlModifier)
    assert window.settings_dock.isVisible()


# 8. chat handling ---------------------------------------------------------------------------
def texts(window):
    return [(v.role, v.text) for v in window.transcript.views]


def plain(text):
    return answer_events([(0, [(text, False)]), (0, [(END, False)])])


def test_regenerate_keeps_versions_and_edit_branches_the_chat(app, qtbot):
    window, controller = app.window, app.controller
    ask(qtbot, app, "first question", plain("answer one"))
    ask(qtbot, app, "second question", plain("answer two"))
    app.scripted.queue(plain("answer two, again"))
    wait(qtbot, window.regenerate())
    last = window.transcript.views[-1]
    assert last.text == "answer two, again" and last.version_label.text() == "2/2"
    assert last.previous_button.isVisible() and not last.next_button.isEnabled()
    last.previous_button.click()
    assert texts(window)[-1] == ("assistant", "answer two")
    assert window.transcript.views[-1].version_label.text() == "1/2"
    assert len(app.store.all_messages(controller.session.id)) == 5

    # edit the first question: the chat branches there, the old branch stays a version
    first = window.transcript.views[0]
    first.edit_button.click()
    assert window.input.toPlainText() == "first question" and window.edit_bar.isVisible()
    window.input.setPlainText("first question, edited")
    app.scripted.queue(plain("answer to the edit"))
    wait(qtbot, window.send(window.input.toPlainText()))
    assert texts(window) == [
        ("user", "first question, edited"),
        ("assistant", "answer to the edit"),
    ]
    assert (
        window.transcript.views[0].version_label.text() == "2/2" and not window.edit_bar.isVisible()
    )
    window.transcript.views[0].previous_button.click()
    assert texts(window) == [
        ("user", "first question"),
        ("assistant", "answer one"),
        ("user", "second question"),
        ("assistant", "answer two"),
    ]

    # the chosen versions survive reopening the chat
    session_id = controller.session.id
    window.new_chat()
    controller.open_session(session_id)
    assert texts(window)[-1] == ("assistant", "answer two")
    ask(qtbot, app, "third question", plain("third answer"))
    request = app.scripted.requests[-1]
    assert [m["content"] for m in request.messages if m["role"] != "system"] == [
        "first question",
        "answer one",
        "second question",
        "answer two",
        "third question",
    ]


def test_new_on_an_empty_chat_and_search_keep_one_open_chat(app, qtbot):
    window = app.window
    window.new_chat()
    window.new_chat()
    window.sessions_panel.new_button.click()
    assert len(app.store.sessions()) == 1
    ask(qtbot, app, "about apples", plain("apples are fruit"))
    apples = app.controller.session.id
    window.new_chat()
    ask(qtbot, app, "about pears", plain("pears too"))
    pears = app.controller.session.id
    assert len(app.store.sessions()) == 2

    window.sessions_panel.search.setText("apples")
    listed = [
        window.sessions_panel.list.item(i).text() for i in range(window.sessions_panel.list.count())
    ]
    assert listed == ["about pears", "about apples"]  # the open chat stays, with the match
    assert window.sessions_panel.list.currentItem().text() == "about pears"
    assert window.sessions_panel.delete_button.isEnabled()
    seen = []
    answer_dialog(qtbot, "Delete", seen)
    window.sessions_panel.delete_button.click()
    assert app.store.session(pears) is None and app.controller.session.id == apples


def test_dark_theme_check_boxes_stand_out(qapp):
    """The inspector's answer list: an unticked box must show against the list (>= 3:1)."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QColor
    from PySide6.QtWidgets import QListWidget, QListWidgetItem

    from app.views import theme

    try:
        colors = theme.apply(qapp, dark=True)
        listing = QListWidget()
        listing.resize(240, 80)
        item = QListWidgetItem("#1 · ngram-cache")
        item.setFlags(item.flags() | Qt.ItemIsUserCheckable)
        item.setCheckState(Qt.Unchecked)
        listing.addItem(item)
        listing.show()
        QApplication.processEvents()
        image = listing.viewport().grab().toImage()
        rect = listing.visualItemRect(item)
        background = QColor(colors.base)
        best = max(
            contrast(QColor(image.pixel(x, y)), background)
            for x in range(rect.left(), rect.left() + 18)
            for y in range(rect.top(), rect.bottom())
        )
        assert best >= 3.0, best
    finally:
        theme.apply(qapp, dark=False)


# 10. curated models -------------------------------------------------------------------------
def test_the_model_catalog_lists_the_curated_models_and_loads_the_chosen_one(app, qtbot):
    from engine.models.catalog import CATALOG

    dialog = app.window.model_presenter.pick_from_catalog()
    assert dialog.table.rowCount() == len(CATALOG)
    assert not dialog.download_button.isEnabled()
    row = [dialog.table.item(0, c).text() for c in range(dialog.table.columnCount())]
    assert row[0] == CATALOG[0].name and row[4] == CATALOG[0].licence and "MB" in row[3]
    dialog.table.selectRow(1)
    dialog.download_button.click()
    qtbot.waitUntil(lambda: app.scripted.loads[-1] == CATALOG[1].repo)
    qtbot.waitUntil(lambda: not app.controller.models.loading)
    assert app.controller.settings.model == CATALOG[1].repo  # remembered for the next start


# 2 (the app's part). engine work during an answer is one quiet line, not a modal dialog ---
def test_measuring_during_the_first_answer_is_a_quiet_status_line(app, qtbot):
    from engine.events import ProgressEvent

    gate = asyncio.Event()
    app.scripted.queue(
        [
            ProgressEvent("calibrate", 0, 1, "Measuring this machine's verify speed…"),
            gate,
            ProgressEvent("calibrate", 1, 1, "Verify speed measured"),
        ]
        + answer_events(SIMPLE)
    )
    task = app.window.send("first ever question")
    qtbot.waitUntil(lambda: "Measuring" in app.window.statusBar().currentMessage())
    qtbot.wait(500)  # longer than the dialog's 400 ms grace
    assert QApplication.activeModalWidget() is None
    assert not app.window.model_presenter.picker.bar.isVisible()
    assert not app.window.settings_panel.model_name.text().startswith("Loading")
    assert app.window.input.isEnabled()
    gate.set()
    wait(qtbot, task)
    assert app.window.statusBar().currentMessage() == ""
    assert app.window.transcript.views[-1].text == "Hello there, friend."


def test_a_table_built_in_the_background_is_said_while_the_answer_runs(app, qtbot):
    from engine.events import ProgressEvent
    from engine.runtime.session import TABLE_IN_BACKGROUND

    gate = asyncio.Event()
    # the engine says it once, before the answer's passes, and never says it is done
    app.scripted.queue(
        [ProgressEvent("table", 0, 259, TABLE_IN_BACKGROUND), gate] + answer_events(SIMPLE)
    )
    task = app.window.send("a question for ngrammys")
    qtbot.waitUntil(lambda: "bigram table" in app.window.statusBar().currentMessage())
    assert QApplication.activeModalWidget() is None
    assert not app.window.model_presenter.picker.bar.isVisible()
    gate.set()
    wait(qtbot, task)
    assert app.window.statusBar().currentMessage() == ""  # over with the answer
    assert app.window.transcript.views[-1].text == "Hello there, friend."


def test_the_gauge_scale_is_logarithmic_so_small_gains_show_under_a_large_cap(qtbot):
    from app.views.gauge import Gauge

    gauge = Gauge()
    qtbot.addWidget(gauge)
    gauge.set_values(3.3, 3.3, 65)
    assert gauge.fraction(1.0) == 0.0 and gauge.fraction(65) == 1.0
    assert 0.25 < gauge.fraction(3.3) < 0.35  # linear would be 0.04: the needle would not move
    assert gauge.fraction(2) < gauge.fraction(4) < gauge.fraction(16)
