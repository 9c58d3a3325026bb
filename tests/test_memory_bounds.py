"""The growing drafter indexes stay within a stated memory budget.

Budget: each of ngram-cache's cross-chat memory and the suffix drafter's index is sized
to hold about 64 MB of Python objects at most. The bytes one n-gram or one indexed token
takes are measured here with tracemalloc on a small stream, then multiplied by the most
the store may hold; ``python -m tests.measure_drafter_memory`` measures whole histories
(with a 1M-token history: about 58 MB and 35 MB held, peaks of 76 MB and 57 MB while
evicting or rebuilding).
"""

import tracemalloc

import numpy as np

from engine.drafters import make_drafter, ngram_cache
from engine.drafters.ngram_cache import NgramCounts
from engine.drafters.suffix import SuffixAutomaton
from engine.settings import DraftSettings

BUDGET_BYTES = 64 << 20


def stream(length, vocab=49152):
    return (np.random.default_rng(0).zipf(1.2, length) % vocab).tolist()


def bytes_per_item(build, count):
    tracemalloc.start()
    items = build()
    used = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return used / count(items)


def test_the_cross_chat_memory_is_bounded_in_memory_not_only_when_saved(private_dirs, monkeypatch):
    monkeypatch.setattr(ngram_cache, "MAX_ENTRIES", 200)
    d = make_drafter(DraftSettings(drafter="ngram-cache", adaptive=False))
    d.attach_model("m")
    d.reset([1])
    tokens = stream(3000)
    for start in range(0, len(tokens), 4):  # as generated, a few tokens a pass; never saved
        d.observe(tokens[start : start + 4])
        assert len(d.store.counts) <= 200 + 200 // 4 + 4 * 4
    assert not ngram_cache.dynamic_cache_path("m").exists()
    d.store.dirty = False


def test_eviction_keeps_the_most_used_ngrams():
    counts = NgramCounts.from_tokens([7, 8] * 50 + list(range(100, 160)), 1, 2)
    counts.evict(3)
    assert len(counts) == 3 and (7, 8) in counts.parts and (7,) in counts.parts
    assert set(counts.best) == set(counts.parts)


def test_the_cross_chat_memory_budget():
    per_ngram = bytes_per_item(lambda: NgramCounts.from_tokens(stream(20000), 1, 4), len)
    most = ngram_cache.MAX_ENTRIES + ngram_cache.MAX_ENTRIES // 4
    assert per_ngram * most <= BUDGET_BYTES, f"{per_ngram:.0f} bytes an n-gram"


def test_the_suffix_index_budget_and_cap():
    def build():
        sam = SuffixAutomaton()
        for token in stream(20000):
            sam.append(token)
        return sam

    per_token = bytes_per_item(build, len)
    d = make_drafter(DraftSettings(drafter="suffix", adaptive=False))
    assert per_token * d.max_tokens <= BUDGET_BYTES, f"{per_token:.0f} bytes a token"
    small = make_drafter(
        DraftSettings(drafter="suffix", adaptive=False, options={"max_tokens": 64})
    )
    small.reset([1, 2, 3])
    for token in stream(500):
        small.observe([token])
        assert len(small.sam) <= 64


def test_eviction_also_bounds_the_follower_counts():
    counts = NgramCounts()
    for follower in range(50):  # one much used n-gram with many followers
        counts.add((1,), follower, 3)
    for n in range(2, 40):  # and many n-grams with one follower each
        counts.add((n,), 0, 1)
    assert counts.pairs() == 50 + 38
    best = counts.best[(1,)][1]
    counts.evict(30, max_pairs=40)
    assert counts.pairs() <= 40 and len(counts) == 30
    assert len(counts.parts[(1,)]) == ngram_cache.FOLLOWERS_KEPT  # rarest followers forgotten,
    assert counts.best[(1,)] == [150, best, 3] and best in counts.parts[(1,)]  # not its stats
    counts.evict(5)
    assert len(counts) == 5


def test_the_store_counts_followers_now_and_then(tmp_path, monkeypatch):
    monkeypatch.setattr(ngram_cache, "MAX_ENTRIES", 10)
    store = ngram_cache._DynamicStore(tmp_path / "m.json")
    tokens = stream(3 * ngram_cache.PAIR_CHECK, vocab=300)
    for start in range(0, len(tokens), 64):
        store.counts.update(tokens[: start + 64], start, 1, 1)
        store.bound(64)
        if store.since_check == 0:  # just counted: within the budget
            assert store.counts.pairs() <= ngram_cache.PAIRS_PER_ENTRY * 12
