"""Issue 59's first question: does the target's own confidence separate the first tokens it
keeps from those it rejects? The AUC and its parts, the teacher-forced features, and the
replay's records of what the default judged."""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import pytest

from engine.bench.confidence import (
    RECENT,
    auc,
    class_rates,
    confidence_rows,
    first_tokens,
    logistic_scores,
    separation,
    within_classes,
)
from engine.policy.verify_cost import named_curves


def test_auc_counts_the_ordered_pairs_and_half_the_ties():
    assert auc([0.1, 0.2, 0.2, 0.9], [False, True, False, True]) == 0.875
    assert auc([1, 2, 3, 4], [False, False, True, True]) == 1.0
    assert auc([4, 3, 2, 1], [False, False, True, True]) == 0.0
    assert auc([5, 5, 5], [True, False, True]) == 0.5
    assert math.isnan(auc([1, 2], [True, True]))


def test_within_classes_a_score_that_only_repeats_the_class_separates_nothing():
    classes = np.array([1, 1, 1, 2, 2, 2])
    kept = np.array([True, False, False, True, True, False])
    assert auc(classes, kept) > 0.5  # class 2 is kept more often
    assert within_classes(classes, kept, classes) == 0.5
    score = np.array([0.9, 0.1, 0.2, 0.8, 0.7, 0.3])  # orders each class perfectly
    assert within_classes(score, kept, classes) == 1.0


def test_a_logistic_model_of_the_class_alone_ranks_as_the_classes_keep_rates():
    rng = np.random.default_rng(0)
    classes = rng.integers(0, 4, 400)
    kept = rng.random(400) < np.array([0.2, 0.4, 0.6, 0.8])[classes]
    onehot = (classes[:, None] == np.arange(4)[None]).astype(float)
    assert auc(logistic_scores(onehot, kept), kept) == pytest.approx(
        auc(class_rates(kept, classes), kept)
    )
    signal = kept + rng.normal(0, 0.5, 400)  # a feature that knows more than the class
    assert auc(logistic_scores(np.c_[onehot, signal], kept), kept) > auc(
        class_rates(kept, classes), kept
    )


def test_the_confidence_of_a_position_is_read_from_its_distribution():
    p = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    rows = confidence_rows(mx.array(np.log(p), dtype=mx.float32), [1, -1])
    assert rows[0, :3] == pytest.approx([0.3, 0.5, 0.2], abs=1e-6)
    assert rows[0, 3] == pytest.approx(float(np.sum(p[0] * np.log(p[0]))), abs=1e-6)
    assert math.isnan(rows[1, 0])  # after the answer: no token chosen
    assert rows[1, 1:3] == pytest.approx([0.8, 0.7], abs=1e-6)


def test_each_record_reads_the_position_before_the_first_token_it_judges():
    """A replay of the default on a chat of two answers of three tokens in random order
    (drafts both kept and not): each judged proposal carries its turn's confidence row of the
    last token made (row j = j here) and the mean of the last ``RECENT`` rows, and it was
    kept exactly where its first token is the answer's next."""
    rng = np.random.default_rng(1)
    answers = [[int(t) for t in rng.integers(5, 8, n)] for n in (300, 200)]
    turns = [{"prompt": [3, 4], "answer": answers[0], "stop": False}]
    turns.append({"prompt": [3, 4, *answers[0], 2], "answer": answers[1], "stop": False})
    confidence = []
    for turn, answer in enumerate(answers):  # row j = j, plus 1000 in the second turn
        rows = np.zeros((len(answer) + 1, 4), dtype=np.float32)
        rows[:, 0] = np.arange(len(answer) + 1) + 1000 * turn
        confidence.append(rows)
    named = named_curves()["h100-7b-bf16"]
    records = first_tokens({"c": {"turns": turns}}, "tiny", 0, named, {"c": confidence})
    assert len(records) > 5 and any(r.kept for r in records) and not all(r.kept for r in records)
    assert {r.features[0] >= 1000 for r in records} == {False, True}  # both turns judged
    for record in records:
        turn = int(record.features[0] >= 1000)
        assert record.features[0] - 1000 * turn == record.at - 1
        recent = range(max(0, record.at - RECENT), record.at)
        assert record.features[4] - 1000 * turn == pytest.approx(np.mean(recent))
        assert record.kept == (record.token == answers[turn][record.at])
    summary = separation(records)
    assert summary["records"] == len(records)
    assert summary["kept"] == pytest.approx(np.mean([r.kept for r in records]))


def test_a_chats_next_turn_reads_on_from_the_cache_as_a_fresh_read_would():
    """``teacher_forced`` reuses the cache where a turn's prompt goes on from the turn before;
    its rows equal reading that turn alone (and a turn that does not go on starts afresh)."""
    from types import SimpleNamespace

    from engine.bench.confidence import teacher_confidence
    from tests.tiny_model import make_tiny_llama

    loaded = SimpleNamespace(model=make_tiny_llama(seed=2))
    first = {"prompt": [5, 6, 7, 8], "answer": [9, 10, 11]}
    second = {"prompt": [5, 6, 7, 8, 9, 10, 11, 12, 13], "answer": [14, 15]}
    elsewhere = {"prompt": [20, 21, 22], "answer": [23]}
    together = teacher_confidence(loaded, [first, second, elsewhere])
    alone = [teacher_confidence(loaded, [turn])[0] for turn in (first, second, elsewhere)]
    for read, expected in zip(together, alone):
        np.testing.assert_allclose(read, expected, rtol=1e-4, atol=1e-5)
