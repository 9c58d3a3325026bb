"""The window by keyboard, driven as a person drives it: each key goes to the widget that
has the focus (``QTest.keyClick``), never to a method (issue 61)."""

from __future__ import annotations

import asyncio

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import QApplication, QDockWidget, QPlainTextEdit, QScrollArea, QWidget

from .test_app_views import SIMPLE, answer_events, app, ask, loop, wait  # noqa: F401


def focused():
    return QApplication.focusWidget()


def press(qtbot, key, modifiers=Qt.NoModifier):
    """A key pressed where the focus is, as a person presses it."""
    qtbot.keyClick(focused(), key, modifiers)


def held_answer(app):
    """An answer that streams one pass and then waits (``gate.set()`` lets it finish)."""
    gate = asyncio.Event()
    events = answer_events(SIMPLE)
    app.scripted.queue(events[:2] + [gate] + events[2:])
    return gate


def another_window_active(qtbot) -> QWidget:
    """The chat window loses the activation (its Esc shortcut stops firing)."""
    other = QWidget()
    qtbot.addWidget(other)
    other.show()
    other.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is other)
    return other


def test_esc_in_the_composer_stops_the_answer_even_when_the_window_is_not_active(app, qtbot):
    """Under a desktop without a window manager the window is never "active" until a click,
    and the Stop action's Esc shortcut does not fire; the keys still reach the composer."""
    window, controller = app.window, app.controller
    gate = held_answer(app)
    window.input.setFocus()
    qtbot.keyClicks(focused(), "Count to a thousand")
    press(qtbot, Qt.Key_Return)
    qtbot.waitUntil(lambda: controller.answering_here)
    another_window_active(qtbot)
    stream = controller.answer.stream
    qtbot.keyClick(window.input, Qt.Key_Escape)  # where the keys of the chat go
    assert stream.cancelled
    gate.set()
    wait(qtbot, controller.answer_task)


def test_esc_stops_from_any_control_of_the_window(app, qtbot):
    window, controller = app.window, app.controller
    gate = held_answer(app)
    window.send("Count")
    qtbot.waitUntil(lambda: controller.answering_here)
    window.show_settings()
    window.settings_panel.draft_count.setFocus()
    another_window_active(qtbot)
    stream = controller.answer.stream
    qtbot.keyClick(window.settings_panel.draft_count, Qt.Key_Escape)
    assert stream.cancelled
    gate.set()
    wait(qtbot, controller.answer_task)


def walk(qtbot, key, steps, modifiers=Qt.NoModifier):
    """Press ``key`` ``steps`` times; the widgets the focus went to, in order."""
    seen = []
    for _ in range(steps):
        before = focused()
        press(qtbot, key, modifiers)
        assert focused() is not before, f"{key} left the focus on {before!r}"
        seen.append(focused())
    return seen


def text_fields(window) -> dict:
    return {e: e.toPlainText() for e in window.findChildren(QPlainTextEdit)}


def test_tab_never_enters_a_text_field_it_cannot_leave(app, qtbot):
    window = app.window
    ask(qtbot, app, "hello", answer_events(SIMPLE))
    window.system_prompt_bar.toggle.setChecked(True)  # the chat's own prompt editor shown
    window.show_settings()  # Ctrl+, as the person did
    window.input.setFocus()
    fields, settings = text_fields(window), app.controller.settings
    forward = walk(qtbot, Qt.Key_Tab, 120)
    editors = {window.settings_panel.stop_strings, window.settings_panel.system_prompt}
    editors |= {window.system_prompt_bar.editor, window.input}
    assert editors <= set(forward)  # every multi-line field was visited, and left
    backward = walk(qtbot, Qt.Key_Backtab, 120)
    assert editors <= set(backward)
    assert text_fields(window) == fields  # not one tab typed anywhere
    window.settings_panel.flush()
    assert app.controller.settings == settings


def test_ctrl_tab_types_a_tab_where_one_is_wanted(app, qtbot):
    window = app.window
    window.system_prompt_bar.toggle.setChecked(True)
    window.show_settings()
    for editor in (
        window.input,
        window.system_prompt_bar.editor,
        window.settings_panel.stop_strings,
        window.settings_panel.system_prompt,
    ):
        editor.setFocus()
        qtbot.keyClick(editor, Qt.Key_End, Qt.ControlModifier)
        qtbot.keyClicks(editor, "a")
        qtbot.keyClick(editor, Qt.Key_Tab, Qt.ControlModifier)
        qtbot.keyClicks(editor, "b")
        assert editor.toPlainText().endswith("a\tb")


def test_tab_follows_the_screen(app, qtbot):
    window = app.window
    ask(qtbot, app, "hello", answer_events(SIMPLE))
    window.show_settings()
    window.sessions_panel.search.setFocus()
    order = [window.sessions_panel.search, *walk(qtbot, Qt.Key_Tab, 60)]
    answer = window.transcript.views[-1]
    expected = [  # left column, then the chat top to bottom, then the side panel
        window.sessions_panel.search,
        window.sessions_panel.new_button,
        window.sessions_panel.delete_button,
        window.model_presenter.picker.button,
        window.speculation_bar.toggle,
        window.system_prompt_bar.toggle,
        answer.body,
        answer.copy_button,
        window.composer.attach_button,
        window.input,
        window.send_button,
        window.settings_panel.folder_button,
        window.settings_panel.draft_count,
        window.settings_panel.max_tokens,
    ]
    assert [order.index(w) for w in expected] == sorted(order.index(w) for w in expected)


def controls(window) -> list[QWidget]:
    """What Tab can stop at: shown (not in a dock tabbed behind another), enabled, taking
    Tab focus, not a bare scroll area around a panel."""

    def in_sight(widget):
        dock = widget.parentWidget()
        while dock is not None and not isinstance(dock, QDockWidget):
            dock = dock.parentWidget()
        return dock is None or not dock.visibleRegion().isEmpty()

    return [
        w
        for w in window.findChildren(QWidget)
        if w.isVisible()
        and w.isEnabled()
        and w.focusPolicy() & Qt.TabFocus
        and w.focusProxy() is None
        and (not isinstance(w, QScrollArea) or w is window.transcript)
        and in_sight(w)
    ]


def accessible_name(widget) -> str:
    interface = QAccessible.queryAccessibleInterface(widget)
    return interface.text(QAccessible.Name) if interface is not None else ""


def test_tab_reaches_the_server_panel_and_leaves_its_log(app, qtbot):
    window = app.window
    window.server_dock.raise_()  # View ▸ Server
    panel = window.server_panel
    panel.network.setChecked(True)  # the key field and its button shown
    window.input.setFocus()
    order = walk(qtbot, Qt.Key_Tab, 40)
    expected = [
        panel.model,
        panel.port,
        panel.network,
        panel.key,
        panel.make_key,
        panel.start_button,
        panel.log,
    ]
    assert [order.index(w) for w in expected] == sorted(order.index(w) for w in expected)


def test_every_control_has_a_name_and_the_gauge_and_meter_say_their_values(app, qtbot):
    window = app.window
    ask(qtbot, app, "hello", answer_events(SIMPLE))
    window.system_prompt_bar.toggle.setChecked(True)
    for dock in (window.settings_dock, window.inspector_dock, window.server_dock):
        dock.raise_()
        QApplication.processEvents()
        unnamed = [
            f"{type(w).__name__} {w.objectName()!r} {w.toolTip()[:40]!r}"
            for w in controls(window)
            if not accessible_name(w)
        ]
        assert unnamed == []
    gauge = window.speculation_bar.gauge
    assert accessible_name(gauge) == "Tokens per pass"
    assert gauge.accessibleDescription().startswith("1.5 tokens per pass for this answer")
    meter = window.context_meter
    assert accessible_name(meter) == "Context window"
    assert meter.text() in meter.accessibleDescription()


def test_zoom_scales_the_whole_window(app, qtbot):
    window = app.window
    window.input.setFocus()
    parts = [
        window.input,
        window.settings_panel.draft_count,
        window.sessions_panel.list,
        window.model_presenter.picker.button,
        window.context_meter,
        window.speculation_bar.acceptance_label,
    ]
    before = [w.font().pointSizeF() for w in parts]
    gauge_width, input_height = (
        window.speculation_bar.gauge.sizeHint().width(),
        window.input.height(),
    )
    press(qtbot, Qt.Key_Equal, Qt.ControlModifier)
    press(qtbot, Qt.Key_Equal, Qt.ControlModifier)
    after = [w.font().pointSizeF() for w in parts]
    assert app.controller.settings.zoom == 1.3
    assert after == pytest.approx([size * 1.3 for size in before])
    assert window.speculation_bar.gauge.sizeHint().width() > gauge_width
    assert window.input.height() > input_height  # its lines stay in sight
    press(qtbot, Qt.Key_0, Qt.ControlModifier)
    assert [w.font().pointSizeF() for w in parts] == pytest.approx(before)
