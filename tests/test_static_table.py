"""The static n-gram table keeps, per context seen ``MIN_COUNT`` times, its up to ``FOLLOWERS``
most frequent followers (those after the first from ``ALTERNATIVE_MIN_SHARE`` of it), best
first; ``follower`` still drafts only a first follower that took ``MIN_SHARE``, exactly as
the table of one follower a context did; ``followers`` gives them all; the file round-trips,
and a file that breaks its format (or is of the older one) is refused, named."""

import random
from collections import Counter, defaultdict

import numpy as np
import pytest

from engine.drafters._static_table import FOLLOWERS, SHARE_SCALE, StaticTable, StaticTableError
from engine.runtime.static_ngrams import (
    ALTERNATIVE_MIN_SHARE,
    MIN_COUNT,
    MIN_SHARE,
    FollowerCounts,
    count_all,
)

VOCAB = 64


def table_of(answers, vocab=VOCAB) -> StaticTable:
    counts = FollowerCounts(vocab)
    for answer in answers:
        counts.add(answer)
    return count_all(counts).table("test", "test-tokenizer")


def share(count, total) -> float:
    """A share as the table holds it (255ths, rounded)."""
    return min(max(round(count / total * SHARE_SCALE), 1), SHARE_SCALE) / SHARE_SCALE


def test_each_context_keeps_its_top_followers_best_first():
    assert (FOLLOWERS, MIN_COUNT, MIN_SHARE, ALTERNATIVE_MIN_SHARE) == (4, 3, 0.3, 0.05)
    answers = (
        # "1 2": 10 five times, 11 and 12 three times, 13 and 14 twice, 15 once (16 in all)
        [[1, 2, 10]] * 5 + [[1, 2, 11], [1, 2, 12]] * 3 + [[1, 2, 13], [1, 2, 14]] * 2
        + [[1, 2, 15]]
        # "3 4": 21 took 1 of 20, exactly 5%; "5 6": 31 took 1 of 21, under 5%
        + [[3, 4, 20]] * 19 + [[3, 4, 21]]
        + [[5, 6, 30]] * 20 + [[5, 6, 31]]
        # "7 8": four followers of a quarter each, none with MIN_SHARE: kept all the same
        + [[7, 8, 40], [7, 8, 41], [7, 8, 42], [7, 8, 43]]
        # "9 9": seen twice, under MIN_COUNT
        + [[9, 9, 50]] * 2
    )  # fmt: skip
    table = table_of(answers)
    # ties: the larger id first, so the first follower is the one-follower table's
    assert table.followers([1, 2]) == [
        (10, share(5, 16)),
        (12, share(3, 16)),
        (11, share(3, 16)),
        (14, share(2, 16)),
    ]
    assert table.followers([3, 4]) == [(20, share(19, 20)), (21, share(1, 20))]
    assert table.followers([5, 6]) == [(30, share(20, 21))]
    assert table.followers([7, 8]) == [(token, share(1, 4)) for token in (43, 42, 41, 40)]
    assert table.followers([9, 9]) == []
    order = table.orders[2]
    assert order.keys.tolist() == sorted(order.keys.tolist())
    assert order.offsets.tolist() == [0, 4, 6, 7, 11]
    assert order.drafts.tolist() == [True, True, True, False]
    assert table.follower([7, 8]) is None and table.follower([1, 2]) == (10, share(5, 16))


def one_follower_answer(answers, context):
    """What the table of one follower a context answers for ``context``, from the counts: the
    most frequent follower (the larger id among equals) of the longest context of 3 or 2
    tokens ending it that was seen MIN_COUNT times and whose follower took MIN_SHARE."""
    counts = {n: defaultdict(Counter) for n in (2, 3)}
    for answer in answers:
        for n in (2, 3):
            for i in range(len(answer) - n):
                counts[n][tuple(answer[i : i + n])][answer[i + n]] += 1
    for n in (3, 2):
        followed = counts[n].get(tuple(context[-n:]))
        if followed:
            total = sum(followed.values())
            count, token = max((count, token) for token, count in followed.items())
            if total >= MIN_COUNT and count / total >= MIN_SHARE:
                return token, share(count, total)
    return None


def test_follower_answers_exactly_what_the_table_of_one_follower_a_context_did():
    rng = random.Random(7)
    answers = [[rng.choice(range(6)) for _ in range(rng.randint(3, 40))] for _ in range(200)]
    # "7 7": 1 took exactly 3 of 10 (MIN_SHARE, though 0.3 x 255 rounds to the 76 of 0.298)
    answers += [[7, 7, 1]] * 3 + [[7, 7, token] for token in range(2, 9)]
    # "9 8 8": a quarter each, under MIN_SHARE: its 2-token end "8 8" drafts instead
    answers += [[9, 8, 8, token] for token in (1, 2, 3, 4)] + [[8, 8, 5]] * 6
    table = table_of(answers)
    assert not all(table.orders[3].drafts)  # contexts under MIN_SHARE are in it
    assert table.follower([7, 7]) == (1, 76 / 255)
    assert table.follower([9, 8, 8]) == (5, share(6, 10))
    contexts = [[a, b, c] for a in range(10) for b in range(10) for c in range(10)]
    for context in contexts + [c[1:] for c in contexts] + [[3]]:
        assert table.follower(context) == one_follower_answer(answers, context), context


def test_followers_are_the_longest_known_contexts_whatever_their_top_share():
    table = table_of([[9, 8, 8, token] for token in (1, 2, 3, 4)] + [[8, 8, 5]] * 6)
    quarter = share(1, 4)
    assert table.followers([9, 8, 8]) == [(4, quarter), (3, quarter), (2, quarter), (1, quarter)]
    assert table.followers([0, 9, 8, 8]) == table.followers([9, 8, 8])
    tenth = share(1, 10)
    assert table.followers([7, 8, 8]) == [(5, share(6, 10)), (4, tenth), (3, tenth), (2, tenth)]
    assert table.followers([8, 8]) == table.followers([7, 8, 8])
    assert table.followers([8, 9]) == [] and table.followers([8]) == []


def test_the_table_round_trips_through_its_file(tmp_path):
    vocab = 151_936  # ids over 65,536 pack as well
    answers = [[151_935, 65_536, 131_072, 7, token] for token in (0, 1, 1, 2, 2, 2)]
    table = table_of(answers, vocab)
    table.save(tmp_path / "t.npz")
    loaded = StaticTable.load(tmp_path / "t.npz")
    assert (loaded.model, loaded.tokenizer, loaded.vocab_size) == ("test", "test-tokenizer", vocab)
    for n in (2, 3):
        for ours, read in zip(table.orders[n], loaded.orders[n]):
            assert ours.dtype == read.dtype and np.array_equal(ours, read)
    assert loaded.followers([65_536, 131_072, 7]) == [
        (2, share(3, 6)),
        (1, share(2, 6)),
        (0, share(1, 6)),
    ]
    for context in ([151_935, 65_536, 131_072], [131_072, 7], [5, 65_536, 131_072], [7, 2]):
        assert loaded.follower(context) == table.follower(context)
        assert loaded.followers(context) == table.followers(context)


def good_arrays(tmp_path) -> dict:
    """The arrays of a good table file: order 2 holds "1 2" (followers 3, 4) and "2 3" (4)."""
    table_of([[1, 2, 3]] * 2 + [[1, 2, 4]] + [[2, 3, 4]] * 3).save(tmp_path / "good.npz")
    with np.load(tmp_path / "good.npz") as archive:
        arrays = {name: archive[name] for name in archive.files}
    assert arrays["count2"].tolist() == [2, 1] and arrays["share2"].tolist() == [170, 85, 255]
    return arrays


def followers_of_five(arrays):
    arrays["count2"] = np.array([5, 1], np.uint8)
    arrays["next2"] = np.array([3, 4, 5, 6, 7, 4], np.uint32)
    arrays["share2"] = np.array([60, 50, 50, 40, 30, 255], np.uint8)


def old_format(arrays):
    for name in list(arrays):
        if name[:-1] in ("count", "drafts"):
            del arrays[name]
    arrays["format"] = np.array("draftless-static-ngrams-2")


BAD = {
    "a context without followers": (
        lambda a: a.update(count2=np.array([0, 3], np.uint8)),
        "its order-2 contexts do not each have 1 to 4 followers",
    ),
    "too many followers": (followers_of_five, "its order-2 contexts do not each have 1 to 4"),
    "counts past the followers": (
        lambda a: a.update(count2=np.array([2, 2], np.uint8)),
        "its order-2 follower counts add up to 4, not to its 3 followers",
    ),
    "shares not best first": (
        lambda a: a.update(share2=np.array([85, 170, 255], np.uint8)),
        "its order-2 shares are not best first within each context",
    ),
    "flags not booleans": (
        lambda a: a.update(drafts2=np.array([1, 1], np.uint8)),
        "its order-2 drafting flags are not booleans",
    ),
    "the older format": (
        old_format,
        "it is a draftless-static-ngrams-2 file, a format this version no longer reads",
    ),
}


@pytest.mark.parametrize("kind", list(BAD))
def test_a_file_that_breaks_the_format_is_refused_naming_the_problem(kind, tmp_path):
    arrays = good_arrays(tmp_path)
    spoil, problem = BAD[kind]
    spoil(arrays)
    path = tmp_path / "bad.npz"
    np.savez_compressed(path, **arrays)
    with pytest.raises(StaticTableError) as refused:
        StaticTable.load(path)
    assert problem in refused.value.problem
    assert str(path) in str(refused.value) and "python -m engine.bench.static_table" in str(
        refused.value
    )
    if kind == "the older format":  # found by no tokenizer either: named where it is shipped
        with pytest.raises(StaticTableError, match="no longer reads"):
            StaticTable.tokenizer_of(path)
