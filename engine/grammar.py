"""Constrained decoding: answers that follow a JSON schema (``response_format``).

llguidance (a maintained grammar engine, also behind llama.cpp's and vLLM's structured
output) keeps a matcher in step with the answer; at each position its token mask sets the
logits of every token the grammar forbids to -inf, after the logits processors, so the
target's choice is the constrained model's choice. Under speculation a draft is cut at its
first token the grammar forbids before it is sent, each verify row gets the mask of the
state after the draft tokens before it, and the matcher then takes only the emitted tokens:
the output equals constrained plain decoding.
"""

from __future__ import annotations

from collections.abc import Sequence

import mlx.core as mx
import numpy as np

from .errors import EngineError

# one-line JSON with a space after "," and ":" (where free whitespace is allowed a model can
# spend its whole answer on blanks)
JSON_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
_built: list = [None, None]  # (tokenizer, its LLTokenizer): the loaded model's, one at a time


def _lltokenizer(tokenizer, vocab_size: int):
    """llguidance's view of the tokenizer (about a second to build), kept for the next answer."""
    import llguidance.hf

    if _built[0] is not tokenizer:
        backend = getattr(tokenizer, "_tokenizer", tokenizer)
        try:
            built = llguidance.hf.from_tokenizer(backend, n_vocab=vocab_size,
                                                 eos_token=sorted(tokenizer.eos_token_ids))
        except Exception as error:  # e.g. a slow (Python) tokenizer
            raise EngineError(f"'response_format' needs a fast tokenizer here ({error}).") from None
        _built[:] = [tokenizer, built]
    return _built[1]


class GrammarConstraint:
    """The matcher of one answer; its state always follows the emitted tokens."""

    def __init__(self, tokenizer, schema: dict, vocab_size: int):
        try:
            from llguidance import LLMatcher
        except ImportError:
            raise EngineError("'response_format' needs the llguidance package "
                              "(pip install llguidance).") from None
        lltokenizer = _lltokenizer(tokenizer, vocab_size)
        try:
            grammar = LLMatcher.grammar_from_json_schema(schema, defaults=JSON_LAYOUT)
            self.matcher = LLMatcher(lltokenizer, grammar)
            error = self.matcher.get_error() if self.matcher.is_error() else None
        except (ValueError, TypeError) as raised:
            error = str(raised)
        if error:
            raise EngineError(f"'response_format' has a schema this server cannot follow: "
                              f"{error}")
        self.vocab_size = vocab_size

    def allowed(self, draft: Sequence[int]) -> int:
        """How many leading ``draft`` tokens the grammar allows from here."""
        return self.matcher.validate_tokens(list(draft))

    def masks(self, tokens: Sequence[int], count: int) -> mx.array:
        """[count, vocab] booleans: row i is what the grammar allows after ``tokens[:i]``
        (which it must allow); the matcher's state is left as it was."""
        rows, consumed = [], 0
        for i in range(count):
            rows.append(np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint8))
            if i < count - 1 and not self.matcher.is_stopped():  # (stopped: only the end)
                if not self.matcher.consume_token(tokens[i]):
                    raise EngineError("The grammar refused a token it had allowed.")
                consumed += 1
        if consumed:
            self.matcher.rollback(consumed)
        bits = np.unpackbits(np.stack(rows), axis=1, bitorder="little")[:, :self.vocab_size]
        return mx.array(bits.astype(np.bool_))

    def accept(self, tokens: Sequence[int]) -> None:
        """The matcher takes the emitted ``tokens`` (once the grammar is complete, the
        end-of-sequence token it allowed needs no taking)."""
        for token in tokens:
            if self.matcher.is_stopped():
                return
            if not self.matcher.consume_token(token):
                raise EngineError("The grammar refused an emitted token.")
