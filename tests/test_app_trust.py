"""What a person can trust the app with: nothing typed is lost when the disk is full, a
damaged settings file is kept, text is shown as written (any `<`, emoji, scripts), the
keyboard goes where the person types. Views fed scripted engine events (no model)."""

from __future__ import annotations

import asyncio
import os
import sqlite3

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextFormat
from PySide6.QtWidgets import QApplication

from .scripted_engine import END, ScriptedService, answer_events
from .test_app_views import SIMPLE, app, ask, loop, plain, wait  # noqa: F401


@pytest.fixture
def build(loop, tmp_path, monkeypatch, qtbot):
    """Start the app on files prepared by the test (``tmp_path/config``, ``/data``)."""
    from app.__main__ import Application

    monkeypatch.setenv("DRAFTLESS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DRAFTLESS_CONFIG_DIR", str(tmp_path / "config"))
    made = []

    def start():
        application = Application(service=ScriptedService(), theme_name="light")
        application.scripted = application.service
        qtbot.addWidget(application.window)
        application.window.resize(1100, 760)
        application.window.show()
        wait(qtbot, application.start("scripted"))
        made.append(application)
        return application

    yield start
    for application in made:
        application.window.close()
        application.store.close()


def type_and_send(qtbot, window, text):
    window.input.setFocus()
    qtbot.keyClicks(window.input, text)
    qtbot.keyClick(window.input, Qt.Key_Return)


# A. a full disk ---------------------------------------------------------------------------
def test_a_full_disk_keeps_the_typed_message_and_says_what_to_do(app, qtbot, monkeypatch):
    window = app.window

    def full(*_args, **_kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(app.store, "add_message", full)
    type_and_send(qtbot, window, "a question worth keeping")
    assert window.input.toPlainText() == "a question worth keeping"
    assert window.banner.isVisible()
    message = window.banner.label.text()
    assert "disk is full" in message and "free" in message.lower() and "Send" in message
    assert not app.controller.busy and window.send_button.isEnabled()
    assert window.transcript.views == [] and app.controller.messages == []

    monkeypatch.undo()  # space freed: the same message goes out as typed
    app.scripted.queue(plain("kept"))
    task = window.send(window.input.toPlainText())
    wait(qtbot, task)
    assert [v.text for v in window.transcript.views] == ["a question worth keeping", "kept"]
    assert window.input.toPlainText() == ""


def test_a_full_disk_leaves_chats_as_they_were_with_a_message(app, qtbot, monkeypatch):
    window = app.window
    ask(qtbot, app, "a question", plain("one"))
    app.scripted.queue(plain("two"))
    wait(qtbot, window.regenerate())
    session = app.controller.session

    def full(*_args, **_kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    for name in ("create_session", "rename_session", "delete_session", "choose"):
        monkeypatch.setattr(app.store, name, full)
    window.new_chat()
    assert app.controller.session is session and "No new chat" in window.banner.messages[-1]
    window.ask_text = lambda *args: "another name"
    window.rename_chat(session.id)
    assert window.windowTitle() == "a question — Draftless"
    assert "not renamed" in window.banner.messages[-1]
    window.confirm_delete = lambda title: True
    window.delete_chat(session.id)
    assert app.controller.session is session and "not deleted" in window.banner.messages[-1]
    window.transcript.views[-1].previous_button.click()
    assert window.transcript.views[-1].text == "two" and "version" in window.banner.messages[-1]
    assert all("disk is full" in m and "Free some space" in m for m in window.banner.messages)
    monkeypatch.undo()
    window.new_chat()  # with space again, a message in a chat that was not started goes out
    assert app.controller.session is not session


# B. a damaged settings file -----------------------------------------------------------------
NOT_UTF8 = b'{"drafter": "suffix", "system_prompt": "Caf\xe9 \xff\xfe"}'


def test_settings_that_are_not_utf8_are_kept_aside_and_not_overwritten(build, tmp_path):
    config = tmp_path / "config"
    config.mkdir()
    (config / "settings.json").write_bytes(NOT_UTF8)
    application = build()
    [kept] = [f for f in config.iterdir() if f.name.startswith("settings.json.corrupt-")]
    assert kept.read_bytes() == NOT_UTF8
    [note] = [m for m in application.window.banner.messages if "settings" in m]
    assert kept.name in note and "utf-8" in note.lower()
    application.window.settings_panel.max_tokens.setValue(99)  # saving now writes a new file
    assert application.controller.settings.max_tokens == 99
    assert kept.read_bytes() == NOT_UTF8
    assert '"max_tokens": 99' in (config / "settings.json").read_text(encoding="utf-8")


def test_settings_that_cannot_be_kept_aside_are_never_saved_over(build, tmp_path, monkeypatch):
    config = tmp_path / "config"
    config.mkdir()
    (config / "settings.json").write_bytes(NOT_UTF8)

    def refuse(*_args):
        raise PermissionError("read-only folder")

    monkeypatch.setattr("app.storage.settings.move_aside", refuse)
    application = build()
    assert any("left as it is" in m for m in application.window.banner.messages)
    application.window.settings_panel.max_tokens.setValue(99)
    assert (config / "settings.json").read_bytes() == NOT_UTF8
    assert "Could not save the settings" in application.window.banner.messages[-1]


def test_settings_are_written_whole_and_flushed_before_the_rename(tmp_path, monkeypatch):
    from app.storage.settings import AppSettings, SettingsStore

    store = SettingsStore(tmp_path)
    store.save(AppSettings())
    done = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(
        os, "fsync", lambda fd: done.append(("fsync", os.fstat(fd).st_ino)) or real_fsync(fd)
    )
    monkeypatch.setattr(
        os,
        "replace",
        lambda a, b: done.append(("replace", os.stat(a).st_ino)) or real_replace(a, b),
    )
    store.save(AppSettings(max_tokens=77))
    [(_, written)] = [d for d in done if d[0] == "replace"]
    assert done.index(("fsync", written)) < done.index(("replace", written))
    assert done[-1] == ("fsync", os.stat(tmp_path).st_ino)  # the rename itself is flushed
    assert SettingsStore(tmp_path).load().max_tokens == 77
    assert [f.name for f in tmp_path.iterdir()] == ["settings.json"]


# C. text with `<` is text, not HTML ------------------------------------------------------------
QUESTION = (
    'Why does List<String> fail when a<b and b>c? <div class="x">hi</div> <script>x()</script>'
)
ANSWER = (
    "<<Title>>\n\nUse `Map<K, V>` or:\n\n```java\nList<String> xs = new ArrayList<>();\n"
    "if (a<b) {}\n```\n\nDone: <b>bold?</b> stays text, as does <br> and 1 < 2 > 0."
)


def words_of(text):
    """The answer as scripted tokens: every other word an accepted draft."""
    pieces = text.split(" ")
    items = [(p if i == 0 else " " + p, i % 2 == 1) for i, p in enumerate(pieces)]
    return answer_events([(1, [item]) for item in items] + [(0, [(END, False)])])


def test_angle_brackets_and_html_show_as_written_in_questions_and_answers(app, qtbot):
    ask(qtbot, app, QUESTION, words_of(ANSWER))
    question, answer = app.window.transcript.views
    shown = question.body.document().toPlainText()
    for part in ("List<String>", "a<b and b>c?", '<div class="x">hi</div>', "<script>x()</script>"):
        assert part in shown
    shown = answer.body.document().toPlainText()
    for part in (
        "<<Title>>",
        "Map<K, V>",
        "List<String> xs = new ArrayList<>();",
        "if (a<b) {}",
        "Done: <b>bold?</b> stays text, as does <br> and 1 < 2 > 0.",
    ):
        assert part in shown
    app.window.markdown_action.setChecked(False)  # the raw text: as written
    assert answer.body.document().toPlainText() == ANSWER


# D. the keyboard goes to the composer ---------------------------------------------------------
def focused(qtbot, window):
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    return QApplication.focusWidget()


def test_the_composer_has_the_keyboard_at_launch_after_new_chat_and_after_sending(build, qtbot):
    application = build()
    window = application.window
    assert focused(qtbot, window) is window.input
    qtbot.keyClicks(QApplication.focusWidget(), "typed at once")
    assert window.input.toPlainText() == "typed at once"

    application.scripted.queue(plain("an answer"))
    window.send_button.setFocus()
    window.send_button.click()  # a mouse click on Send leaves the keyboard on the composer
    wait(qtbot, application.controller.answer_task)
    assert focused(qtbot, window) is window.input

    window.sessions_panel.list.setFocus()
    window.sessions_panel.new_button.click()
    assert focused(qtbot, window) is window.input
    window.speculation_bar.toggle.setFocus()
    window.new_action.trigger()
    assert focused(qtbot, window) is window.input


# E. emoji and other scripts keep their highlights in place ---------------------------------
def highlighted_texts(document):
    """The text of each run of characters painted as an accepted draft."""
    from app.storage.provenance import DRAFT

    runs, end = [], None
    block = document.begin()
    while block.isValid():
        iterator = block.begin()
        while not iterator.atEnd():
            fragment = iterator.fragment()
            if fragment.charFormat().property(QTextFormat.UserProperty) == DRAFT:
                if fragment.position() == end:
                    runs[-1] += fragment.text()
                else:
                    runs.append(fragment.text())
                end = fragment.position() + fragment.length()
            iterator += 1
        block = block.next()
    return runs


SCRIPTS = [  # (token text, accepted draft)
    ("Hi 😀", False),
    ("🎉", False),
    (" world", True),
    (" and", False),
    (" 𠮷野家", True),
    (" 日本語", False),
    (" cafe\u0301", True),
    (" naïve", False),
    (" שלום", True),
    (" عالم", False),
    (" 👩\u200d💻 ok", True),
    (" end", False),
    (" 🇫🇷", True),
    (".", False),
]


def test_highlights_stay_on_the_drafted_characters_with_emoji_cjk_marks_and_rtl(app, qtbot):
    events = answer_events([(1, [item]) for item in SCRIPTS] + [(0, [(END, False)])])
    ask(qtbot, app, "emoji 😀 and scripts", events)
    view = app.window.transcript.views[-1]
    drafted = [text for text, from_draft in SCRIPTS if from_draft]
    assert view.provenance.text == "".join(t for t, _ in SCRIPTS)
    assert [view.text[a:b] for a, b in view.provenance.draft_spans()] == drafted
    assert highlighted_texts(view.body.document()) == drafted
    assert "\ufffd" not in view.body.document().toPlainText()
    app.controller.open_session(app.controller.session.id)  # the same when reopened
    assert highlighted_texts(app.window.transcript.views[-1].body.document()) == drafted


def test_code_colours_and_headers_count_emoji_as_the_document_does(app, qtbot):
    answer = "Code:\n\n```python\nx = '😀😀'  # 🎉\nprint(x)\n```\n\n😀 after"
    ask(qtbot, app, "code", answer_events([(1, [(answer, True)]), (0, [(END, False)])]))
    document = app.window.transcript.views[-1].body.document()
    assert highlighted_texts(document) == ["Code:", "x = '😀😀'  # 🎉", "print(x)", "😀 after"]
    line = document.find("print(").block()  # the line after three emoji
    coloured = [
        f.text() for f in fragments(line) if f.charFormat().hasProperty(QTextFormat.ForegroundBrush)
    ]
    assert "print" in coloured and "python" not in line.text()


def fragments(block):
    iterator = block.begin()
    while not iterator.atEnd():
        yield iterator.fragment()
        iterator += 1


# F. deleting a chat while it answers ---------------------------------------------------------
def test_deleting_a_chat_while_it_answers_cancels_the_answer_quietly(app, qtbot):
    ask(qtbot, app, "an older chat", plain("still here"))
    older = app.controller.session.id
    app.window.new_chat()
    gate = asyncio.Event()
    events = answer_events(SIMPLE)
    app.scripted.queue(events[:3] + [gate] + events[3:])
    task = app.window.send("delete me while you answer")
    qtbot.waitUntil(lambda: app.controller.answer.live.passes == 1)
    doomed = app.controller.session.id
    app.window.confirm_delete = lambda title: True
    app.window.delete_chat(doomed)
    stream = app.controller.answer.stream
    gate.set()
    wait(qtbot, task)
    assert stream.cancelled and not app.controller.busy
    assert app.window.banner.messages == [] and not app.window.banner.isVisible()
    assert app.store.session(doomed) is None and app.controller.session.id == older
    assert [v.text for v in app.window.transcript.views] == ["an older chat", "still here"]
    assert app.window.send_button.isEnabled() and not app.window.stop_button.isEnabled()


# G. regenerating at temperature 0 ------------------------------------------------------------
def test_regenerate_at_temperature_0_says_it_repeats_and_offers_temperature_0_7(app, qtbot):
    window = app.window
    ask(qtbot, app, "a question", plain("the answer"))
    view = window.transcript.views[-1]
    assert app.controller.settings.temperature == 0
    assert view.regenerate_button.isVisible() and "same answer" in view.regenerate_button.toolTip()
    assert view.vary_button.isVisible() and "0.7" in view.vary_button.text()
    app.scripted.queue(plain("another answer"))
    view.vary_button.click()
    wait(qtbot, app.controller.answer_task)
    assert app.scripted.requests[-1].sampling.temperature == 0.7
    seed = app.scripted.requests[-1].sampling.seed  # shown, so the answer can be repeated
    assert seed is not None and f"seed {seed}" in window.transcript.views[-1].footer.text()
    assert f"seed {seed}" in window.transcript.views[-1].footer.toolTip()
    assert app.controller.settings.temperature == 0  # for that answer only
    assert window.transcript.views[-1].version_label.text() == "2/2"

    window.settings_panel.temperature.setValue(0.5)  # sampling already: no hint, no offer
    view = window.transcript.views[-1]
    assert (
        not view.vary_button.isVisible() and "same answer" not in view.regenerate_button.toolTip()
    )
    app.scripted.queue(plain("a third answer"))
    view.regenerate_button.click()
    wait(qtbot, app.controller.answer_task)
    assert app.scripted.requests[-1].sampling.temperature == 0.5
    assert app.scripted.requests[-1].sampling.seed is None


# H. smaller defects -------------------------------------------------------------------------
def test_the_window_title_follows_a_rename(app, qtbot):
    ask(qtbot, app, "first name", plain("ok"))
    assert app.window.windowTitle() == "first name — Draftless"
    app.window.ask_text = lambda *args: "  a better   name "
    app.window.rename_chat(app.controller.session.id)
    assert app.window.windowTitle() == "a better name — Draftless"


def test_stop_belongs_to_the_chat_that_answers(app, qtbot):
    window = app.window
    gate = asyncio.Event()
    events = answer_events(SIMPLE)
    app.scripted.queue(events[:3] + [gate] + events[3:])
    task = window.send("a long answer")
    qtbot.waitUntil(lambda: app.controller.answer.live.passes == 1)
    answering = app.controller.session.id
    assert window.stop_button.isEnabled() and window.stop_action.isEnabled()
    window.new_chat()  # an empty chat: nothing here to stop, and nothing can be sent yet
    assert not window.stop_button.isEnabled() and not window.stop_action.isEnabled()
    assert "Another chat is answering" in window.send_button.toolTip()
    window.stop_action.trigger()
    assert not app.controller.answer.stream.cancelled
    app.controller.open_session(answering)
    assert window.stop_button.isEnabled() and window.stop_action.isEnabled()
    gate.set()
    wait(qtbot, task)
    assert not window.stop_button.isEnabled() and window.send_button.toolTip() == "Send (Enter)"


def test_zoom_is_remembered(build, qtbot):
    application = build()
    window = application.window
    window.zoom_in_action.trigger()
    window.zoom_in_action.trigger()
    assert application.controller.settings.zoom == 1.3
    size = window.transcript.column.font().pointSizeF()
    window.close()
    application.store.close()
    again = build()
    assert again.controller.settings.zoom == 1.3
    assert again.window.transcript.column.font().pointSizeF() == size
    ask(qtbot, again, "big text", plain("big answer"))
    body = again.window.transcript.views[-1].body
    assert body.document().defaultFont().pointSizeF() == size


def test_search_ignores_case_and_unicode_forms(app, qtbot):
    ask(qtbot, app, "Notes on ÉTÉ in Straße", plain("the summer"))
    summer = app.controller.session.id
    app.window.new_chat()
    ask(qtbot, app, "another chat", plain("about cafe\u0301 au lait"))  # e + combining accent
    coffee = app.controller.session.id
    assert [s.id for s in app.controller.sessions("été")] == [summer]
    assert [s.id for s in app.controller.sessions("STRASSE")] == [summer]
    assert [s.id for s in app.controller.sessions("CAFÉ")] == [coffee]  # é as one character
    assert [s.id for s in app.controller.sessions("100%")] == []
    assert {s.id for s in app.controller.sessions("")} == {summer, coffee}


def test_the_gauge_scale_is_the_answers_and_the_next_answer_takes_a_new_draft_count(app, qtbot):
    """Issue 61 turned this round: the dial shows the answer on screen, on that answer's
    scale; a new draft count is the next answer's scale."""
    ask(qtbot, app, "hi", answer_events(SIMPLE))
    gauge = app.window.speculation_bar.gauge
    asked = app.controller.settings.draft_count + 1
    assert gauge.maximum == asked
    app.window.settings_panel.draft_count.setValue(6)
    assert gauge.maximum == asked
    ask(qtbot, app, "again", answer_events(SIMPLE))
    assert gauge.maximum == 7
