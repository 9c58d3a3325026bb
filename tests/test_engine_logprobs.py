"""Log-probabilities and presence/frequency penalties in the decode loop: speculation gives
the same tokens and the same log-probabilities as plain decoding (mlx-lm's generate_step)."""

import mlx.core as mx
import pytest
from mlx_lm.generate import generate_step
from mlx_lm.sample_utils import make_logits_processors

from engine.drafters import make_drafter
from engine.loop.decode import Target, TokenChooser, speculative_decode
from engine.runtime.model_ngrams import bigram_table
from engine.settings import DraftSettings, SamplingSettings

from .tiny_model import make_tiny_llama

PROMPT = [40 + (i % 9) for i in range(60)]  # repetitive: drafts get accepted
TOP = 5


@pytest.fixture(scope="module")
def model():
    return make_tiny_llama(seed=1)


def reference(model, processors=None, count=40):
    """mlx-lm's plain decoding: (tokens, log-probability rows)."""
    tokens, rows = [], []
    for token, logprobs in generate_step(
        mx.array(PROMPT, dtype=mx.uint32), model, max_tokens=count, logits_processors=processors
    ):
        tokens.append(int(token))
        rows.append(logprobs)
    return tokens, rows


def decode(model, drafter, sampling=None, logprobs=TOP, count=40):
    """Our loop: (tokens, per-token (logprob, top), tokens accepted from drafts)."""
    target = Target(model)
    history = list(PROMPT)
    target.prefill(history[:-1])
    drafts = make_drafter(
        DraftSettings(drafter=drafter, draft_count=6, ngram_order=3, ngram_min=1, adaptive=False)
    )
    if drafts.wants_model_bigram:
        table = bigram_table(model, "tiny-logprobs")
        drafts.attach_model("tiny-logprobs", bigram=table)
    drafts.reset(history)
    chooser = TokenChooser(sampling or SamplingSettings(), logprobs)
    results = list(
        speculative_decode(
            target, drafts, chooser, history, max_tokens=count, draft_count=6, eos_tokens=set()
        )
    )
    values = [v for r in results for v in (r.logprobs or [None] * len(r.tokens))]
    return history[len(PROMPT) :], values, sum(r.accepted for r in results)


def assert_same_logprobs(expected_rows, tokens, values):
    for row, token, (value, top) in zip(expected_rows, tokens, values):
        assert value == pytest.approx(row[token].item(), abs=1e-4)
        expected_top = mx.argsort(-row)[:TOP].tolist()
        assert [t for t, _ in top] == expected_top
        assert [v for _, v in top] == pytest.approx(row[mx.array(expected_top)].tolist(), abs=1e-4)


@pytest.mark.parametrize("drafter", ["none", "prompt-lookup", "ngrammys"])
def test_greedy_logprobs_equal_plain_decoding(model, drafter):
    expected, rows = reference(model)
    tokens, values, accepted = decode(model, drafter)
    assert tokens == expected
    assert_same_logprobs(rows, tokens, values)
    if drafter != "none":
        assert accepted > 0, "no draft was accepted: the test would prove nothing"


def test_logprobs_are_off_by_default(model):
    _, values, _ = decode(model, "prompt-lookup", logprobs=None, count=8)
    assert values == [None] * 8
    assert TokenChooser(SamplingSettings()).queueable  # plain decoding stays pipelined


@pytest.mark.parametrize("presence,frequency", [(0.8, None), (None, 0.6), (1.5, -0.5)])
def test_presence_and_frequency_penalties_speculate_losslessly(model, presence, frequency):
    processors = make_logits_processors(presence_penalty=presence, frequency_penalty=frequency)
    expected, rows = reference(model, processors)
    sampling = SamplingSettings(presence_penalty=presence, frequency_penalty=frequency)
    plain, _, _ = decode(model, "none", sampling, logprobs=None)
    assert plain == expected
    for drafter in ("prompt-lookup", "ngrammys"):
        tokens, values, accepted = decode(model, drafter, sampling)
        assert tokens == expected and accepted > 0
        assert_same_logprobs(rows, tokens, values)  # after the penalties, as mlx-lm reports
