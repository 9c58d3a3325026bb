"""Plain decoding, pipelined: each pass is queued before the previous pass's token is read.

It must give the same tokens as one pass at a time (greedy and sampled), and whenever the
caller has its result (or stops early) the cache must hold the history but its last token.
"""

import mlx.core as mx
import pytest

from engine.drafters import make_drafter
from engine.loop import decode
from engine.loop.decode import Target, TokenChooser, speculative_decode
from engine.settings import DraftSettings, SamplingSettings

from .identity import reference_greedy
from .tiny_model import make_tiny_llama

PROMPT = [5, 9, 12, 40, 7, 3, 77, 21, 9, 12]
SAMPLED = SamplingSettings(temperature=0.9, seed=11)


@pytest.fixture(scope="module")
def model():
    return make_tiny_llama(seed=3)


def plain(model, sampling, max_tokens, pipelined, stop_after=None, target=None, history=None):
    """``none`` through the loop; returns (new tokens, target, history)."""
    if target is None:
        target = Target(model)
        history = list(PROMPT)
        target.prefill(history[:-1])
    target.pipelines = pipelined
    start = len(history)
    drafter = make_drafter(DraftSettings(drafter="none"))
    drafter.reset(history)
    if sampling.seed is not None:
        mx.random.seed(sampling.seed)
    decoder = speculative_decode(
        target,
        drafter,
        TokenChooser(sampling),
        history,
        max_tokens=max_tokens,
        draft_count=4,
        eos_tokens=set(),
    )
    for passes, _ in enumerate(decoder, start=1):
        assert len(history) - start == passes
        if passes == stop_after:
            break
    decoder.close()
    assert target.offset == len(history) - 1
    return history[start:], target, history


def test_the_pipelined_path_is_the_one_taken(model, monkeypatch):
    calls = []
    original = decode.pipelined_plain_decode
    monkeypatch.setattr(
        decode, "pipelined_plain_decode", lambda *a, **k: calls.append(1) or original(*a, **k)
    )
    plain(model, SamplingSettings(), 8, pipelined=True)
    assert calls == [1]
    plain(model, SamplingSettings(), 8, pipelined=False)
    assert calls == [1]


def test_greedy_tokens_equal_one_pass_at_a_time_and_mlx_lm(model):
    queued, _, _ = plain(model, SamplingSettings(), 40, pipelined=True)
    one_by_one, _, _ = plain(model, SamplingSettings(), 40, pipelined=False)
    assert queued == one_by_one == reference_greedy(model, PROMPT, 40)


def test_sampled_tokens_equal_one_pass_at_a_time(model):
    queued, _, _ = plain(model, SAMPLED, 40, pipelined=True)
    one_by_one, _, _ = plain(model, SAMPLED, 40, pipelined=False)
    assert queued == one_by_one
    assert len(set(queued)) > 3  # really sampled, not a stuck loop


@pytest.mark.parametrize("stop_after", [1, 5, 39])
def test_stopping_early_leaves_the_cache_ready_to_go_on(model, stop_after):
    whole, _, _ = plain(model, SamplingSettings(), 40, pipelined=True)
    first, target, history = plain(
        model, SamplingSettings(), 40, pipelined=True, stop_after=stop_after
    )
    rest, _, _ = plain(
        model, SamplingSettings(), 40 - stop_after, pipelined=True, target=target, history=history
    )
    assert first + rest == whole


def test_a_processor_or_a_mirrored_target_decodes_one_pass_at_a_time(model, monkeypatch):
    monkeypatch.setattr(
        decode,
        "pipelined_plain_decode",
        lambda *a, **k: pytest.fail("pipelined with a logits processor"),
    )
    plain(model, SamplingSettings(repetition_penalty=1.3), 8, pipelined=True)
    from engine.runtime.distributed import MirroredTarget

    assert MirroredTarget.pipelines is False
