"""Issue 44's knobs in the app: Continue after Stop and the card's action row under the
text. Views fed scripted engine events (no model)."""

from __future__ import annotations

import json
from dataclasses import replace

from PySide6.QtCore import QPoint

from .scripted_engine import END, answer_events
from .test_app_views import app, ask, loop, wait  # noqa: F401

STOPPED = [(0, [("one", False)]), (1, [(" two", True)])]


def stopped_events(passes):
    """An answer's events as the engine streams them when the person pressed Stop."""
    events = answer_events(passes)
    return events[:-1] + [replace(events[-1], finish_reason="cancelled")]


def test_a_stopped_answer_offers_continue_and_goes_on(app, qtbot):
    window, controller = app.window, app.controller
    ask(qtbot, app, "count", stopped_events(STOPPED))
    view = window.transcript.views[-1]
    assert controller.messages[-1].finish_reason == "cancelled"
    assert view.continue_button.isVisible() and controller.can_continue
    assert "stopped it" in view.continue_button.toolTip()
    tokens = [t.token for t in controller.messages[-1].provenance.tokens]
    app.scripted.queue(answer_events([(0, [(" three", False)]), (0, [(END, False)])]))
    view.continue_button.click()
    wait(qtbot, controller.answer_task)
    assert list(app.scripted.requests[-1].continue_tokens) == tokens
    assert window.transcript.views[-1].text == "one two three"
    assert not window.transcript.views[-1].continue_button.isVisible()


def test_a_long_answers_buttons_sit_under_its_text(app, qtbot):
    window = app.window
    long_answer = [(0, [(f"line {i}\n\n", False)]) for i in range(60)]
    ask(qtbot, app, "write a lot", answer_events(long_answer))
    view = window.transcript.views[-1]
    assert view.continue_button.isVisible()
    qtbot.waitUntil(lambda: view.body.height() > 400)

    def button_under_the_text():  # once the card's layout has taken the body's new height
        return view.continue_button.mapTo(view, QPoint(0, 0)).y() > view.body.geometry().bottom()

    qtbot.waitUntil(button_under_the_text)
    # scrolled to the end of the answer, the button is on screen
    window.transcript.scroll_to_latest()
    viewport = window.transcript.viewport()
    top = view.continue_button.mapTo(viewport, QPoint(0, 0)).y()
    assert 0 <= top < viewport.height()


# sampling knobs -----------------------------------------------------------------------------
def test_the_panels_knobs_reach_the_engine_and_survive_a_restart(app, qtbot, tmp_path):
    from app.__main__ import Application

    panel, controller = app.window.settings_panel, app.controller
    panel.top_k.setValue(40)
    panel.min_p.setValue(0.05)
    panel.repetition_penalty.setValue(1.1)
    panel.stop_strings.setPlainText("\\n\\nUser:\n###")
    panel.flush()
    assert controller.settings.stop_strings == ("\n\nUser:", "###")
    ask(qtbot, app, "hello", answer_events(STOPPED))
    sampling = app.scripted.requests[-1].sampling
    assert (sampling.top_k, sampling.min_p, sampling.repetition_penalty) == (40, 0.05, 1.1)
    saved = json.loads((tmp_path / "config" / "settings.json").read_text())
    assert saved["stop_strings"] == ["\n\nUser:", "###"] and saved["top_k"] == 40
    again = Application(service=app.scripted, theme_name="light")  # a restart
    qtbot.addWidget(again.window)
    knobs = again.window.settings_panel
    assert (knobs.top_k.value(), knobs.repetition_penalty.value()) == (40, 1.1)
    assert knobs.stop_strings.toPlainText() == "\\n\\nUser:\n###"


def test_off_knobs_read_off_and_too_many_stop_strings_are_refused_in_words(app, qtbot):
    panel, controller = app.window.settings_panel, app.controller
    assert panel.top_k.text() == panel.min_p.text() == panel.repetition_penalty.text() == "Off"
    problems = []
    controller.problem.connect(problems.append)
    panel.stop_strings.setPlainText("a\nb\nc\nd\ne")
    panel.flush()
    assert controller.settings.stop_strings == ()
    assert "Settings not applied" in problems[-1] and "at most 4 stop strings" in problems[-1]


def test_a_stop_string_ends_the_answer_before_it(app, qtbot):
    window, controller = app.window, app.controller
    app.window.settings_panel.stop_strings.setPlainText(", fr")
    app.window.settings_panel.flush()
    passes = [
        (0, [("Hello", False)]),
        (3, [(" there", True), (",", True), (" friend", False)]),
        (2, [(".", False)]),
        (1, [(END, False)]),
    ]
    ask(qtbot, app, "hi", answer_events(passes))
    message = controller.messages[-1]
    assert (message.content, message.finish_reason) == ("Hello there", "stop")
    assert message.provenance.text == "Hello there"
    assert [t.from_draft for t in message.provenance.tokens] == [False, True]
    assert window.transcript.views[-1].text == "Hello there"
    assert not window.transcript.views[-1].continue_button.isVisible()
    stored = app.store.messages(controller.session.id)[-1]
    assert (stored.content, stored.finish_reason) == ("Hello there", "stop")
    # the figures count the two tokens kept: of the second pass's three, "," and " friend"
    # came after the cut (one of its two accepted drafts), and the later passes are gone
    figures = {k: stored.stats[k] for k in ("passes", "drafted", "accepted", "emitted")}
    assert figures == {"passes": 2, "drafted": 3, "accepted": 1, "emitted": 2}
    assert stored.stats["accepted_length_counts"] == [1, 1]
    assert stored.stats["position_accepted"] == [1, 0, 0]


# the chat's own system prompt ---------------------------------------------------------------
def set_chat_prompt(qtbot, window, text):
    bar = window.system_prompt_bar
    if not bar.toggle.isChecked():
        bar.toggle.click()
    bar.editor.setPlainText(text)
    bar.flush()


def test_each_chat_keeps_its_own_system_prompt(app, qtbot):
    window, controller = app.window, app.controller
    default = controller.settings.system_prompt
    ask(qtbot, app, "first chat", answer_events(STOPPED))
    assert app.scripted.requests[-1].messages[0] == {"role": "system", "content": default}
    first = controller.session.id
    set_chat_prompt(qtbot, window, "Answer like a pirate.")
    ask(qtbot, app, "again", answer_events(STOPPED))
    turns = app.scripted.requests[-1].messages
    assert turns[0] == {"role": "system", "content": "Answer like a pirate."}
    assert [t["role"] for t in turns].count("system") == 1
    assert controller.settings.system_prompt == default  # the default for new chats stays
    window.new_chat()
    assert window.system_prompt_bar.prompt() == default
    ask(qtbot, app, "second chat", answer_events(STOPPED))
    assert app.scripted.requests[-1].messages[0]["content"] == default
    controller.open_session(first)
    assert window.system_prompt_bar.prompt() == "Answer like a pirate."
    assert app.store.system_prompt(first) == "Answer like a pirate."
    set_chat_prompt(qtbot, window, "")  # none at all: the chat is sent alone
    ask(qtbot, app, "no system", answer_events(STOPPED))
    assert app.scripted.requests[-1].messages[0]["role"] == "user"


def test_a_new_chat_starts_with_the_settings_default(app, qtbot):
    window, controller = app.window, app.controller
    panel = window.settings_panel
    panel.system_prompt.setPlainText("Be brief.")
    panel.flush()
    window.new_chat()
    assert window.system_prompt_bar.prompt() == "Be brief."
    ask(qtbot, app, "hi", answer_events(STOPPED))
    assert app.scripted.requests[-1].messages[0] == {"role": "system", "content": "Be brief."}
    assert app.store.system_prompt(controller.session.id) == "Be brief."


def test_a_new_chat_and_its_system_prompt_are_stored_in_one_write(app, monkeypatch):
    import sqlite3

    controller, store = app.controller, app.store

    def unwritable(*_):
        raise sqlite3.OperationalError("disk I/O error")

    # a second write for the prompt could fail after the chat was stored, leaving a chat
    # without its prompt behind a banner saying no chat was started
    monkeypatch.setattr(store, "set_system_prompt", unwritable)
    session = controller.new_session()
    assert session is not None
    assert store.system_prompt(session.id) == controller.settings.system_prompt
    assert all(store.system_prompt(s.id) is not None for s in store.sessions())


def test_a_history_file_from_before_chat_prompts_opens_with_the_default(tmp_path):
    import sqlite3

    from app.storage.store import Store

    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT NOT NULL, "
        "created REAL NOT NULL, updated REAL NOT NULL);"
        "INSERT INTO sessions VALUES ('old', 'An old chat', 1, 1);"
        "PRAGMA user_version = 1;"
    )
    old.commit()
    old.close()
    store = Store(path)
    assert [s.title for s in store.sessions()] == ["An old chat"]
    assert store.system_prompt("old") is None  # the settings' default answers it
    store.set_system_prompt("old", "Now its own.")
    store.close()
    assert Store(path).system_prompt("old") == "Now its own."


# the context meter --------------------------------------------------------------------------
def load_model_with_window(app, window_tokens):
    from engine.events import ModelEvent

    app.controller.models.model_loaded(
        ModelEvent("scripted-model", "/nowhere", "on", facts={"context_length": window_tokens})
    )


def test_the_context_meter_counts_the_engines_tokens_and_warns_near_the_end(app, qtbot):
    window = app.window
    meter = window.context_meter
    panel = window.settings_panel
    panel.max_tokens.setValue(64)
    load_model_with_window(app, 1000)
    assert meter.text() == "0 / 1,000 tokens" and meter.isVisible()
    ask(qtbot, app, "hi", answer_events(STOPPED, prompt_tokens=600))
    assert meter.text() == "602 / 1,000 tokens"  # 600 prompt tokens, 2 written
    assert not meter.property("warning")
    assert "602 of the 1,000 tokens" in meter.toolTip()
    ask(qtbot, app, "more", answer_events(STOPPED, prompt_tokens=860))
    assert meter.text() == "862 / 1,000 tokens — nearly full" and meter.property("warning")
    assert "refuses to answer" in meter.toolTip() and "new chat" in meter.toolTip()
    window.new_chat()
    assert meter.text() == "0 / 1,000 tokens" and not meter.property("warning")


def test_the_meter_warns_when_max_tokens_would_not_fit(app, qtbot):
    meter = app.window.context_meter
    load_model_with_window(app, 1000)
    app.window.settings_panel.max_tokens.setValue(512)
    ask(qtbot, app, "hi", answer_events(STOPPED, prompt_tokens=500))  # 502 + 512 > 1000
    assert meter.property("warning")
    assert "would not fit" in meter.toolTip()
    app.window.settings_panel.max_tokens.setValue(256)
    assert not meter.property("warning")


def test_the_meter_says_tokens_alone_when_the_model_gives_no_window(app, qtbot):
    meter = app.window.context_meter
    ask(qtbot, app, "hi", answer_events(STOPPED, prompt_tokens=40))
    assert meter.text() == "42 tokens" and "does not say" in meter.toolTip()
    assert not meter.property("warning")  # nothing to warn of without a window
