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
- ``vllm-suffix``: vLLM's ``SuffixDecodingProposer`` with its defaults (tree depth 24, up
  to 24 tokens, ``max_spec_factor`` 1, ``min_token_prob`` 0.1) over arctic-inference's
  ``SuffixDecodingCache``: one suffix tree of the request (prompt and answer so far), one of
  every earlier answer; for each match length m of the last 23 tokens, the path of most
  frequent children, at most m tokens, while the product of the frequency ratios stays at or
  above 0.1; the path of highest summed probability wins (the longer match on ties, the
  request's own tree over the answers' tree). Nothing is drafted on the prompt's own pass
  (vLLM drafts after sampling). Its host time is not charged: the real tree is C++, this
  replay is Python. Among children of equal count it takes the one that reached that count
  first; arctic's sibling lists order them differently in some cases, and its arithmetic is
  float32: ``tests/test_peer_fidelity.py`` bounds the difference.
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

    @classmethod
    def for_run(cls, run: dict) -> "_CopyPeer":
        return cls()

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


class SuffixTrie:
    """arctic-inference's suffix tree, uncompressed: a node per distinct string of at most
    ``depth`` tokens, counting its occurrences (the one ending now included)."""

    def __init__(self, depth: int):
        self.depth, self.root, self.open = depth, [0, {}], {}  # node: [count, children]

    def append(self, sequence: int, token: int) -> None:
        open_nodes = self.open.setdefault(sequence, [])
        open_nodes.append(self.root)  # the suffix starting at this token
        self.root[0] += 1
        if len(open_nodes) > self.depth:
            open_nodes.pop(0)
        for i, node in enumerate(open_nodes):
            child = node[1].get(token)
            if child is None:
                child = node[1][token] = [0, {}]
            child[0] += 1
            open_nodes[i] = child

    def speculate(self, context: list[int], limit: int, factor: float, min_prob: float):
        """(score, path): the best path over every match length, as arctic's ``speculate``."""
        best: tuple[float, list[int]] = (0.0, [])
        for length in range(1, len(context)):
            node = self.root
            for token in context[-length:]:
                node = node[1].get(token)
                if node is None:
                    return best
            path, prob, score = [], 1.0, 0.0
            most = min(limit, int(length * factor + 1e-6))
            while len(path) < most:
                if not node[1]:
                    break
                token, child = max(node[1].items(), key=lambda item: item[1][0])
                prob *= child[0] / node[0]
                if prob < min_prob:
                    break
                path.append(token)
                score += prob
                node = child
            if score >= best[0]:
                best = (score, path)
        return best


class VllmSuffixPeer(Drafter):
    """vLLM's suffix decoding; one instance per chat sharing ``answers`` (the global tree)."""

    name = "vllm-suffix"
    summary = "vLLM suffix decoding: most frequent path in the request's or the answers' tree"
    draft_count = DEPTH = 24
    factor, min_prob = 1.0, 0.1
    charge_host_time = False

    def __init__(self, answers: SuffixTrie | None = None):
        super().__init__(None)
        self.answers = answers or SuffixTrie(self.DEPTH)
        self.request = SuffixTrie(self.DEPTH)
        self.tokens: list[int] = []
        self.answered = self.sequence = 0

    @classmethod
    def for_run(cls, run: dict) -> "VllmSuffixPeer":
        """One vLLM server answering the run's chats: the answers' tree is shared."""
        return cls(run.setdefault(cls.name, SuffixTrie(cls.DEPTH)))

    def reset(self, prompt_tokens: Sequence[int]) -> None:
        self.tokens = []
        self.extend(prompt_tokens)

    def extend(self, tokens: Sequence[int]) -> None:  # a new request: the whole chat so far
        self.tokens += [int(t) for t in tokens]
        self.request, self.answered = SuffixTrie(self.DEPTH), 0
        self.sequence = len(self.answers.open)  # a new sequence in the answers' tree
        for token in self.tokens:
            self.request.append(0, token)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None) -> None:
        for token in emitted:
            self.tokens.append(int(token))
            self.request.append(0, int(token))
            self.answers.append(self.sequence, int(token))
        self.answered += len(emitted)

    def propose(self, k: int) -> Proposal:
        if not self.answered:
            return Proposal()
        context = self.tokens[-self.DEPTH :]
        limit = min(k, self.draft_count)
        mine = self.request.speculate(context, limit, self.factor, self.min_prob)
        theirs = self.answers.speculate(context, limit, self.factor, self.min_prob)
        return Proposal([(mine if mine[0] >= theirs[0] else theirs)[1]])


PEER_DRAFTERS = {cls.name: cls for cls in (HFPromptLookupPeer, VllmNgramPeer, VllmSuffixPeer)}
