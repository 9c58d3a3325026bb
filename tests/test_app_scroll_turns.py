"""Scrolling a long chat keeps each event-loop turn short: the transcript's steps stop before
a card that would carry them past their budget, a released card is freed at once (not left
to Python's cycle collector), an open chat is left out of the collector's full passes, and a
card's button row answers Qt's repeated height questions from what it already placed.
Counted, never timed: the clock is a fake one."""

from __future__ import annotations

import gc
import weakref

from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtWidgets import QToolButton, QWidget

import app.views.transcript as transcript_module
from app.storage.store import Store
from app.views.flow_layout import FlowLayout
from app.views.transcript import STEP_S, TranscriptView

from .test_app_more import long_chat


class FakeClock:
    """``time`` for the transcript: a clock that moves only when a card is built."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def opened_chat(qtbot, tmp_path, turns: int) -> TranscriptView:
    store = Store(tmp_path / "chats.sqlite3")
    transcript = TranscriptView()
    qtbot.addWidget(transcript)
    transcript.resize(900, 700)
    transcript.show()
    transcript.set_messages(store.messages(long_chat(store, turns).id))
    return transcript


def test_a_step_stops_before_a_card_that_would_carry_it_past_its_budget(
    qtbot, tmp_path, monkeypatch
):
    clock = FakeClock()
    monkeypatch.setattr(transcript_module, "time", clock)
    card_s = 0.4 * STEP_S  # two cards fit in a step's budget, a third would not
    steps, built_in_step = [0], []
    real_step, real_fill = TranscriptView._step, TranscriptView._fill

    def counted_step(self, budget):
        steps[0] += 1
        real_step(self, budget)

    def costly_fill(self, slot, role=None):
        clock.now += card_s
        built_in_step.append(steps[0])
        return real_fill(self, slot, role)

    monkeypatch.setattr(TranscriptView, "_step", counted_step)
    monkeypatch.setattr(TranscriptView, "_fill", costly_fill)
    transcript = opened_chat(qtbot, tmp_path, 40)
    qtbot.waitUntil(lambda: len(built_in_step) >= 8, timeout=10000)

    cards_per_step = [built_in_step.count(step) for step in set(built_in_step)]
    assert max(cards_per_step) * card_s <= STEP_S, cards_per_step  # never past the budget
    assert len(cards_per_step) >= 4  # the cards came in several steps, none was dropped
    assert len(transcript._views) == len(built_in_step)


def test_a_released_card_is_freed_as_soon_as_qt_deletes_it(qtbot, tmp_path):
    transcript = opened_chat(qtbot, tmp_path, 3)
    slot = transcript._slots[-1]
    qtbot.waitUntil(lambda: slot.view is not None and slot.view.isVisible(), timeout=10000)
    card = slot.view
    gc.collect()
    gc.disable()  # what frees the card must be its last reference going, not a collection
    try:
        freed = []
        weakref.finalize(card, freed.append, True)
        del card
        slot.release()
        QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
        assert freed == [True]  # with a reference cycle it waited for the cycle collector
    finally:
        gc.enable()


def test_a_step_queued_for_a_transcript_deleted_before_it_runs_is_dropped(qtbot, tmp_path):
    import shiboken6

    store = Store(tmp_path / "chats.sqlite3")
    transcript = TranscriptView()  # not qtbot's to close: it is deleted here
    transcript.resize(900, 700)
    transcript.show()
    transcript.set_messages(store.messages(long_chat(store, 40).id))
    assert transcript._step_queued  # cards left to build: a step waits for the next turn
    shiboken6.delete(transcript)  # as a test's or a window's teardown deletes it
    # the queued step must not run on the deleted view (pytest-qt fails the test on an
    # exception in the event loop: "Internal C++ object (TranscriptView) already deleted")
    qtbot.wait(50)


def test_a_button_row_answers_a_width_asked_again_from_what_it_placed(qtbot, monkeypatch):
    row = QWidget()
    qtbot.addWidget(row)
    flow = FlowLayout(row)
    buttons = [QToolButton(row) for _ in range(4)]
    for button in buttons:
        button.setText("Regenerate")
        flow.addWidget(button)
    row.show()
    placed = []
    real_place = FlowLayout._place

    def counted_place(self, rect, move):
        placed.append(rect.width())
        return real_place(self, rect, move)

    monkeypatch.setattr(FlowLayout, "_place", counted_place)
    one_row = buttons[0].sizeHint().width() * 4 + 3 * flow.spacing()
    tall = flow.heightForWidth(one_row - 1)
    assert [flow.heightForWidth(one_row - 1) for _ in range(5)] == [tall] * 5
    assert placed == [one_row - 1]  # asked six times, placed once
    short = flow.heightForWidth(one_row)
    assert short < tall

    buttons[3].hide()  # the row changed: its heights are placed again
    assert flow.heightForWidth(one_row - 1) == short
    buttons[3].show()
    assert flow.heightForWidth(one_row - 1) == tall


def test_an_open_chat_is_left_out_of_the_cycle_collectors_full_passes(qtbot, tmp_path):
    store = Store(tmp_path / "chats.sqlite3")
    messages = store.messages(long_chat(store, 20).id)
    transcript = TranscriptView()
    qtbot.addWidget(transcript)
    frozen = gc.get_freeze_count()
    transcript.set_messages(messages)
    qtbot.waitUntil(lambda: gc.get_freeze_count() >= frozen + len(messages), timeout=5000)
    tracked = gc.get_objects()  # the generations a collection walks
    assert not any(tracked_object is messages[0] for tracked_object in tracked)
