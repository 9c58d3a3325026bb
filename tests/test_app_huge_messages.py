"""A chat database holding 50 MB messages opens at once: a card shows the first
``SHOWN_CHARS`` of a message and says so (Copy takes all of it), so opening costs the same
whatever a message holds. The old window rendered every character (a 1 MB message took 11 s,
50 MB ones never opened)."""

from __future__ import annotations

import pytest

from app.storage.store import Message, Store
from app.views import transcript
from app.views.transcript import SHOWN_CHARS

from .test_app_trust import build  # noqa: F401  (the app on files the test prepares)
from .test_app_views import loop  # noqa: F401

MESSAGE_BYTES = 50_000_000
NOTE_CHARS = 200  # room for the note that says the card shows the beginning


@pytest.fixture
def huge_chat(tmp_path):
    store = Store(tmp_path / "data" / "draftless.sqlite3")
    session = store.create_session("huge")
    line = "The quick brown fox jumps over the lazy dog. " * 2 + "\n"
    text = (line * (MESSAGE_BYTES // len(line) + 1))[:MESSAGE_BYTES]
    store.add_message(Message(None, session.id, "user", text))
    store.add_message(Message(None, session.id, "assistant", text, finish_reason="stop"))
    store.close()
    return text


def test_a_chat_of_50_mb_messages_opens_rendering_only_their_beginnings(
    build,  # noqa: F811
    huge_chat,
    qtbot,
    monkeypatch,
):
    rendered = []
    render = transcript.render

    def counted(document, text, *args, **kwargs):
        rendered.append(len(text))
        assert len(text) <= SHOWN_CHARS + NOTE_CHARS, f"rendered {len(text):,} characters"
        return render(document, text, *args, **kwargs)

    monkeypatch.setattr(transcript, "render", counted)
    application = build()
    window = application.window
    qtbot.waitUntil(lambda: len(window.transcript.views) == 2, timeout=30_000)
    question, answer = window.transcript.views
    assert answer.text == huge_chat  # the message itself is whole
    shown = answer.body.toPlainText()
    assert f"{MESSAGE_BYTES:,} characters in all" in shown and len(shown) < 2 * SHOWN_CHARS
    assert rendered and max(rendered) <= SHOWN_CHARS + NOTE_CHARS
    copied = []
    answer.copyRequested.connect(copied.append)
    answer.copy_button.click()
    assert copied == [huge_chat]  # Copy takes all of it
    assert all(slot.height() < transcript.QWIDGETSIZE_MAX for slot in window.transcript._slots)
