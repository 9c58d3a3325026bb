"""A long chat's history is read as it is shown: the text of every message at once, each
answer's tokens (its highlights) only when its card is built."""

from __future__ import annotations

from app.storage.store import Store

from .test_app_more import ANSWER_PIECES, long_chat


def token_reads(statements: list[str]) -> int:
    return sum("FROM tokens" in statement for statement in statements)


def test_opening_a_chat_reads_an_answers_tokens_only_when_it_is_used(tmp_path):
    store = Store(tmp_path / "chats.sqlite3")
    session = long_chat(store, 3)
    statements: list[str] = []
    store.db.set_trace_callback(statements.append)
    messages = store.messages(session.id)
    assert [m.role for m in messages] == ["user", "assistant"] * 3
    assert token_reads(statements) == 0  # the text and figures only

    answer = messages[1]
    spans = answer.provenance.draft_spans()
    assert token_reads(statements) == 1
    assert answer.provenance.text == "".join(ANSWER_PIECES) and spans
    assert len(answer.provenance.tokens) == len(ANSWER_PIECES)
    assert answer.provenance.draft_spans() == spans and token_reads(statements) == 1  # kept
    answer.drop_read_provenance()  # its card scrolled far away
    assert answer.provenance.draft_spans() == spans and token_reads(statements) == 2

    replaced = messages[3]
    replaced.provenance = None  # a value given replaces what would have been read
    replaced.drop_read_provenance()
    assert replaced.provenance is None and token_reads(statements) == 2
    assert messages[0].provenance is None  # a question has none


def test_an_answer_read_after_the_history_closed_shows_its_text_without_highlights(tmp_path):
    store = Store(tmp_path / "chats.sqlite3")
    messages = store.messages(long_chat(store, 1).id)
    store.close()  # as when the app quits while a card is still to be built
    provenance = messages[1].provenance
    assert provenance.text == "".join(ANSWER_PIECES)
    assert provenance.tokens == [] and provenance.draft_spans() == []
