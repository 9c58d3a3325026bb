"""The Hugging Face peer, replayed, drafts as the real transformers does.

The benchmark of 2026-11-23 ran transformers' prompt lookup (torch CPU, the same weights,
``prompt_lookup_num_tokens=10``, ``max_matching_ngram_size=2``) on every turn of the check
set's copy-heavy chats and counted its forward calls per answer (``data/``). Replaying ``hf-prompt-lookup`` (engine/bench/peer_drafters.py)
over the same greedy answers must need the same number of passes: the device table charges
that peer on other machines' verify-cost curves, so a replay that drafted better or worse
than transformers would make the comparison a straw man.

transformers drafts on its first forward call too (prefill and verify in one call), so the
replay starts at the prompt and its passes count that call. The data file holds each answer's
prompt and greedy answer as token ids (the embedded model's answers, whose lengths matched
transformers'), so the replay runs without the model.
"""

import json
from pathlib import Path

import pytest

from engine.bench.peer_drafters import HFPromptLookupPeer, VllmSuffixPeer
from engine.bench.tune import simulate
from engine.policy.adaptive import AdaptiveMemory

RECORDED = Path(__file__).parent / "data" / "hf_prompt_lookup_calls.json"


def _recorded_hf_run() -> dict:
    peer = json.loads(RECORDED.read_text())
    assert peer["prompt_lookup_num_tokens"] == HFPromptLookupPeer.draft_count
    assert peer["max_matching_ngram_size"] == max(HFPromptLookupPeer.sizes)
    return peer


def test_hf_prompt_lookup_replay_needs_the_forward_calls_transformers_made():
    recorded = _recorded_hf_run()
    eos = recorded["eos"]
    replayed_calls, real_calls = 0, 0
    for row in recorded["rows"]:
        result = simulate(
            [{"prompt": row["prompt"], "answer": row["answer"], "stop": False}],
            "peer",
            HFPromptLookupPeer.draft_count,
            False,
            AdaptiveMemory(),
            "peer",
            {n: 1.0 for n in range(1, 64)},
            eos,
            drafter=HFPromptLookupPeer(),
        )
        assert result["emitted"] == len(row["answer"]) == row["new_tokens"]
        replayed = result["passes"]
        assert abs(replayed - row["calls"]) <= 0.05 * row["calls"], row["workload"]
        replayed_calls += replayed
        real_calls += row["calls"]
    assert replayed_calls == pytest.approx(real_calls, rel=0.05)


VLLM_SUFFIX = Path(__file__).parent / "data" / "vllm_suffix_decoding_passes.json"


def test_vllm_suffix_replay_needs_the_passes_arctic_inference_made():
    """vLLM's suffix decoding is arctic-inference's C++ suffix tree, which needs a build this
    project does not ship. It was built once and run over the check set's answers as vLLM's
    proposer runs it (``data/vllm_suffix_decoding_passes.json`` holds the tokens and its
    passes per answer); the replay, fed the same tokens in the same order with one shared
    answers' tree, must need the same passes within 5% per answer and over all."""
    recorded = json.loads(VLLM_SUFFIX.read_text())
    assert recorded["num_speculative_tokens"] == VllmSuffixPeer.draft_count
    assert recorded["max_tree_depth"] == VllmSuffixPeer.DEPTH
    assert (recorded["max_spec_factor"], recorded["min_token_prob"]) == (
        VllmSuffixPeer.factor,
        VllmSuffixPeer.min_prob,
    )
    run, replayed_passes, real_passes = {}, 0, 0
    for row in recorded["rows"]:
        result = simulate(
            [{"prompt": row["prompt"], "answer": row["answer"], "stop": False}],
            "peer",
            VllmSuffixPeer.draft_count,
            False,
            AdaptiveMemory(),
            "peer",
            {n: 1.0 for n in range(1, 64)},
            -1,
            drafter=VllmSuffixPeer.for_run(run),
        )
        assert result["emitted"] == len(row["answer"])
        assert abs(result["passes"] - row["passes"]) <= max(1, 0.05 * row["passes"]), row["chat"]
        replayed_passes += result["passes"]
        real_passes += row["passes"]
    assert len(recorded["rows"]) == 25
    assert replayed_passes == pytest.approx(real_passes, rel=0.05)
    # and it is a peer that drafts: far fewer passes than tokens
    assert real_passes < 0.5 * sum(len(row["answer"]) for row in recorded["rows"])
