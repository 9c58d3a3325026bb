"""Seeded sampling whose draw at each position depends only on (seed, position).

Sampling is Gumbel-max: the token is ``argmax(filtered / temperature + g)``, with ``g``
standard Gumbel noise over the vocabulary, which draws from the same distribution as
mlx-lm's ``categorical_sampling`` (itself Gumbel-max over one global random state). Here
the noise for the token at sequence index ``p`` (its index in prompt + answer) comes from a
key made of the seed and ``p`` alone, so the token sampled there is the same whatever pass
verifies it: a one-token pass, row ``i`` of a draft's pass, or any node of a tree at that
depth. A draft token is kept exactly when it equals that sample, so a seeded answer under
speculation is plain decoding's answer for that seed, token for token, whatever was drafted.

The filters (top-p, min-p, top-k: mlx-lm's own, in mlx-lm's order) apply to the
log-probabilities after the logits processors and the grammar's mask, as in mlx-lm.
Without a seed, one is drawn from MLX's global random state for each answer, so answers
differ run to run (and ``mx.random.seed`` makes a run of unseeded answers repeatable).
"""

from __future__ import annotations

import hashlib

import mlx.core as mx
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p

from ..settings import SamplingSettings


def random_seed() -> int:
    """A fresh 62-bit seed from MLX's global random state."""
    high, low = mx.random.randint(0, 1 << 31, (2,)).tolist()
    return (high << 31) | low


def position_key(seed: int, position: int) -> mx.array:
    """The random key of sequence index ``position`` under ``seed``: a hash of both (so no
    two (seed, position) pairs share a key the way ``seed + position`` would)."""
    digest = hashlib.blake2b(f"{seed}:{position}".encode(), digest_size=8).digest()
    return mx.random.key(int.from_bytes(digest, "little"))


class PositionSampler:
    """Samples row ``i`` of a logits array as the token at sequence index
    ``position + i``, with noise keyed on (seed, that index)."""

    def __init__(self, sampling: SamplingSettings):
        self.temperature = sampling.temperature
        self.top_p = sampling.top_p
        self.min_p = sampling.min_p
        self.top_k = sampling.top_k
        self.seed = sampling.seed if sampling.seed is not None else random_seed()

    def filtered(self, logprobs: mx.array) -> mx.array:
        """``logprobs`` with what top-p, min-p and top-k leave out set to -inf."""
        if 0 < self.top_p < 1.0:
            logprobs = apply_top_p(logprobs, self.top_p)
        if self.min_p != 0.0:
            logprobs = apply_min_p(logprobs, self.min_p)
        if 0 < self.top_k < logprobs.shape[-1]:  # at least the vocabulary: nothing to cut
            logprobs = apply_top_k(logprobs, self.top_k)
        return logprobs

    def noise(self, rows: int, vocabulary: int, position: int) -> mx.array:
        """Gumbel noise [rows, vocabulary] for the sequence indices from ``position``: each
        row drawn from its own key, in one batched operation (``mx.vmap``; the same rows as
        drawing each alone, which the tests check)."""
        keys = mx.stack([position_key(self.seed, position + i) for i in range(rows)])
        return mx.vmap(lambda key: mx.random.gumbel((vocabulary,), key=key))(keys)

    def __call__(self, logits: mx.array, position: int) -> mx.array:
        """The sampled token of each row of ``logits`` [rows, vocabulary], not computed yet."""
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        scaled = self.filtered(logprobs) * (1.0 / self.temperature)
        return mx.argmax(scaled + self.noise(*logits.shape, position), axis=-1)
