"""Lossless, greedy form: speculative output equals plain greedy output, token for token."""

import pytest

from engine.drafters import DRAFTERS
from engine.settings import DraftSettings

from .identity import reference_greedy, speculative
from .tiny_model import make_tiny_llama

# the other drafters, with options that make them draft on short outputs, are covered
# in test_drafters_identity.py; test_every_registered_drafter_is_identity_tested checks that
BASE_DRAFTERS = ["none", "frequency", "prompt-lookup"]


@pytest.fixture(scope="module")
def tiny_models():
    return [make_tiny_llama(seed=seed, layers=2, hidden=64) for seed in (1, 2)]


def tiny_prompts():
    repetitive = [40 + (i % 9) for i in range(60)]
    novel = [(i * 37 + 11) % 250 + 3 for i in range(50)]
    return {"repetitive": repetitive, "novel": novel}


@pytest.mark.parametrize("drafter", BASE_DRAFTERS)
@pytest.mark.parametrize("draft_count,order", [(1, 2), (3, 4), (8, 3), (16, 8)])
def test_greedy_identity_on_a_tiny_random_llama(tiny_models, drafter, draft_count, order):
    accepted = 0
    for model in tiny_models:
        for prompt in tiny_prompts().values():
            expected = reference_greedy(model, prompt, 48)
            settings = DraftSettings(
                drafter=drafter,
                draft_count=draft_count,
                ngram_order=order,
                ngram_min=1,
                adaptive=False,
            )
            got, results = speculative(model, prompt, 48, settings)
            assert got == expected
            accepted += sum(r.accepted for r in results)
    if drafter != "none":
        assert accepted > 0, "no draft was ever accepted: the test would prove nothing"


EMBEDDED_PROMPTS = {
    "repetitive": "Repeat the following line three times, exactly: red green blue yellow purple",
    "novel": "Write a short poem about a lighthouse keeper who discovers a new color.",
}


@pytest.mark.embedded
@pytest.mark.parametrize("kind", EMBEDDED_PROMPTS)
def test_greedy_identity_on_the_embedded_model(embedded_loaded, kind):
    tokenizer = embedded_loaded.tokenizer
    prompt = list(
        tokenizer.apply_chat_template(
            [{"role": "user", "content": EMBEDDED_PROMPTS[kind]}], add_generation_prompt=True
        )
    )
    expected = reference_greedy(embedded_loaded.model, prompt, 40)
    total_accepted = 0
    for drafter, count in (("prompt-lookup", 4), ("frequency", 6)):
        settings = DraftSettings(drafter=drafter, draft_count=count, ngram_order=4, adaptive=False)
        got, results = speculative(embedded_loaded.model, prompt, 40, settings)
        assert got == expected, f"{drafter} diverged from plain greedy decoding"
        total_accepted += sum(r.accepted for r in results)
    if kind == "repetitive":
        assert total_accepted > 0


def test_repetition_penalty_is_applied_per_position_as_plain_decoding_does(tiny_models):
    from mlx_lm.sample_utils import make_logits_processors

    from engine.settings import SamplingSettings

    from .identity import reference_greedy_with_processors

    prompt = tiny_prompts()["repetitive"]
    for model in tiny_models:
        expected = reference_greedy_with_processors(
            model, prompt, 40, make_logits_processors(repetition_penalty=5.0)
        )
        assert expected != reference_greedy(model, prompt, 40), "the penalty must change the output"
        for drafter in ("prompt-lookup", "frequency"):
            got, _ = speculative(
                model,
                prompt,
                40,
                DraftSettings(drafter=drafter, draft_count=4, adaptive=False),
                SamplingSettings(repetition_penalty=5.0),
            )
            assert got == expected


@pytest.mark.embedded
def test_repetition_penalty_with_accepted_drafts_on_the_embedded_model(embedded_loaded):
    from mlx_lm.sample_utils import make_logits_processors

    from engine.settings import SamplingSettings

    from .identity import reference_greedy_with_processors

    prompt = list(
        embedded_loaded.tokenizer.apply_chat_template(
            [{"role": "user", "content": EMBEDDED_PROMPTS["repetitive"]}],
            add_generation_prompt=True,
        )
    )
    expected = reference_greedy_with_processors(
        embedded_loaded.model, prompt, 32, make_logits_processors(repetition_penalty=1.2)
    )
    got, results = speculative(
        embedded_loaded.model,
        prompt,
        32,
        DraftSettings(drafter="prompt-lookup", draft_count=4, adaptive=False),
        SamplingSettings(repetition_penalty=1.2),
    )
    assert got == expected
    assert sum(r.accepted for r in results) > 0


def test_every_registered_drafter_is_identity_tested():
    from .test_drafters_identity import NEW

    assert set(DRAFTERS) == set(BASE_DRAFTERS) | set(NEW)


@pytest.mark.parametrize("drafter", ["suffix", "prompt-lookup"])
def test_greedy_identity_with_the_calibrated_policy(tiny_models, drafter):
    """The calibrated policy only chooses how much to send: output stays plain greedy."""
    from engine.drafters import make_drafter
    from engine.policy.calibrated_policy import PolicyMemory
    from engine.policy.verify_cost import CostCurve

    from .identity import run_with_policy

    accepted = 0
    memory = PolicyMemory(policy_kind="calibrated")
    for model in tiny_models:
        for prompt in tiny_prompts().values():
            settings = DraftSettings(drafter=drafter, draft_count=8, policy="calibrated")
            flat = CostCurve({1: 0.010, 8: 0.011, 64: 0.012})  # drafts pay: the policy sends
            policy = memory.policy("tiny", make_drafter(settings), flat)
            got, results = run_with_policy(model, prompt, 48, settings, policy)
            assert got == reference_greedy(model, prompt, 48)
            accepted += sum(r.accepted for r in results)
    assert accepted > 0, "no draft was ever accepted: the test would prove nothing"
