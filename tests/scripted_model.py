"""A scripted target for testing the decode loop's mechanics exactly.

At cache position p it predicts ``script[p + 1]`` whatever the inputs, with a real
trimmable mlx-lm KV cache, so greedy decoding after a prompt of length L emits
``script[L:]`` and the drafter alone decides how many passes that takes.
"""

import mlx.core as mx
from mlx_lm.models.cache import KVCache


class ScriptedModel:
    def __init__(self, script, vocab_size=None):
        self.script = list(script)
        self.vocab_size = vocab_size or max(self.script) + 1
        self.layers = [None]
        self.calls = 0

    def make_cache(self):
        return [KVCache()]

    def __call__(self, inputs, cache):
        self.calls += 1
        count = inputs.shape[1]
        start = cache[0].offset
        placeholder = mx.zeros((1, 1, count, 1))
        cache[0].update_and_fetch(placeholder, placeholder)
        targets = mx.array([self.script[start + i + 1] for i in range(count)])
        return (mx.arange(self.vocab_size)[None] == targets[:, None]).astype(mx.float32)[
            None
        ] * 10.0
