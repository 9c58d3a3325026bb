"""Issue 44: edit or delete any message, assistant ones included, and fork a chat from any
message (the card's "⋯" menu, ``app.views.message_actions``). Views fed scripted engine events."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtWidgets import QApplication, QMenu

from app.presenters.livestats import EDITED
from app.storage.store import Message, Store
from app.views import theme
from app.views.inline_editor import InlineEditor
from app.views.message_actions import BUSY
from app.views.render import highlighted_positions

from .scripted_engine import END, answer_events
from .test_app_views import (  # noqa: F401
    SIMPLE,
    answer_dialog,
    app,
    ask,
    loop,
    plain,
    texts,
    wait,
)


def entry(menu: QMenu, text: str):
    [action] = [a for a in menu.actions() if a.text() == text]
    return action


def open_menu(qtbot, view) -> QMenu:
    """The card's menu as the keyboard opens it: Tab to "⋯", then Space."""
    assert view.more_button.focusPolicy() & Qt.TabFocus
    view.more_button.setFocus()
    qtbot.keyClick(view.more_button, Qt.Key_Space)
    qtbot.waitUntil(lambda: isinstance(QApplication.activePopupWidget(), QMenu))
    return QApplication.activePopupWidget()


def choose(qtbot, view, text: str) -> None:
    menu = open_menu(qtbot, view)
    action = entry(menu, text)
    menu.close()
    action.trigger()


def edit_in_place(qtbot, view) -> InlineEditor:
    """Edit answer… from the card's menu: the editor in the card, in place of its text."""
    # a dialog (the old way) would hold the test in its own event loop: it is closed at once
    QTimer.singleShot(0, lambda: (w := QApplication.activeModalWidget()) and w.reject())
    choose(qtbot, view, "Edit answer…")
    editor = view.findChild(InlineEditor)
    assert editor is not None and editor.isVisible() and not view.body.isVisible()
    assert editor.box.toPlainText() == view.text and editor.box.hasFocus()
    return editor


def test_an_answer_is_edited_in_its_card_and_esc_or_cancel_keep_it(app, qtbot):
    window = app.window
    ask(qtbot, app, "first question", answer_events(SIMPLE))
    answer = window.transcript.views[-1]
    before = answer.text
    editor = edit_in_place(qtbot, answer)
    assert not answer.actions.isVisible()  # Save and Cancel stand in for the card's buttons
    editor.box.setPlainText("")
    assert not editor.save_button.isEnabled()  # an answer is not emptied (Delete is for that)
    editor.box.setPlainText("typed, then thought better of")
    qtbot.keyClick(editor.box, Qt.Key_Escape)
    assert answer.findChild(InlineEditor) is None
    assert answer.body.isVisible() and answer.actions.isVisible() and answer.text == before
    edit_in_place(qtbot, answer).cancel_button.click()
    assert answer.findChild(InlineEditor) is None
    assert [m.content for m in app.controller.messages][-1] == before


def test_a_theme_or_highlight_change_leaves_the_editor_alone_in_its_card(app, qtbot):
    """The card is re-rendered on a restyle; while it is edited, its text, thinking, footer
    and buttons stay aside, and it takes the new look once the edit ends."""
    thinking = [
        (0, [("<think>", False), ("Hm.", False)]),
        (2, [("</think>", True), ("Yes.", True)]),
    ]
    ask(qtbot, app, "first question", answer_events(thinking + [(0, [(END, False)])]))
    answer = app.window.transcript.views[-1]
    assert highlighted_positions(answer.body.document())
    assert answer.vary_row.isVisible()  # temperature 0: "Regenerate with temperature …"
    editor = edit_in_place(qtbot, answer)
    parts = (answer.thinking, answer.body, answer.footer, answer.actions, answer.vary_row)
    try:
        theme.apply(QApplication.instance(), dark=True)
        app.window.transcript.restyle()
        assert editor.isVisible() and not any(part.isVisible() for part in parts)
        app.window.set_highlight(False)  # a setting: the transcript's rows are shown again
        assert editor.isVisible() and not any(part.isVisible() for part in parts)
        settings = app.controller.settings
        app.controller.update_settings(replace(settings, temperature=0.7))
        assert editor.isVisible() and not any(part.isVisible() for part in parts)
        editor.cancel_button.click()
        assert all(part.isVisible() for part in parts[:-1]) and not answer.vary_row.isVisible()
        assert answer.body.toPlainText() == "Yes."
        assert highlighted_positions(answer.body.document()) == []  # the change, shown now
    finally:
        theme.apply(QApplication.instance(), dark=False)


def test_an_edited_answer_loses_its_highlights_and_is_what_the_model_reads_next(app, qtbot):
    window = app.window
    ask(qtbot, app, "first question", answer_events(SIMPLE))
    answer = window.transcript.views[-1]
    assert highlighted_positions(answer.body.document())  # the run's accepted drafts
    editor = edit_in_place(qtbot, answer)
    editor.box.setPlainText("Hello, edited friend.")
    qtbot.keyClick(editor.box, Qt.Key_Return, Qt.ControlModifier)  # Ctrl+Enter saves

    answer = window.transcript.views[-1]
    assert answer.findChild(InlineEditor) is None
    assert answer.text == "Hello, edited friend." and answer.footer.text() == EDITED
    assert highlighted_positions(answer.body.document()) == []
    assert answer.inspect_button.isHidden()  # no figures left to inspect
    [stored] = [m for m in app.store.messages(app.controller.session.id) if m.role == "assistant"]
    assert stored.content == "Hello, edited friend." and stored.finish_reason == EDITED
    assert stored.provenance.tokens == [] and stored.stats == {}

    ask(qtbot, app, "second question", plain("ok"))
    assert app.scripted.requests[-1].messages[-3:] == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "Hello, edited friend."},
        {"role": "user", "content": "second question"},
    ]


def test_a_deleted_message_is_gone_after_a_restart_and_the_chat_stays_valid(app, qtbot):
    window = app.window
    ask(qtbot, app, "one", plain("answer one"))
    ask(qtbot, app, "two", plain("answer two"))
    asked = []
    answer_dialog(qtbot, "Cancel", asked)  # the real question: Cancel keeps the message
    choose(qtbot, window.transcript.views[1], "Delete answer…")
    assert "“answer one”" in asked[0] and len(texts(window)) == 4

    window.message_menu.confirm_delete_message = lambda what, text: True
    choose(qtbot, window.transcript.views[1], "Delete answer…")
    expected = [("user", "one"), ("user", "two"), ("assistant", "answer two")]
    assert texts(window) == expected
    session_id = app.controller.session.id
    restarted = Store(app.store.path)
    try:
        assert [(m.role, m.content) for m in restarted.messages(session_id)] == expected
    finally:
        restarted.close()

    # two questions in a row reach the engine as one turn (strict templates alternate)
    ask(qtbot, app, "three", plain("answer three"))
    assert app.scripted.requests[-1].messages[-3:] == [
        {"role": "user", "content": "one\n\ntwo"},
        {"role": "assistant", "content": "answer two"},
        {"role": "user", "content": "three"},
    ]


def test_deleting_a_shown_version_shows_the_other_and_keeps_what_follows(app, qtbot):
    window = app.window
    ask(qtbot, app, "one", plain("first try"))
    app.scripted.queue(plain("second try"))
    wait(qtbot, window.regenerate())
    ask(qtbot, app, "two", plain("answer two"))
    window.message_menu.confirm_delete_message = lambda what, text: True
    choose(qtbot, window.transcript.views[0], "Delete question…")
    assert texts(window) == [
        ("assistant", "second try"),
        ("user", "two"),
        ("assistant", "answer two"),
    ]
    choose(qtbot, window.transcript.views[0], "Delete answer…")
    assert texts(window) == [("user", "two"), ("assistant", "answer two")]


def test_fork_copies_the_chat_up_to_a_message_and_opens_it(app, qtbot):
    window, controller = app.window, app.controller
    controller.set_system_prompt("Answer in French.")
    ask(qtbot, app, "one", answer_events(SIMPLE))
    ask(qtbot, app, "two", plain("answer two"))
    original = controller.session
    before = [(m.role, m.content) for m in app.store.messages(original.id)]
    tokens = [t.token for t in controller.messages[1].provenance.tokens]

    choose(qtbot, window.transcript.views[1], "Fork chat from here")
    fork = controller.session
    assert fork.id != original.id and fork.title == "Fork 1: one"
    assert texts(window) == [("user", "one"), ("assistant", "Hello there, friend.")]
    assert [t.token for t in controller.messages[1].provenance.tokens] == tokens
    assert highlighted_positions(window.transcript.views[1].body.document())
    assert controller.system_prompt == "Answer in French."
    assert app.store.system_prompt(fork.id) == "Answer in French."
    assert [(m.role, m.content) for m in app.store.messages(original.id)] == before
    assert window.sessions_panel.list.count() == 2

    ask(qtbot, app, "three", plain("answer three"))  # the fork goes on by itself
    assert [m["content"] for m in app.scripted.requests[-1].messages] == [
        "Answer in French.",
        "one",
        "Hello there, friend.",
        "three",
    ]
    assert len(app.store.messages(original.id)) == 4


def test_editing_or_deleting_while_an_answer_is_written_is_refused(app, qtbot):
    window, controller = app.window, app.controller
    ask(qtbot, app, "one", plain("answer one"))
    gate = asyncio.Event()
    events = plain("answer two")
    app.scripted.queue(events[:2] + [gate] + events[2:])  # held after its first token
    task = window.send("two")
    qtbot.waitUntil(lambda: controller.answer is not None and controller.answer.text != "")
    first_answer = window.transcript.views[1]
    menu = open_menu(qtbot, first_answer)
    assert not entry(menu, "Edit answer…").isEnabled()
    assert not entry(menu, "Delete answer…").isEnabled()
    assert entry(menu, "Fork chat from here").isEnabled()
    menu.close()
    actions = window.message_menu.actions
    assert not actions.edit_answer(first_answer.message_id, "changed")
    # an edit begun before the answer started is refused at Save and keeps what was typed
    editor = InlineEditor.open_on(
        first_answer, lambda text: actions.edit_answer(first_answer.message_id, text)
    )
    editor.box.setPlainText("changed meanwhile")
    editor.save_button.click()
    again = first_answer.findChild(InlineEditor)
    assert again is not None and again.box.toPlainText() == "changed meanwhile"
    again.cancel()
    assert not actions.delete(first_answer.message_id)
    assert window.banner.messages[-1] == BUSY
    gate.set()
    wait(qtbot, task)
    stored = [(m.role, m.content) for m in app.store.messages(controller.session.id)]
    assert stored == [
        ("user", "one"),
        ("assistant", "answer one"),
        ("user", "two"),
        ("assistant", "answer two"),
    ]


def test_the_text_menu_keeps_copy_and_edits_a_question_in_the_composer(app, qtbot):
    window = app.window
    ask(qtbot, app, "a question", plain("an answer"))
    question = window.transcript.views[0]
    question.body.customContextMenuRequested.emit(QPoint(4, 4))  # right-click or Menu key
    qtbot.waitUntil(lambda: isinstance(QApplication.activePopupWidget(), QMenu))
    menu = QApplication.activePopupWidget()
    names = [a.text().replace("&", "").split("\t")[0] for a in menu.actions()]
    assert "Select All" in names and "Edit question…" in names
    action = entry(menu, "Edit question…")
    menu.close()
    action.trigger()
    assert window.edit_bar.isVisible() and window.input.toPlainText() == "a question"
    window.message_menu.confirm_delete_message = lambda what, text: True
    choose(qtbot, window.transcript.views[0], "Delete question…")  # the one being edited
    assert not window.edit_bar.isVisible() and texts(window) == [("assistant", "an answer")]


def test_deleting_from_a_chat_written_before_branches_keeps_its_order(tmp_path):
    store = Store(tmp_path / "history.sqlite3")
    session = store.create_session()
    ids = [  # unlinked messages: each follows the one before it
        store.add_message(Message(None, session.id, role, text)).id
        for role, text in (("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d"))
    ]
    store.delete_message(ids[1])
    assert [m.content for m in store.messages(session.id)] == ["a", "c", "d"]
    store.delete_message(ids[0])
    assert [m.content for m in store.messages(session.id)] == ["c", "d"]
    store.close()


def test_forks_get_titles_of_their_own_that_a_narrow_list_still_tells_apart(app, qtbot):
    """Issue 61: forked chats had identical, cut-off titles ("<long title>… (fork)")."""
    window, controller = app.window, app.controller
    long_question = "How do I add two numbers in Python without losing precision on floats?"
    ask(qtbot, app, long_question, answer_events(SIMPLE))
    original = controller.session
    titles = []
    for _ in range(2):
        controller.open_session(original.id)
        choose(qtbot, window.transcript.views[1], "Fork chat from here")
        titles.append(controller.session.title)
    choose(qtbot, window.transcript.views[1], "Fork chat from here")  # a fork of a fork
    titles.append(controller.session.title)
    assert [t.split(":")[0] for t in titles] == ["Fork 1", "Fork 2", "Fork 3"]
    assert all(t[len("Fork 1: ") :].startswith("How do I add two") for t in titles)
    assert len(set(titles)) == 3 and all(len(t) <= 48 for t in titles)


def test_inspector_labels_stay_apart_after_a_question_is_deleted(app, qtbot):
    window = app.window
    ask(qtbot, app, "one", answer_events(SIMPLE))
    ask(qtbot, app, "two", answer_events(SIMPLE))
    window.message_menu.confirm_delete_message = lambda what, text: True
    choose(qtbot, window.transcript.views[2], "Delete question…")
    labels = [window.inspector.list.item(i).text() for i in range(window.inspector.list.count())]
    assert len(labels) == 2
    assert len({label.split(" · ")[0] for label in labels}) == 2  # "#1" and "#2", not "#1" twice
