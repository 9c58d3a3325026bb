"""Finding your way in a long chat by keyboard: Ctrl+F finds within the open chat, and a
chat picked from a search opens at its match (issue 61, item 13)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.storage.store import Message

from .test_app_more import long_chat, settled_at_bottom
from .test_app_views import app, loop, wait  # noqa: F401


def focused():
    return QApplication.focusWidget()


def press(qtbot, key, modifiers=Qt.NoModifier):
    qtbot.keyClick(focused(), key, modifiers)


def with_needles(store, turns: int, at: list[int]):
    """A long chat whose questions number ``at`` mention 'the needle'."""
    session = long_chat(store, turns)
    messages = store.messages(session.id)
    for index in at:
        question = messages[2 * index]
        question.content = f"Where is the needle? ({index})"
        store.db.execute(
            "UPDATE messages SET content = ? WHERE id = ?", (question.content, question.id)
        )
    store.db.commit()
    return session


def in_sight(transcript, view) -> bool:
    """Some of ``view``'s text is inside the transcript's viewport."""
    top = view.body.mapTo(transcript.viewport(), view.body.rect().topLeft()).y()
    return top < transcript.viewport().height() and top + view.body.height() > 0


def marked(view) -> str:
    marks = view.body.extraSelections()
    return marks[0].cursor.selectedText() if marks else ""


def test_ctrl_f_finds_within_the_chat_and_steps_through_the_matches(app, qtbot):
    window, controller = app.window, app.controller
    session = with_needles(app.store, 60, at=[2, 30])
    controller.open_session(session.id)
    transcript = window.transcript
    settled_at_bottom(qtbot, transcript)
    window.input.setFocus()
    press(qtbot, Qt.Key_F, Qt.ControlModifier)
    bar = window.find_bar
    assert bar.isVisible() and focused() is bar.edit
    qtbot.keyClicks(focused(), "NEEDLE")
    assert bar.count.text() == "1 of 2"
    first = transcript.view_of(controller.messages[4].id)
    assert marked(first) == "needle" and in_sight(transcript, first)
    press(qtbot, Qt.Key_Return)
    assert bar.count.text() == "2 of 2"
    second = transcript.view_of(controller.messages[60].id)
    assert marked(second) == "needle" and in_sight(transcript, second)
    press(qtbot, Qt.Key_Return, Qt.ShiftModifier)
    assert bar.count.text() == "1 of 2" and in_sight(
        transcript, transcript.view_of(first.message_id)
    )
    qtbot.keyClicks(focused(), "no such words")
    assert bar.count.text() == "not found"
    press(qtbot, Qt.Key_Escape)
    assert not bar.isVisible() and focused() is window.input


def test_a_chat_picked_from_a_search_opens_at_its_match(app, qtbot):
    window, controller = app.window, app.controller
    other = app.store.create_session("Another chat")
    question = Message(None, other.id, "user", "Nothing to see here")
    app.store.add_message(question)
    app.store.link(question, 0)
    session = with_needles(app.store, 60, at=[3])
    controller.open_session(other.id)
    panel = window.sessions_panel
    panel.search.setFocus()
    qtbot.keyClicks(focused(), "needle")
    assert panel.list.count() == 2  # the open chat (it stays listed) and the one that matched
    panel.list.setFocus()
    press(qtbot, Qt.Key_Down)  # onto the chat, as the arrow keys pick one
    qtbot.waitUntil(lambda: controller.session.id == session.id)
    view = window.transcript.view_of(controller.messages[6].id)
    assert window.find_bar.isVisible() and window.find_bar.count.text() == "1 of 1"
    assert marked(view) == "needle" and in_sight(window.transcript, view)


def test_dragging_the_scroll_bar_to_the_top_lands_on_the_first_message(app, qtbot):
    window, controller = app.window, app.controller
    controller.open_session(long_chat(app.store, 125).id)  # 250 messages
    transcript = window.transcript
    settled_at_bottom(qtbot, transcript)
    bar = transcript.verticalScrollBar()
    bar.setSliderDown(True)  # the reader grabs the handle and drags it to the top
    bar.setSliderPosition(bar.minimum())
    bar.setSliderDown(False)
    qtbot.waitUntil(lambda: not transcript._pending or bar.value() > 0, timeout=20000)
    qtbot.wait(50)
    first = transcript.view_of(controller.messages[0].id)
    assert bar.value() == bar.minimum() and in_sight(transcript, first)
