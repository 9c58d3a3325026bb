"""Peers' drafting rules as replay-only strategies (benchmark only, not in the app's list).

Each follows the drafter protocol, so ``tune.simulate`` replays it with the peer's fixed
draft count and charges its passes on any curve: peers are judged on the same curve.
- ``hf-prompt-lookup``: transformers' ``PromptLookupCandidateGenerator`` with its defaults
  (``max_matching_ngram_size=2``, ``num_output_tokens=10``): for n = 2, then 1, the
  **earliest** earlier occurrence of the last n tokens; the up to 10 tokens after it, never
  past the end of the sequence. It needs the forward calls real transformers 5.23 made on
  the 12 check-set answers it was run on (``tests/test_peer_fidelity.py``).
- ``vllm-ngram``: vLLM's ``_find_longest_matched_ngram_and_propose_tokens``: the longest
  suffix of 1 to 4 tokens that occurred before, its earliest occurrence, the up to 5 tokens
  after it (vLLM's documented example); from the source only (vLLM needs CUDA).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..drafters.base import Drafter, Proposal


class _CopyPeer(Drafter):
    """A peer that copies what followed an earlier occurrence of the history's end."""

    name = "peer"
    summary = "benchmark only"
    draft_count = 10
    sizes: tuple[int, ...] = (2, 1)  # n-gram sizes tried, in order

    def __init__(self, settings=None):
        super().__init__(settings)
        self.tokens: list[int] = []
        self.first_at: dict[tuple, int] = {}  # n-gram -> where its first occurrence ends

    def reset(self, prompt_tokens: Sequence[int]) -> None:
        self.tokens, self.first_at = [], {}
        self.observe(prompt_tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None) -> None:
        for token in emitted:
            self.tokens.append(int(token))
            end = len(self.tokens)
            for n in self.sizes:
                if end >= n:
                    self.first_at.setdefault(tuple(self.tokens[end - n : end]), end)

    def propose(self, k: int) -> Proposal:
        tokens, end = self.tokens, len(self.tokens)
        k = min(k, self.draft_count)
        for n in self.sizes:
            if end < n:
                continue
            start = self.first_at.get(tuple(tokens[end - n :]))
            if start is not None and start < end:  # an earlier occurrence, not the end itself
                return Proposal([tokens[start : min(start + k, end)]], n)
        return Proposal()


class HFPromptLookupPeer(_CopyPeer):
    name = "hf-prompt-lookup"
    summary = "Hugging Face prompt lookup: earliest match of the last 2, then 1 tokens; 10 tokens"
    draft_count = 10
    sizes = (2, 1)


class VllmNgramPeer(_CopyPeer):
    name = "vllm-ngram"
    summary = "vLLM n-gram proposer: longest suffix match (1..4), earliest occurrence; 5 tokens"
    draft_count = 5
    sizes = (4, 3, 2, 1)


PEER_DRAFTERS = {cls.name: cls for cls in (HFPromptLookupPeer, VllmNgramPeer)}
