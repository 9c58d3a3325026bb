"""Token Recycling's matrix and tree (``engine/drafters/token_recycling.py``)."""

from types import SimpleNamespace

import mlx.core as mx
import numpy as np
import pytest

from engine.bench.recycling import TopkFeed, teacher_topk
from engine.bench.tune import simulate
from engine.drafters import make_drafter
from engine.drafters.stores import DrafterStores
from engine.drafters.token_recycling import (
    EMPTY,
    LEAVES,
    TEMPLATE,
    RecyclingMatrix,
    template_leaves,
)
from engine.loop.decode import top_k_tokens
from engine.settings import DraftSettings

from .identity import speculative
from .tiny_model import make_tiny_llama

SMALL = [(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]  # the docstring's example, k = 2


def small_matrix() -> RecyclingMatrix:
    matrix = RecyclingMatrix(vocab_size=12, top=2)
    matrix.update(5, [7, 9])
    matrix.update(7, [3, 4])
    matrix.update(3, [5, 7])
    return matrix


def test_the_docstring_example_tree():
    leaves = template_leaves(SMALL)
    assert leaves == [(0, 0, 0), (0, 1), (1, 0)]
    # (1, 0) has no token: row 9 is empty, so that leaf stops at [9]
    assert small_matrix().tree_rows(5, leaves, limit=8) == [[7, 3, 5], [7, 4], [9]]
    # cut at two tokens, [7, 3] and [7, 4] stay, nothing repeated
    assert small_matrix().tree_rows(5, leaves, limit=2) == [[7, 3], [7, 4], [9]]
    # a token whose row is empty drafts nothing
    assert small_matrix().tree_rows(9, leaves, limit=8) == []


def test_the_papers_template():
    assert len(TEMPLATE) == 80 and len(set(TEMPLATE)) == 80
    assert max(map(len, TEMPLATE)) == 6 and max(max(p) for p in TEMPLATE) == 7
    assert all(path[:-1] in TEMPLATE for path in TEMPLATE if len(path) > 1)
    assert LEAVES[0] == (0,) * 6 and len(LEAVES) == 40


def drafter(vocab_size=12, stores=None):
    drafter = make_drafter(DraftSettings(drafter="token-recycling", draft_count=8, adaptive=False))
    drafter.attach_model(
        "m", stores=stores if stores is not None else DrafterStores(), vocab_size=vocab_size
    )
    return drafter


def test_a_pass_replaces_the_row_of_the_token_read_at_each_position():
    recycler = drafter()
    recycler.reset([1, 5])
    # the pass read 5 then 7 (the accepted draft); the target ranked [7, 9] after 5 and [2, 8]
    # after 7
    recycler.observe([7, 2], accepted=1, drafted=1, target_topk=[[7, 9, 1], [2, 8, 11]])
    rows = recycler.matrix.rows
    assert rows[5].tolist() == [7, 9, 1] + [EMPTY] * 5
    assert rows[7].tolist()[:3] == [2, 8, 11]
    assert rows[2].tolist() == [EMPTY] * 8  # the last emitted token was not read yet
    recycler.observe([4], target_topk=[[4, 99, 3]])  # 99: outside the vocabulary, dropped
    assert rows[2].tolist()[:3] == [4, 3, EMPTY]
    recycler.observe([6], target_topk=[[6, 1]])  # a newer ranking replaces the row
    assert rows[4].tolist()[:2] == [6, 1]
    recycler.observe([9])  # nothing from the target: the last token moves on, no row changes
    assert recycler.propose(8).rows == []


def test_the_matrix_outlives_the_chat_within_one_stores():
    stores = DrafterStores()
    first = drafter(stores=stores)
    first.reset([3, 5])
    first.observe([7], target_topk=[[7, 9]])
    second = drafter(stores=stores)
    second.reset([0, 5])  # another chat of the same service
    assert second.propose(8).rows == [[7], [9]]
    assert drafter().propose(8).rows == []  # another service's stores know nothing


def test_target_topk_comes_best_first():
    logits = mx.array([[0.0, 5.0, 1.0, 4.0, 2.0, 3.0, -1.0, 6.0]])
    assert top_k_tokens(logits, 4, 1) == [[7, 1, 3, 5]]
    values = np.random.default_rng(0).standard_normal((3, 500)).astype(np.float32)
    got = top_k_tokens(mx.array(values), 8, 3)
    assert got == np.argsort(-values, axis=-1)[:, :8].tolist()


def test_suffix_recycling_adds_recycled_rows_after_the_suffix_rows():
    def made(name):
        drafter = make_drafter(DraftSettings(drafter=name, draft_count=8, adaptive=False))
        drafter.attach_model("m", stores=DrafterStores(), vocab_size=12)
        drafter.reset([1, 2, 3, 4, 1, 2])
        return drafter

    combined, suffix = made("suffix-recycling"), made("suffix")
    for drafter in (combined, suffix):
        drafter.observe([3], target_topk=[[3, 5]])  # read 2: the target ranks 3, then 5
    # the suffix drafts what followed [1, 2, 3] before (4, 1, ..); the tree after 3 knows
    # nothing yet
    own = suffix.propose(4).rows
    assert own and combined.propose(4).rows == own
    combined.observe([7], target_topk=[[7, 4]])  # read 3: 7, then 4
    suffix.observe([7])
    combined.observe([9], target_topk=[[9, 3]])  # read 7: 9, then 3
    suffix.observe([9])
    # [.., 3, 7, 9] matches nowhere: the recycled rows alone, on no match length
    assert suffix.propose(4).rows == []
    combined.observe([3], target_topk=[[3, 1]])  # read 9: 3, then 1
    suffix.observe([3])
    # after 3 the suffix drafts what followed 3 before, and the tree from 3 adds what
    # no suffix row holds: 3 -> 5 (its second best), and the 3 -> 7 path the suffix has
    own = suffix.propose(4).rows
    rows = combined.propose(4).rows
    assert rows[: len(own)] == own
    recycled = rows[len(own) :]
    assert recycled and all(not any(s[: len(r)] == r for s in own) for r in recycled)
    assert recycled == [r for r in combined.recycler.rows(4) if r in recycled]
    combined.reset([11])  # no suffix match: the recycled rows alone, no match length
    combined.observe([2], target_topk=[[2, 0]])
    alone = combined.propose(4)
    assert alone.match_length == 0 and alone.rows == combined.recycler.rows(4)[:8]
    assert alone.rows[0] == [3, 7, 9, 3]  # 2 -> 3 -> 7 -> 9 -> 3, every step the best


@pytest.mark.parametrize("name", ["token-recycling", "suffix-recycling"])
def test_the_replay_fed_teacher_forced_topk_equals_a_real_greedy_run(name):
    """``engine.bench.recycling``'s claim: with the target's top-k read along a greedy answer
    in one teacher-forced pass, the replay makes the real loop's passes."""
    model = make_tiny_llama(seed=1)
    prompt = [40 + (i % 9) for i in range(40)] + [(i * 37 + 11) % 250 + 3 for i in range(20)]
    settings = DraftSettings(
        drafter=name,
        draft_count=6,
        adaptive=False,
        options={"table": False, "memory": False} if name == "suffix-recycling" else {},
    )
    tokens, results = speculative(model, prompt, 60, settings)
    assert sum(r.accepted for r in results) > 0, "no draft was accepted: the test proves nothing"
    turn = {"prompt": prompt, "answer": tokens, "stop": False}
    tops = teacher_topk(SimpleNamespace(model=model), [turn])
    fed = TopkFeed(make_drafter(settings), tops, DrafterStores())
    seconds = {n: 1.0 for n in range(1, 300)}
    replayed = simulate([turn], name, 6, False, None, "tiny", seconds, eos=-1, drafter=fed)
    assert replayed["passes"] == len(results)
    assert [n - 1 for n, _ in replayed["sizes"]] == [r.drafted for r in results]
    # the control: replayed without the top-k (as ``engine.runtime.replay`` must), it drafts otherwise
    blind = simulate([turn], name, 6, False, None, "tiny", seconds, eos=-1)
    assert blind["sizes"] != replayed["sizes"]


def test_the_bigram_table_seeds_only_empty_rows_and_only_when_asked():
    bigram = np.array([[1, 2, 3], [2, 0, 1], [0, 1, 2], [1, 0, 2]], dtype=np.int32)
    asked = make_drafter(
        DraftSettings(drafter="token-recycling", adaptive=False, options={"model_bigram": True})
    )
    assert asked.wants_model_bigram
    stores = DrafterStores()
    recycler = drafter(vocab_size=4, stores=stores)
    recycler.reset([1])
    recycler.observe([3], target_topk=[[3, 0]])  # row 1 is the target's own now
    asked.attach_model("m", bigram=bigram, stores=stores, vocab_size=4)
    rows = asked.matrix.rows
    assert rows[1].tolist()[:3] == [3, 0, EMPTY]  # kept: the target's ranking wins
    assert rows[0].tolist()[:4] == [1, 2, 3, EMPTY] and rows[3].tolist()[:3] == [1, 0, 2]
    assert not drafter().wants_model_bigram  # by default it starts empty
