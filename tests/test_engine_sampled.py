"""Lossless, sampled form: under speculation each token is the target's own sample.

A drafter that always guesses the same token is run against plain sampling on a tiny
model with a small vocabulary. The per-position distributions must agree; a control
run that accepts drafts without checking them must not (so the test can fail).
"""

from collections import Counter

import mlx.core as mx
import pytest

from engine.drafters.base import Drafter, Proposal
from engine.loop import decode
from engine.settings import DraftSettings, SamplingSettings

from .identity import CHI_SQUARE_CRITICAL, chi_square, speculative
from .tiny_model import make_tiny_llama

VOCAB = 6
POSITIONS = 3
RUNS = 1000


class StubbornDrafter(Drafter):
    name = "stubborn"
    summary = "always guesses the same token"
    guess = 0

    def reset(self, prompt_tokens):
        pass

    def propose(self, k):
        return Proposal([[self.guess] * k])

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        pass


def sample_positions(model, drafter_cls, monkeypatch, seed):
    monkeypatch.setattr("tests.identity.make_drafter", lambda settings: drafter_cls(settings))
    mx.random.seed(seed)
    counts = [Counter() for _ in range(POSITIONS)]
    accepted = 0
    for _ in range(RUNS):
        tokens, results = speculative(
            model,
            [1, 2, 3],
            POSITIONS,
            DraftSettings(drafter="none", draft_count=POSITIONS),
            SamplingSettings(temperature=1.0),
        )
        accepted += sum(r.accepted for r in results)
        for position, token in enumerate(tokens):
            counts[position][token] += 1
    return counts, accepted


class NoCheck(decode.TokenChooser):
    """Broken on purpose: claims the target chose every draft token."""

    def choose(self, logits, history, draft):
        chosen = super().choose(logits, history, draft)
        return list(draft) + chosen[len(draft) :]


@pytest.fixture(scope="module")
def model():
    return make_tiny_llama(vocab_size=VOCAB, seed=5, layers=1, hidden=32)


def test_speculative_samples_follow_the_target_distribution(model, monkeypatch):
    from engine.drafters.none import NoDrafter

    plain, _ = sample_positions(model, NoDrafter, monkeypatch, seed=11)
    StubbornDrafter.guess = plain[1].most_common(1)[0][0]
    spec, accepted = sample_positions(model, StubbornDrafter, monkeypatch, seed=12)
    assert accepted > 50, "drafts must sometimes be accepted for the test to mean anything"
    statistics = [chi_square(p, s, VOCAB) for p, s in zip(plain, spec)]
    assert max(statistics) < CHI_SQUARE_CRITICAL, statistics

    monkeypatch.setattr("tests.identity.TokenChooser", NoCheck)
    broken, _ = sample_positions(model, StubbornDrafter, monkeypatch, seed=13)
    broken_statistics = [chi_square(p, b, VOCAB) for p, b in zip(plain, broken)]
    assert max(broken_statistics) > 5 * CHI_SQUARE_CRITICAL, broken_statistics
