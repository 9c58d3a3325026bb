"""The app's pure models: provenance, Markdown alignment, settings, store, footer."""

from __future__ import annotations

import json
import re

import pytest

from app.presenters.livestats import LiveStats, footer_details, footer_text
from app.storage.provenance import DRAFT, MIXED, TARGET, Provenance
from app.storage.settings import AppSettings, SettingsStore
from app.storage.store import Message, Store
from app.views.render import Palette, align, highlighted_positions, render


def add(p: Provenance, text: str, draft: bool, pass_index: int = 0, position=None):
    p.add_token(
        len(p.tokens), text, draft, pass_index, position if draft else None, "prompt-lookup"
    )


# provenance ---------------------------------------------------------------------------------
def test_one_character_from_several_tokens_is_drafted_only_if_all_were():
    p = Provenance()
    add(p, "a", True, 0, 0)
    add(p, "", True, 0, 1)  # first byte of "é": text held back
    add(p, "é", True, 0, 2)  # all bytes drafted
    add(p, "", True, 1, 0)
    add(p, "€", False, 1)  # last byte is the target's own token
    assert p.text == "aé€"
    assert [p.kind_at(i) for i in range(3)] == [DRAFT, DRAFT, MIXED]
    assert p.draft_mask() == [True, True, False]
    assert p.draft_spans() == [(0, 2)]
    assert [t.token for t in p.tokens_at(2)] == [3, 4]
    assert "2 tokens" in p.tooltip(2) and "pass 2" in p.tooltip(2)


def test_one_token_several_characters_share_its_provenance():
    p = Provenance()
    add(p, "Hello", False, 0)
    add(p, " world", True, 1, 0)
    assert p.draft_mask() == [False] * 5 + [True] * 6
    assert p.tokens_at(7)[0].describe() == (
        "pass 2 · drafter prompt-lookup · accepted draft token, position 1 in the draft"
    )
    assert p.tokens_at(0)[0].describe().endswith("the target model's own token")


def test_final_flush_joins_the_pending_tokens_and_round_trips():
    p = Provenance()
    add(p, "ab", True, 0, 0)
    add(p, "", True, 0, 1)  # a single space held back by the detokenizer
    p.finish("ab ")
    assert p.text == "ab " and p.kind_at(2) == DRAFT
    q = Provenance.from_tokens(p.text, p.tokens)
    assert q.runs == p.runs and q.draft_mask() == p.draft_mask()
    r = Provenance()
    add(r, "x", False)
    r.finish("xy")  # nothing pending: the tail joins the last group
    assert r.text == "xy" and r.kind_at(1) == TARGET


# rendering ----------------------------------------------------------------------------------
MARKDOWN = """# Reverse

Use **slicing** and `s[::-1]`, see [the docs](https://docs.python.org/3/library/stdtypes.html).

1. first
2. second *item*

```python
def rev(s):
    return s[::-1]
```
"""


def test_alignment_maps_rendered_characters_to_their_source(qapp):
    from PySide6.QtGui import QColor, QTextDocument

    document = QTextDocument()
    mapping = render(document, MARKDOWN, None, palette=Palette(QColor("yellow"), QColor("#eee")))
    rendered = document.toPlainText()
    assert "**" not in rendered and "https://" not in rendered and "```" not in rendered
    mapped = 0
    for position, source in mapping.by_position.items():
        char = document.characterAt(position)
        assert MARKDOWN[source] == char or (MARKDOWN[source].isspace() and char.isspace())
        mapped += 1
    visible = sum(not c.isspace() for c in rendered)
    assert mapped >= visible  # every visible character found its source
    start = MARKDOWN.index("slicing")
    assert sorted(s for s in mapping.by_position.values() if start <= s < start + 7) == list(
        range(start, start + 7)
    )


def test_markdown_highlight_follows_provenance_and_code_is_monospace(qapp):
    from PySide6.QtGui import QColor, QTextDocument

    p = Provenance()
    draft_words = {"slicing", "return"}
    for piece in re.findall(r"\w+|\W", MARKDOWN):
        add(p, piece, piece in draft_words, 0, 0)
    p.finish(MARKDOWN)
    assert p.text == MARKDOWN
    document = QTextDocument()
    mapping = render(document, MARKDOWN, p, palette=Palette(QColor("yellow"), QColor("#eee")))
    painted = highlighted_positions(document)
    assert "".join(document.characterAt(i) for i in painted) == "slicingreturn"
    assert all(p.kind_at(mapping.source_index(i)) == DRAFT for i in painted)
    code = document.find("return")
    assert (
        code.charFormat().fontFixedPitch() or "mono" in code.charFormat().fontFamilies()[0].lower()
    )
    plain = QTextDocument()
    render(plain, MARKDOWN, p, highlight=False, palette=Palette(QColor("yellow"), QColor("#eee")))
    assert highlighted_positions(plain) == []


def test_alignment_survives_entities_and_long_link_targets():
    source = "a &lt; b and [x](" + "u" * 300 + ") then y"
    rendered = "a < b and x then y"
    mapping = align(source, rendered)
    assert mapping[rendered.index("then")] == source.index("then")
    assert mapping[rendered.index("<")] is None  # decoded entity: no source character
    assert mapping[rendered.index("b")] == source.index("b")


# settings -----------------------------------------------------------------------------------
def test_settings_persist_and_bad_files_fall_back_with_a_message(tmp_path):
    store = SettingsStore(tmp_path)
    assert store.load() == AppSettings() and store.message is None
    changed = AppSettings(drafter="frequency", draft_count=9, temperature=0.7, system_prompt="Hi")
    store.save(changed)
    assert SettingsStore(tmp_path).load() == changed
    (tmp_path / "settings.json").write_text("{not json")
    reloaded = SettingsStore(tmp_path)
    assert reloaded.load() == AppSettings() and "could not be read" in reloaded.message
    (tmp_path / "settings.json").write_text(
        json.dumps({"draft_count": 500, "top_p": "x", "ngram_order": 3})
    )
    partial = SettingsStore(tmp_path)
    settings = partial.load()
    assert settings.draft_count == AppSettings.draft_count and settings.ngram_order == 3
    assert "draft_count" in partial.message and "top_p" in partial.message


def test_settings_build_the_engine_request():
    settings = AppSettings(
        drafter="none",
        draft_count=3,
        ngram_order=5,
        ngram_min=2,
        temperature=0.5,
        top_p=0.9,
        max_tokens=77,
        system_prompt="Be brief.",
        model="/models/x",
    )
    request = settings.request([{"role": "user", "content": "hi"}], chat_id="s1").validated()
    assert request.messages[0] == {"role": "system", "content": "Be brief."}
    assert request.messages[-1] == {"role": "user", "content": "hi"}
    assert (
        request.draft.drafter,
        request.draft.draft_count,
        request.draft.ngram_order,
        request.draft.ngram_min,
    ) == ("none", 3, 5, 2)
    assert (request.sampling.temperature, request.sampling.top_p) == (0.5, 0.9)
    assert (request.max_tokens, request.chat_id, request.model) == (77, "s1", "/models/x")
    assert AppSettings(draft_count=65).problems()


# store --------------------------------------------------------------------------------------
def test_store_keeps_sessions_messages_and_provenance(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    session = store.create_session("Greetings")
    store.add_message(Message(None, session.id, "user", "say 100%"))
    p = Provenance()
    add(p, "ab", True, 0, 0)
    add(p, "c", False, 0)
    store.add_message(
        Message(
            None,
            session.id,
            "assistant",
            "abc",
            "stop",
            "tiny",
            {"tokens_per_pass": 1.5},
            {"tokens_per_s": 3.0},
            p,
        )
    )
    store.close()
    again = Store(tmp_path / "db.sqlite3")
    assert again.notice is None
    messages = again.messages(session.id)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[1].provenance.draft_mask() == [True, True, False]
    assert messages[1].stats == {"tokens_per_pass": 1.5}
    assert [s.title for s in again.sessions("100%")] == ["Greetings"]
    assert again.sessions("nothing like it") == []
    again.delete_session(session.id)
    assert again.db.execute("SELECT COUNT(*) FROM tokens").fetchone()[0] == 0


def test_corrupt_database_is_moved_aside_with_a_message(tmp_path):
    path = tmp_path / "db.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    store = Store(path)
    assert "moved aside" in store.notice
    aside = [f for f in tmp_path.iterdir() if ".corrupt-" in f.name]
    assert aside and aside[0].read_bytes().startswith(b"this is not")
    assert store.sessions() == []
    store.create_session("fresh")  # the new database works
    assert [s.title for s in Store(path).sessions()] == ["fresh"]


# numbers ------------------------------------------------------------------------------------
def test_live_stats_count_passes_as_the_engine_does():
    from engine.events import PassEvent
    from engine.stats import DecodeStats

    engine_stats, live = DecodeStats(drafter="x"), LiveStats()
    for drafted, accepted, emitted, ended in ((4, 3, 4, False), (4, 0, 1, False), (2, 2, 2, True)):
        counted = engine_stats.record_pass(drafted, accepted, emitted, 0.1, ended)
        live.record(PassEvent(0, drafted, *counted, 0.1, engine_stats.tokens_per_pass))
    # not in a PassEvent; the DoneEvent brings them (tokens per pass counts the end token)
    counting = {"drafter", "ended", "tokens_per_pass"}
    assert {k: v for k, v in live.stats.to_dict().items() if k not in counting} == {
        k: v for k, v in engine_stats.to_dict().items() if k not in counting
    }
    assert (live.last_emitted, live.tokens_per_pass) == (1, 6 / 3)
    assert live.tokens_per_s == pytest.approx(20.0)
    live.finish(engine_stats.to_dict(), {"decode_s": 0.25, "tokens_per_s": 24.0})
    assert live.tokens_per_s == pytest.approx(24.0)
    figures = (6, engine_stats.to_dict(), {"tokens_per_s": 24.0})
    assert footer_text(*figures) == "2.3 tokens/pass · 40% of drafts accepted"
    assert live.tokens_per_pass == pytest.approx(7 / 3)  # the end of the answer counted
    assert footer_details(*figures).split("\n") == [
        "6 tokens",
        "3 passes",
        "2.3 tokens/pass",
        "4 of 10 drafts accepted (40%)",
        "24.0 tok/s",
        "x",
    ]
