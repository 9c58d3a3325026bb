"""The decode loop's mechanics, pinned with a scripted target (the seeds' behaviours)."""

import random

import pytest

from engine.drafters import make_drafter
from engine.drafters.frequency import FrequencyDrafter
from engine.loop.decode import Target, TokenChooser, speculative_decode
from engine.settings import DraftSettings, SamplingSettings
from engine.stats import DecodeStats

from .scripted_model import ScriptedModel


def run_scripted(
    script,
    prompt_length,
    drafter_name="prompt-lookup",
    draft_count=4,
    max_tokens=None,
    eos=(),
    **draft_options,
):
    model = ScriptedModel(script)
    target = Target(model)
    history = list(script[:prompt_length])
    target.prefill(history[:-1])
    drafter = make_drafter(
        DraftSettings(drafter=drafter_name, draft_count=draft_count, **draft_options)
    )
    drafter.reset(history)
    results, offsets = [], []
    stats = DecodeStats()
    for result in speculative_decode(
        target,
        drafter,
        TokenChooser(SamplingSettings()),
        history,
        max_tokens=max_tokens or len(script) - prompt_length,
        draft_count=draft_count,
        eos_tokens=set(eos),
    ):
        results.append(result)
        offsets.append((target.offset, len(history)))
        stats.record_pass(result.drafted, result.accepted, len(result.tokens), result.seconds)
    return history[prompt_length:], results, offsets, stats


def periodic(period=7, length=300):
    return [10 + (i % period) for i in range(length)]


def test_periodic_text_needs_far_fewer_passes_than_tokens():
    script = periodic()
    emitted, results, _, stats = run_scripted(script, prompt_length=20)
    assert emitted == script[20:]
    assert stats.passes < len(emitted) / 3
    assert stats.acceptance_rate > 0.9


def test_random_text_takes_exactly_one_pass_per_token():
    rng = random.Random(7)
    script = [rng.randrange(50_000) for _ in range(300)]
    emitted, results, _, stats = run_scripted(script, prompt_length=20)
    assert emitted == script[20:]
    assert stats.passes == len(emitted)
    assert stats.accepted == 0


@pytest.mark.parametrize("draft_count", [1, 2, 4, 9])
def test_a_full_accept_emits_draft_count_plus_one(draft_count):
    script = periodic(length=200)
    _, results, _, _ = run_scripted(script, prompt_length=20, draft_count=draft_count)
    full = [r for r in results if r.drafted == draft_count and r.accepted == draft_count]
    assert full, "periodic text should be fully accepted at least once"
    assert all(len(r.tokens) == draft_count + 1 for r in full)
    assert max(len(r.tokens) for r in results) == draft_count + 1


def test_every_pass_emits_at_least_one_token_and_the_cache_holds_the_history():
    rng = random.Random(3)
    # half periodic, half noise: drafts are sometimes right, sometimes wrong
    script = periodic(5, 120) + [rng.randrange(100, 200) for _ in range(60)] + periodic(5, 120)
    emitted, results, offsets, stats = run_scripted(script, prompt_length=10, draft_count=6)
    assert emitted == script[10:]
    assert all(len(r.tokens) >= 1 for r in results)
    assert all(offset == length - 1 for offset, length in offsets)
    assert 0 < stats.accepted < stats.drafted


def test_drafts_never_run_past_the_token_limit_or_end_of_sequence():
    script = periodic(length=200)
    emitted, results, _, _ = run_scripted(script, prompt_length=20, draft_count=8, max_tokens=23)
    assert emitted == script[20:43]
    eos = script[60]
    emitted, results, _, _ = run_scripted(script, prompt_length=20, draft_count=8, eos=[eos])
    assert emitted[-1] == eos and eos not in emitted[:-1]
    assert all(eos not in r.tokens[:-1] for r in results)


def test_the_akunu_trace():
    """Context "the cat sat" drafts "on the mat ." from counts, backing off at the last step."""
    words = {}

    def ids(text):
        return [words.setdefault(w, len(words) + 1) for w in text.split()]

    corpus = (
        " ".join(["the cat sat on the rug ."] * 5) + " the cat sat down . under the mat ."
        " the dog sat on the mat"
    )
    drafter = FrequencyDrafter(DraftSettings(drafter="frequency", ngram_order=4, draft_count=4))
    drafter.reset(ids(corpus))
    assert drafter.counts.parts.get(tuple(ids("on the mat"))) is None  # 4-gram unknown…
    assert drafter.predict_next(ids("on the mat")) == ids(".")[0]  # …3-gram "the mat" → "."
    assert drafter.predict(ids("the cat sat"), 4) == ids("on the rug .")  # rug: 5, mat: 1
    drafter.observe(ids(" ".join(["the cat sat on the mat ."] * 5)))
    assert drafter.predict(ids("the cat sat"), 4) == ids("on the mat .")  # mat: 6, rug: 5


def test_frequency_counts_pick_the_most_frequent_follower():
    drafter = FrequencyDrafter(DraftSettings(drafter="frequency", ngram_order=2))
    drafter.reset([1, 2, 1, 3, 1, 3, 1])
    assert drafter.propose(1).rows == [[3]]


def test_prompt_lookup_prefers_the_longest_most_recent_match():
    drafter = make_drafter(DraftSettings(drafter="prompt-lookup", ngram_order=3, ngram_min=1))
    drafter.reset([5, 6, 7, 1, 9, 6, 7, 2, 3, 5, 6, 7])
    # suffix [5, 6, 7] occurs at the start → followed by 1, 9, …
    assert drafter.propose(3).rows == [[1, 9, 6]]
    drafter.reset([6, 7, 1, 8, 6, 7, 2, 4, 6, 7])
    # only the 2-gram [6, 7] matches; its most recent continuation is 2, 4
    assert drafter.propose(2).rows == [[2, 4]]
    drafter.reset([1, 2, 3])
    assert drafter.propose(4).rows == []  # the suffix never matches itself
    drafter.reset([4, 5, 4, 5])
    assert drafter.propose(5).rows == [[4, 5, 4, 5, 4]]  # overlapping copy of a short period
