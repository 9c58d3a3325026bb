"""Every model gets its `suffix-static` table, keyed by its tokenizer: a model whose tokenizer
is the built-in model's uses the shipped table, whatever its weights; a tokenizer with no
shipped table gets one built from the shipped corpus of public answers, between requests
(inline on the command line), cached under its tokenizer's digest (shared by every model of
that tokenizer; a bad cache file is kept aside and built again), and drafts from it; the
inspector's replay drafts from the same table; vocabularies over 65,536 tokens pack; the
shipped corpus is exactly the shipped table's data."""

import json
import logging
import lzma
import shutil
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten

from engine import errors
from engine.drafters._static_table import StaticTable
from engine.events import DoneEvent
from engine.models import load_model
from engine.paths import cache_dir
from engine.runtime import static_ngrams
from engine.runtime.memory import EngineMemory
from engine.runtime.model_ngrams import model_key
from engine.runtime.replay import replay_request
from engine.runtime.service import EngineService
from engine.runtime.session import ChatSession
from engine.runtime.static_ngrams import (
    FollowerCounts,
    StaticTableBuild,
    corpus_digest,
    count_all,
    static_table_cache_path,
    tokenizer_digest,
    write_corpus,
)
from engine.settings import DraftSettings, GenerationRequest
from engine.tokens import output_size

from .test_bounded_work import run, table_notes, wait_until
from .tiny_model import make_tiny_llama, tiny_llama_config, write_tiny_llama

SHIPPED_CORPUS = static_ngrams.CORPUS_PATH
SHIPPED_TABLES = static_ngrams.TABLES_DIR
SUFFIX_STATIC = DraftSettings(
    drafter="suffix-static", draft_count=8, ngram_min=1, adaptive=False, options={"memory": False}
)
PHRASE = "the quick brown fox jumps over the lazy dog"
# a corpus of a few answers: the phrase often, so its contexts pass the counting rules
ANSWERS = [f"{PHRASE}, said answer {i}." for i in range(4)] + ["something else entirely"]


@pytest.fixture(autouse=True)
def small_corpus(private_dirs, tmp_path, monkeypatch):
    """A corpus of a few answers of the test's own, no shipped table for the tiny model, and
    warnings said afresh."""
    path = tmp_path / "corpus.txt.xz"
    write_corpus(ANSWERS, path)
    monkeypatch.setattr(static_ngrams, "CORPUS_PATH", path)
    monkeypatch.setattr(static_ngrams, "TABLES_DIR", tmp_path / "no-shipped-tables")
    monkeypatch.setattr(errors, "_said", set())
    return path


def chat(model_dir=None, chat_id=None, **kwargs):
    return GenerationRequest(
        messages=[{"role": "user", "content": "abcabcabc abcabc"}],
        model=None if model_dir is None else str(model_dir),
        draft=SUFFIX_STATIC,
        max_tokens=12,
        chat_id=chat_id,
        **kwargs,
    )


def cache_path(loaded, corpus):
    tokenizer = tokenizer_digest(loaded.path)
    return static_table_cache_path(tokenizer, output_size(loaded.model), corpus_digest(corpus))


def encode(loaded, text):
    return static_ngrams.encode_plain(loaded.tokenizer, text)


def drafts_the_phrase(drafter, loaded):
    """Whether ``drafter``, after "... the quick bro", proposes the phrase's next words."""
    drafter.reset(encode(loaded, "xyz the quick bro"))
    rest = encode(loaded, "wn fox j")  # 8 tokens
    return rest in drafter.propose(8).rows


def test_a_model_without_a_shipped_table_gets_one_built_between_requests(
    tiny_model_dir, tiny_loaded, small_corpus, monkeypatch, caplog
):
    steps = []  # per step: requests waiting or running during it
    finished_steps = []  # the step that finished the build, once it has returned
    real_step = StaticTableBuild.step
    service = EngineService()

    def step(self):
        requests = service.engine_thread.requests
        finished = real_step(self)
        steps.append(requests)
        if finished:
            finished_steps.append(len(steps))
        return finished

    monkeypatch.setattr(StaticTableBuild, "step", step)
    path = cache_path(tiny_loaded, small_corpus)
    try:
        with caplog.at_level(logging.WARNING, logger="engine"):
            first = run(service.generate(chat(tiny_model_dir, "c")))
        assert isinstance(first[-1], DoneEvent) and first[-1].finish_reason == "length"
        (note,) = table_notes(first)
        assert "static n-gram table" in note.message and "background" in note.message
        drafter = service.sessions.kept(None, "c").drafter
        assert not drafter.attached_static_table and drafter.table is None  # answered without
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # a note, no warning
        wait_until(lambda: finished_steps, "the table was never built")  # saved, step counted
        assert path.exists()
        assert len(steps) > 1 and all(requests == 0 for requests in steps), steps
        built = len(steps)
        again = run(service.generate(chat(tiny_model_dir, "c")))
        fresh = run(service.generate(chat(tiny_model_dir, "d")))
        for chat_id, events in (("c", again), ("d", fresh)):
            assert table_notes(events) == []
            drafter = service.sessions.kept(None, chat_id).drafter
            assert drafter.attached_static_table
            assert drafts_the_phrase(drafter, tiny_loaded)
            assert events[-1].tokens == first[-1].tokens  # lossless with or without it
        assert len(steps) == built  # built once
    finally:
        service.shutdown()


def test_the_command_line_builds_the_table_inline_and_drafts_from_it(tiny_loaded, small_corpus):
    session = ChatSession(tiny_loaded, EngineMemory())  # builds tables inline, as `generate`
    events = list(session.generate(chat().validated()))
    notes = table_notes(events)
    assert len(notes) > 2 and notes[-1].message == "Static n-gram table ready"
    assert notes[-1].done == notes[-1].total
    assert events[-1].finish_reason == "length"
    assert session.drafter.attached_static_table and cache_path(tiny_loaded, small_corpus).exists()
    assert drafts_the_phrase(session.drafter, tiny_loaded)
    # a new process reads it from its cache file
    cached = ChatSession(tiny_loaded, EngineMemory())
    assert table_notes(list(cached.generate(chat().validated()))) == []
    assert drafts_the_phrase(cached.drafter, tiny_loaded)


def good_table(loaded, corpus) -> bytes:
    path = cache_path(loaded, corpus)
    build = StaticTableBuild(loaded)
    while not build.step():
        pass
    data = path.read_bytes()
    path.unlink()
    return data


def table_of(vocab, answers) -> StaticTable:
    counts = FollowerCounts(1 << 21, min_count=1)
    for answer in answers:
        counts.add(answer)
    return StaticTable("planted", vocab, count_all(counts).orders)


PLANTED = {
    "not a table": lambda folder, good: b"not a table",
    "truncated": lambda folder, good: good[: len(good) // 2],
    "another vocabulary": lambda folder, good: table_of(100, [[1, 2, 3, 4]]),
    "ids outside the vocabulary": lambda folder, good: table_of(259, [[1, 2, 3, 4000]]),
}


@pytest.mark.parametrize("kind", list(PLANTED))
def test_a_bad_cache_file_is_kept_aside_and_the_table_built_again(
    kind, tiny_loaded, small_corpus, tmp_path, caplog
):
    good = good_table(tiny_loaded, small_corpus)
    planted = PLANTED[kind](tmp_path, good)
    path = cache_path(tiny_loaded, small_corpus)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(planted, StaticTable):
        planted.save(path)
        planted = path.read_bytes()
    else:
        path.write_bytes(planted)
    session = ChatSession(tiny_loaded, EngineMemory())
    with caplog.at_level(logging.WARNING, logger="engine"):
        events = list(session.generate(chat().validated()))
    assert events[-1].finish_reason == "length"
    kept = list(path.parent.glob(path.name + ".corrupt-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == planted
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1 and "Ignoring the static n-gram table" in said[0], said
    assert "built again" in said[0]
    assert session.drafter.attached_static_table and drafts_the_phrase(session.drafter, tiny_loaded)
    assert StaticTable.load(path).orders.keys() == {2, 3}  # built again and cached


def test_vocabularies_over_65536_tokens_pack_and_round_trip(tmp_path):
    vocab = 151_936  # Qwen 2.5's
    big = [151_935, 65_536, 131_072, 0, 70_000]  # 65,536 and 131,072 alias 0 in 16 bits
    answers = [big + [5, 6]] * 3 + [[0, 0, 0, 9, 9]] * 3
    counts = FollowerCounts(vocab, min_count=2)
    for answer in answers:
        counts.add(answer)
    table = count_all(counts).table("big")
    table.save(tmp_path / "big.npz")
    loaded = StaticTable.load(tmp_path / "big.npz")
    for read in (table, loaded):
        assert read.vocab_size == vocab
        assert read.follower([151_935, 65_536, 131_072]) == (0, 1.0)
        assert read.follower([65_536, 131_072, 0]) == (70_000, 1.0)
        assert read.follower([0, 70_000]) == (5, 1.0)
        assert read.follower([0, 0, 0]) == (9, 1.0)  # not confused with 65,536 / 131,072
        assert read.follower([7, 65_536, 131_072]) == (0, 1.0)  # by its last 2
    for n in (2, 3):
        assert all((a == b).all() for a, b in zip(table.orders[n], loaded.orders[n]))


def test_ids_outside_the_vocabulary_end_contexts_when_counting():
    counts = FollowerCounts(259, min_count=1)
    counts.add([1, 2, 3, 4000, 5, 6, 7])
    table = count_all(counts).table("t")
    assert table.follower([1, 2]) == (3, 1.0)
    assert table.follower([2, 3]) is None and table.follower([4000 % 259, 5]) is None
    assert table.follower([5, 6]) == (7, 1.0)


@pytest.mark.embedded
def test_the_shipped_corpus_builds_exactly_the_shipped_table(embedded_loaded, monkeypatch):
    monkeypatch.setattr(static_ngrams, "CORPUS_PATH", SHIPPED_CORPUS)
    shipped = StaticTable.load(SHIPPED_TABLES / "SmolLM2-135M-Instruct.npz")
    assert shipped.tokenizer == tokenizer_digest(embedded_loaded.path)
    build = StaticTableBuild(embedded_loaded)  # no shipped table here (fixture): built
    while not build.step():
        pass
    assert not build.unavailable and len(build.table) == len(shipped) == 535_942
    assert sum(int(order.drafts.sum()) for order in shipped.orders.values()) == 470_172
    for n in (2, 3):
        for built, ours in zip(build.table.orders[n], shipped.orders[n]):
            assert built.dtype == ours.dtype and np.array_equal(built, ours)


def test_a_vocabulary_too_large_to_pack_is_said_once_and_drafts_without(
    tiny_loaded, monkeypatch, caplog
):
    monkeypatch.setattr(static_ngrams, "output_size", lambda model: 3_000_000)
    with caplog.at_level(logging.WARNING, logger="engine"):
        for _ in range(2):
            build = StaticTableBuild(tiny_loaded)
            assert build.finished and build.table is None and build.step()
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1 and "3,000,000 tokens is over 2,097,152" in said[0], said


@pytest.mark.parametrize(
    "corpus", [b"not xz at all", lzma.compress(b"\xff\xfe not UTF-8"), b""], ids=str
)
def test_a_corpus_that_cannot_be_used_is_said_once_and_drafting_goes_on(
    corpus, tiny_loaded, small_corpus, caplog
):
    small_corpus.write_bytes(corpus)
    session = ChatSession(tiny_loaded, EngineMemory())
    with caplog.at_level(logging.WARNING, logger="engine"):
        for _ in range(2):
            events = list(session.generate(chat().validated()))
            assert events[-1].finish_reason == "length"
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1 and str(small_corpus) in said[0], said
    assert session.drafter.table is None


def test_models_of_one_tokenizer_share_one_built_table(tmp_path, small_corpus):
    first = load_model(str(write_tiny_llama(tmp_path / "tiny-bf16", seed=0)))
    second = load_model(str(write_tiny_llama(tmp_path / "tiny-4bit", seed=1)))  # other weights
    assert model_key(first) != model_key(second)
    assert table_notes(list(ChatSession(first, EngineMemory()).generate(chat().validated())))
    session = ChatSession(second, EngineMemory())  # another process: the first one's file
    events = list(session.generate(chat().validated()))
    assert table_notes(events) == []  # nothing built
    assert session.drafter.attached_static_table and drafts_the_phrase(session.drafter, second)
    assert len(list((cache_dir() / "static-ngrams").iterdir())) == 1


@pytest.mark.embedded
def test_a_model_of_the_built_in_tokenizer_uses_the_shipped_table_whatever_its_weights(
    embedded_loaded, tmp_path, monkeypatch
):
    """As a 4-bit copy made by ``mlx_lm convert -q``: other weights and config, the same
    tokenizer files (tokenizer_config.json rewritten as the converter rewrites it)."""
    monkeypatch.setattr(static_ngrams, "TABLES_DIR", SHIPPED_TABLES)
    folder = tmp_path / "smol4"
    folder.mkdir()
    for source in Path(embedded_loaded.path).iterdir():
        if source.suffix != ".safetensors" and source.name != "config.json":
            shutil.copy(source, folder / source.name)
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    settings.update(is_local=True, local_files_only=False)
    (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=2))
    vocab = output_size(embedded_loaded.model)
    model = make_tiny_llama(vocab)
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(tiny_llama_config(vocab)))
    monkeypatch.setattr(StaticTableBuild, "step", lambda self: pytest.fail("a table was built"))

    session = ChatSession(load_model(str(folder)), EngineMemory())
    events = list(session.generate(chat().validated()))
    assert table_notes(events) == [] and events[-1].finish_reason == "length"
    shipped = static_ngrams.shipped_table(tokenizer_digest(embedded_loaded.path), vocab)
    assert shipped is not None and session.drafter.table is shipped


def test_the_replay_of_a_suffix_static_answer_drafts_from_the_sessions_table(
    tiny_loaded, small_corpus
):
    request = chat().validated()
    answer = encode(tiny_loaded, "xyz the quick brown fox jumps")
    (unbuilt,) = replay_request(tiny_loaded, request, answer, False, [SUFFIX_STATIC])
    assert unbuilt.notes == ["without its static n-gram table (not built yet)"]
    memory = EngineMemory()
    list(ChatSession(tiny_loaded, memory).generate(request))  # builds it inline
    (replayed,) = replay_request(
        tiny_loaded, request, answer, False, [SUFFIX_STATIC], tables=memory.tables
    )
    assert replayed.exact
    # from "xyz t" on, the table knows the words: the 24 tokens after it come in 3 passes
    # (8 drafted tokens each, all taken), where suffix alone drafts none of them
    start = len(encode(tiny_loaded, "xyz t"))
    assert len(answer) == start + 24 and not any(replayed.from_draft[:start])
    assert replayed.stats.passes == start + 3, replayed.from_draft
    assert not any(unbuilt.from_draft), unbuilt.from_draft


def test_the_tokenizer_digest_follows_the_tokenizer_files_not_the_weights(tmp_path):
    first = write_tiny_llama(tmp_path / "a", seed=0)
    second = write_tiny_llama(tmp_path / "b", seed=1, layers=3)  # other weights and config
    digest = tokenizer_digest(first)
    assert tokenizer_digest(second) == digest
    settings_file = second / "tokenizer_config.json"
    settings = json.loads(settings_file.read_text())
    settings_file.write_text(json.dumps({**settings, "is_local": True}))  # as a converter saves it
    assert tokenizer_digest(second) == digest
    settings_file.write_text(json.dumps({**settings, "add_prefix_space": True}))  # splits otherwise
    assert tokenizer_digest(second) != digest
    settings_file.write_text(json.dumps(settings))
    backend = json.loads((second / "tokenizer.json").read_text())
    backend["pre_tokenizer"]["add_prefix_space"] = True
    (second / "tokenizer.json").write_text(json.dumps(backend))
    assert tokenizer_digest(second) != digest
