"""Replay against real decoding: replaying a greedy run's own tokens gives that run's
statistics and accepted-draft flags exactly (fixed draft counts), for every drafter."""

import json

import pytest

from engine.drafters import DRAFTERS
from engine.runtime.replay import replay, replay_many
from engine.settings import configurations
from engine.settings import DraftSettings
from engine.stats import DecodeStats

from .identity import speculative
from .tiny_model import make_tiny_llama

OPTIONS = {
    "ngram-cache": {"dynamic": False},
    "suffix-static": {"memory": False},  # a replay never reads the cross-chat memory
    "ngrammys": {"rows": 4, "model_bigram": False},
    "ngram-simple": {"n": 2, "m": 8},
    "ngram-map-k": {"n": 2, "m": 2},
    "ngram-map-k4v": {"n": 2, "m": 2},
}
PROMPT = [40 + (i % 9) for i in range(60)] + [7, 8, 9]


pytestmark = pytest.mark.usefixtures("private_dirs")  # conftest: a data and cache folder per test


@pytest.fixture(scope="module")
def model():
    return make_tiny_llama(seed=1)


def real_run(model, settings, max_tokens, eos=()):
    """Decode for real; count the passes as the engine session does."""
    tokens, results = speculative(model, PROMPT, max_tokens, settings, eos=eos)
    stats, flags = DecodeStats(drafter=settings.drafter), []
    for result in results:
        ended = bool(set(eos) & set(result.tokens))
        counts = (result.drafted, result.accepted, len(result.tokens), 0.0, ended, result.tree)
        kept, _ = stats.record_pass(*counts)
        flags += [i < kept for i in range(len(result.tokens) - int(ended))]
    return tokens, stats, flags


def comparable(stats: DecodeStats) -> dict:
    out = stats.to_dict()
    out.pop("estimated_speedup")
    return out


@pytest.mark.parametrize("name", [n for n in DRAFTERS if n != "none"])
def test_replay_of_a_greedy_run_equals_its_statistics(model, name):
    total_accepted = 0
    for draft_count, order in ((3, 3), (6, 4)):
        settings = DraftSettings(
            drafter=name,
            draft_count=draft_count,
            ngram_order=order,
            adaptive=False,
            options=OPTIONS.get(name, {}),
        )
        tokens, stats, flags = real_run(model, settings, 50)
        result = replay(PROMPT, tokens, settings, max_tokens=50)
        if result.notes:  # a drafter that needs what a replay cannot have says so
            assert name in (
                "nasd",
                "ngrammys",
                "ngram-cache",
                "token-recycling",
                "suffix-recycling",
            ), result.notes
            continue
        assert comparable(result.stats) == comparable(stats)
        assert result.from_draft == flags
        total_accepted += stats.accepted

        # ended by an end-of-answer token: that token is never a visible accepted draft
        eos = tokens[20]
        tokens, stats, flags = real_run(model, settings, 50, eos=[eos])
        assert tokens[-1] == eos
        result = replay(PROMPT, tokens[:-1], settings, end_token=eos, max_tokens=50)
        assert comparable(result.stats) == comparable(stats)
        assert result.from_draft == flags and len(flags) == len(tokens) - 1
    if name not in ("nasd", "token-recycling", "suffix-recycling"):  # replayed as estimates
        assert total_accepted > 0, "the replay comparison needs accepted drafts"


def test_replay_many_sorts_by_the_cost_curve_and_marks_estimates(model):
    settings = DraftSettings(drafter="prompt-lookup", draft_count=4, adaptive=False)
    tokens, _, _ = real_run(model, settings, 60)
    configs = configurations(["prompt-lookup", "ngram-cache", "suffix"], [2, 8], [3])
    results = replay_many(PROMPT, tokens, configs, cost=lambda n: 1.0 + 0.1 * (n - 1))
    speedups = [r.stats.estimated_speedup for r in results]
    assert speedups == sorted(speedups, reverse=True) and len(results) == 6
    assert all(r.exact for r in results if r.settings.drafter != "ngram-cache")
    assert all(
        "without cross-chat memory" in r.notes
        for r in results
        if r.settings.drafter == "ngram-cache"
    )
    sampled = replay(PROMPT, tokens, settings, greedy=False)
    assert sampled.notes == ["sampled answer"]
    json.dumps([r.to_dict() for r in results])


def test_replay_of_2000_tokens_is_quick():
    """Measured, not asserted (no timing thresholds in tests): printed for the report."""
    import time

    import random

    rng = random.Random(0)  # half novel tokens, half copies of earlier stretches
    answer = []
    while len(answer) < 2000:
        if answer and rng.random() < 0.5:
            start = rng.randrange(len(answer))
            answer += answer[start : start + rng.randrange(2, 12)]
        else:
            answer += [rng.randrange(3, 3000) for _ in range(rng.randrange(1, 8))]
    answer = answer[:2000]
    prompt = answer[:300]
    for name in [n for n in DRAFTERS if n != "none"]:
        settings = DraftSettings(
            drafter=name, draft_count=4, adaptive=False, options=OPTIONS.get(name, {})
        )
        started = time.perf_counter()
        result = replay(prompt, answer, settings)
        print(
            f"\n{name}: {time.perf_counter() - started:.3f} s for 2000 tokens, "
            f"{result.stats.tokens_per_pass:.2f} tokens/pass"
        )
        assert result.stats.emitted == 2000
