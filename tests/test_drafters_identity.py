"""Lossless invariants for the new drafters on a tiny random-weight Llama.

Greedy: speculative output equals mlx-lm's generate_step greedy output, token for token,
for every new drafter at several draft counts/orders (drafts must really be accepted).
Sampled: the multi-row (tree) path keeps each token the target's own sample; a control
that accepts a row unchecked must fail the same statistics.
"""

from collections import Counter

import mlx.core as mx
import pytest

from engine.drafters import make_drafter
from engine.drafters.base import Drafter, Proposal
from engine.loop import decode
from engine.loop.decode import DraftTree, Target, TokenChooser, speculative_decode
from engine.runtime.model_ngrams import bigram_table
from engine.settings import DraftSettings, SamplingSettings

from .identity import CHI_SQUARE_CRITICAL, chi_square, reference_greedy, speculative
from .tiny_model import make_tiny_llama

NEW = {
    "ngram-simple": {"n": 2, "m": 8},
    "ngram-map-k": {"n": 2, "m": 2},
    "ngram-map-k4v": {"n": 2, "m": 2},
    "ngram-cache": {"dynamic": False},
    "nasd": {"filler_top_k": 3},
    "ngrammys": {"rows": 4},
    "suffix": {},
    "suffix-static": {},
    "token-recycling": {},
    "suffix-recycling": {},
}


pytestmark = pytest.mark.usefixtures("private_dirs")  # conftest: a data and cache folder per test


@pytest.fixture(scope="module")
def models():
    return [make_tiny_llama(seed=seed) for seed in (1, 2)]


PROMPTS = {
    "repetitive": [40 + (i % 9) for i in range(60)],
    "novel": [(i * 37 + 11) % 250 + 3 for i in range(50)],
}


@pytest.mark.parametrize("name", list(NEW))
def test_greedy_identity(models, name):
    accepted = 0
    for model in models:
        bigram = bigram_table(model, f"tiny-{id(model)}") if name == "ngrammys" else None
        for prompt in PROMPTS.values():
            expected = reference_greedy(model, prompt, 40)
            for draft_count, order in ((1, 2), (4, 4), (10, 3)):
                settings = DraftSettings(
                    drafter=name,
                    draft_count=draft_count,
                    ngram_order=order,
                    ngram_min=1,
                    adaptive=False,
                    options=NEW[name],
                )
                got, results = speculative(model, prompt, 40, settings, bigram=bigram)
                assert got == expected, (name, draft_count, order)
                accepted += sum(r.accepted for r in results)
    assert accepted > 0, "no draft was ever accepted: the test would prove nothing"


def test_tree_pass_uses_rows_beyond_the_first_and_keeps_the_cache_exact(models):
    model = models[0]
    prompt = PROMPTS["novel"]
    expected = reference_greedy(model, prompt, 30)
    settings = DraftSettings(drafter="ngrammys", draft_count=4, adaptive=False, options={"rows": 8})
    got, results = speculative(model, prompt, 30, settings, bigram=bigram_table(model, "tiny-tree"))
    assert got == expected
    assert sum(r.accepted for r in results) > 0
    assert any(r.drafted > 4 for r in results), "several rows were verified together"


class RowsDrafter(Drafter):
    """Multi-row test drafter: fixed rows, the right one buried among wrong ones."""

    name = "rows"
    summary = "fixed rows"
    multi_row = True
    rows: list[list[int]] = []

    def reset(self, prompt_tokens):
        pass

    def propose(self, k):
        return Proposal([row[:k] for row in self.rows])

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        pass


def test_ngrammys_picks_the_row_with_the_longest_accepted_prefix(models):
    model = models[0]
    prompt = PROMPTS["novel"]
    truth = reference_greedy(model, prompt, 6)
    wrong = [(t + 1) % 259 for t in truth]
    RowsDrafter.rows = [wrong[:5], truth[:2] + wrong[2:5], truth[:5], truth[:1] + wrong[1:5]]
    target = Target(model)
    history = list(prompt)
    target.prefill(history[:-1])
    drafter = RowsDrafter(DraftSettings(adaptive=False))
    result = next(
        speculative_decode(
            target,
            drafter,
            TokenChooser(SamplingSettings()),
            history,
            max_tokens=6,
            draft_count=5,
            eos_tokens=set(),
        )
    )
    assert result.row == 2 and result.accepted == 5
    assert result.tokens == truth[:6]
    assert target.offset == len(history) - 1
    # and the cache is right: the next pass continues exactly like plain decoding
    more = list(
        speculative_decode(
            target,
            make_drafter(DraftSettings(drafter="none")),
            TokenChooser(SamplingSettings()),
            history,
            max_tokens=4,
            draft_count=1,
            eos_tokens=set(),
        )
    )
    assert history[len(prompt) :] == reference_greedy(model, prompt, 10)
    assert sum(len(r.tokens) for r in more) == 4


def test_draft_tree_merges_shared_prefixes():
    tree = DraftTree(9, [[1, 2, 3], [1, 2, 4], [5]])
    assert tree.tokens == [9, 1, 2, 3, 4, 5]
    assert tree.depth == [0, 1, 2, 3, 3, 1]
    mask = tree.ancestors()
    assert mask[4].tolist() == [True, True, True, False, True, False]


# ---------------------------------------------------------------- sampled, multi-row
VOCAB, POSITIONS, RUNS = 6, 3, 600


def sample_positions(model, drafter_name, seed):
    mx.random.seed(seed)
    counts = [Counter() for _ in range(POSITIONS)]
    accepted = 0
    for _ in range(RUNS):
        target = Target(model)
        history = [1, 2, 3]
        target.prefill(history[:-1])
        if drafter_name == "rows":
            drafter = RowsDrafter(DraftSettings(adaptive=False))
        else:
            drafter = make_drafter(DraftSettings(drafter="none"))
        results = list(
            speculative_decode(
                target,
                drafter,
                TokenChooser(SamplingSettings(temperature=1.0)),
                history,
                max_tokens=POSITIONS,
                draft_count=POSITIONS,
                eos_tokens=set(),
            )
        )
        accepted += sum(r.accepted for r in results)
        for position, token in enumerate(history[3:]):
            counts[position][token] += 1
    return counts, accepted


def test_multi_row_sampling_keeps_the_target_distribution(monkeypatch):
    model = make_tiny_llama(vocab_size=VOCAB, seed=5, layers=1, hidden=32)
    plain, _ = sample_positions(model, "none", seed=21)
    likely = [c.most_common(2) for c in plain]
    a, b = likely[0][0][0], likely[0][1][0]
    RowsDrafter.rows = [[a, a, a], [b, likely[1][0][0], likely[2][0][0]], [b, b, b]]
    spec, accepted = sample_positions(model, "rows", seed=22)
    assert accepted > 100, "drafts must be accepted for the test to mean anything"
    statistics = [chi_square(p, s, VOCAB) for p, s in zip(plain, spec)]
    assert max(statistics) < CHI_SQUARE_CRITICAL, statistics

    def unchecked_walk(self, logits, chooser, history):  # broken on purpose: row 0 always wins
        return list(self.row_nodes[0]), 0

    monkeypatch.setattr(decode.DraftTree, "walk", unchecked_walk)
    broken, _ = sample_positions(model, "rows", seed=23)
    broken_statistics = [chi_square(p, s, VOCAB) for p, s in zip(plain, broken)]
    assert max(broken_statistics) > 5 * CHI_SQUARE_CRITICAL, broken_statistics


@pytest.mark.embedded
def test_greedy_identity_on_the_embedded_model(embedded_loaded):
    tokenizer = embedded_loaded.tokenizer
    prompt = list(
        tokenizer.apply_chat_template(
            [
                {
                    "role": "user",
                    "content": "Repeat exactly: the red fox and the red hen and the red fox.",
                }
            ],
            add_generation_prompt=True,
        )
    )
    expected = reference_greedy(embedded_loaded.model, prompt, 32)
    accepted = 0
    for name, options in (
        ("ngrammys", {"rows": 4, "model_bigram": False}),
        ("suffix", {}),
        ("suffix-static", {}),  # with the table shipped for this model
        ("ngram-cache", {"dynamic": False}),
    ):
        settings = DraftSettings(drafter=name, draft_count=6, adaptive=False, options=options)
        got, results = speculative(embedded_loaded.model, prompt, 32, settings)
        assert got == expected, name
        accepted += sum(r.accepted for r in results)
    assert accepted > 0


def test_model_bigram_table_is_the_models_top_tokens_and_cached(tmp_path):
    from engine.runtime import model_ngrams

    model = make_tiny_llama(seed=4)
    progress = []
    table = bigram_table(
        model,
        "tiny-bigram",
        top=5,
        batch=64,
        prefix=[10],
        progress=lambda done, total: progress.append(done),
    )
    assert table.shape == (259, 5) and progress[-1] == 259
    for x in (3, 77, 200):
        logits = model(mx.array([[10, x]]))[0, -1]
        assert int(table[x, 0]) == int(mx.argmax(logits))
    path = model_ngrams.bigram_path("tiny-bigram-p10", 5)
    assert path.exists()
    path.write_bytes(b"garbage")  # corrupt: reported, computed again
    again = bigram_table(model, "tiny-bigram", top=5, batch=64, prefix=[10])
    assert (again == table).all()
