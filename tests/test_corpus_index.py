"""The corpus index (``engine/drafters/_corpus_index.py``): its search against a brute-force
scan, its file's checks and bounds, and suffix-static's ``index`` row, lossless."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.drafters import make_drafter
from engine.drafters._corpus_index import (
    DEPTH,
    CorpusIndex,
    CorpusIndexError,
    encode,
    longest_match,
    suffix_array,
)
from engine.settings import DraftSettings

from .identity import reference_greedy, run_with_policy
from .tiny_model import make_tiny_llama

pytestmark = pytest.mark.usefixtures("private_dirs")

VOCAB = 256
ids = st.lists(st.integers(0, 4), min_size=1, max_size=60)


def brute_longest(corpus: list[int], tail: list[int], longest: int) -> int:
    found = 0
    for length in range(1, min(longest, len(tail)) + 1):
        pattern = tail[-length:]
        if any(corpus[i : i + length] == pattern for i in range(len(corpus))):
            found = length
    return found


@settings(max_examples=200, deadline=None)
@given(ids, st.integers(1, 8))
def test_the_suffix_array_sorts_every_suffix_by_its_first_depth_tokens(corpus, depth):
    order = suffix_array(np.array(corpus), depth).tolist()
    expected = sorted(range(len(corpus)), key=lambda p: (corpus[p : p + depth], p))
    assert order == expected


@settings(max_examples=200, deadline=None)
@given(ids, ids, st.integers(1, 12))
def test_longest_match_and_its_range_agree_with_a_scan(corpus, tail, longest):
    order = suffix_array(np.array(corpus)).tolist()
    length, first, end = longest_match(encode(corpus, 2), order, 2, tail, longest)
    assert length == brute_longest(corpus, tail, longest)
    if length:
        starts = {p for p in range(len(corpus)) if corpus[p : p + length] == tail[-length:]}
        assert set(order[first:end]) == starts


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=20), min_size=1, max_size=5), ids)
def test_a_draft_follows_the_usual_continuation_of_the_longest_match(answers, history):
    index = CorpusIndex.build(answers, VOCAB)
    length, row, shares = index.draft(history, 6, 1, 0.0)
    corpus = [t for a in answers for t in (*a, VOCAB)]
    assert length == brute_longest(corpus, history, DEPTH - 1)
    context = history[-length:] if length else []
    for token, (share, seen) in zip(row, shares):  # each the most frequent follower
        followers = [
            corpus[p + len(context)]
            for p in range(len(corpus) - len(context))
            if corpus[p : p + len(context)] == context
        ]
        assert seen == len(followers) and token != VOCAB
        assert followers.count(token) == max(followers.count(t) for t in set(followers))
        assert share == followers.count(token) / len(followers)
        context.append(token)


def test_a_file_is_checked_and_bounded(tmp_path):
    index = CorpusIndex.build([[1, 2, 3], [1, 2, 4]], VOCAB, "tok")
    index.save(tmp_path / "good.npz")
    again = CorpusIndex.load(tmp_path / "good.npz")
    assert again.draft([9, 1], 4, 1, 0.0) == index.draft([9, 1], 4, 1, 0.0)
    assert again.nbytes <= 7 * len(again.order)
    arrays = dict(np.load(tmp_path / "good.npz"))
    for name, value in (("order", arrays["order"][::-1] * 0), ("tokens", arrays["tokens"] + 300)):
        np.savez(tmp_path / "bad.npz", **{**arrays, name: value})
        with pytest.raises(CorpusIndexError):
            CorpusIndex.load(tmp_path / "bad.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(CorpusIndexError):
        CorpusIndex.load(tmp_path / "junk.npz")


def test_greedy_output_with_index_rows_equals_plain():
    model = make_tiny_llama(seed=1)
    prompt = [(i * 37 + 11) % 250 + 3 for i in range(30)]
    expected = reference_greedy(model, prompt, 40)
    wrong = [expected[10], expected[11], expected[12], (expected[13] + 1) % VOCAB]
    index = CorpusIndex.build([expected[:10] + expected[14:30], wrong, wrong], VOCAB)
    for adaptive in (False, True):
        settings = DraftSettings(
            drafter="suffix-static",
            draft_count=6,
            ngram_min=1,
            adaptive=adaptive,
            options={"index": True, "memory": False},
        )
        drafter = make_drafter(settings.validated())
        drafter.attach_model("test-model", corpus_index=index)
        assert drafter.index is index
        got, results = run_with_policy(
            model, prompt, 40, settings.validated(), None, drafter=drafter
        )
        assert got == expected, adaptive
        assert sum(r.accepted for r in results) > 0, "no index row was ever accepted"
