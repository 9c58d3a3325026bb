"""Constrained decoding: answers that follow a JSON schema (``response_format``) or must
call one of the tools (``tool_choice`` "required" or a named function).

llguidance (a maintained grammar engine, also behind llama.cpp's and vLLM's structured
output) keeps a matcher in step with the answer; at each position its token mask sets the
logits of every token the grammar forbids to -inf, after the logits processors, so the
target's choice is the constrained model's choice. Under speculation a draft is cut at its
first token the grammar forbids before it is sent, each verify row gets the mask of the
state after the draft tokens before it, and the matcher then takes only the emitted tokens:
the output equals constrained plain decoding. Each grammar first compiles within a budget in
a process that can be killed (grammar_budget.py), so no schema can wedge the engine.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence

import mlx.core as mx
import numpy as np

from ..errors import EngineError
from .generic_tools import answer_schema
from .grammar_budget import TrialCompiler
from .schemas import check_schema, forced_call_schema

log = logging.getLogger(__name__)

# one-line JSON with a space after "," and ":" (where free whitespace is allowed a model can
# spend its whole answer on blanks)
JSON_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
# the tool-call markup a forced call is written in: mlx-lm's json_tools parser's
JSON_TOOLS_PARSER = "mlx_lm.tool_parsers.json_tools"
# (tokenizer, its LLTokenizer, its TrialCompiler): the loaded model's, one at a time; built
# under the lock (a request's trial may run off the engine thread, before its turn)
_built: list = [None, None, None]
_building = threading.Lock()
# llguidance's resource limits (LLParserLimits), its defaults but for the lexer's states:
# 1-2 kB each by its documentation, so 50,000 keep the lexer near 100 MB (default 250,000);
# no schema within engine/formats/schemas.py's limits came near it. A limit hit at the start is a
# schema this server cannot constrain (a 400); mid-answer, it is the server's failure.
MAX_LEXER_STATES = 50_000
PARSER_LIMITS = {"max_lexer_states": MAX_LEXER_STATES}
# how much of the grammar the log keeps when constrained decoding fails (a schema within
# engine/formats/schemas.py's limits is at most 64 KiB)
LOGGED_GRAMMAR_CHARS = 70_000


def _matcher_class(field: str):
    try:
        from llguidance import LLMatcher
    except ImportError:
        raise EngineError(
            f"'{field}' needs the llguidance package (pip install llguidance)."
        ) from None
    return LLMatcher


def json_schema_grammar(schema: dict, field: str = "response_format") -> str:
    """The grammar of one-line JSON following ``schema`` (within engine/formats/schemas.py's
    limits); ``field``: the request field the schema came from, named in errors."""
    check_schema(schema, field)
    try:
        return _matcher_class(field).grammar_from_json_schema(schema, defaults=JSON_LAYOUT)
    except (ValueError, TypeError) as error:
        raise EngineError(f"'{field}' has a schema this server cannot follow: {error}") from None


def generic_tool_grammar(
    tools: list[dict], forced: Sequence[str] | None, parallel: bool = True
) -> str:
    """The grammar of a generic-format answer (engine/formats/generic_tools.py): calls to the tools
    (``forced``: to those; ``parallel`` False: one), or where none is forced, a reply."""
    return json_schema_grammar(answer_schema(tools, forced, parallel), "tools")


def tool_call_grammar(tokenizer, tools: list[dict], names: Sequence[str]) -> str:
    """The grammar of one call, in the model's ``<tool_call>{json}</tool_call>`` markup, to
    one of the tools ``names``, its arguments following the tool's parameter schema."""
    parser = getattr(getattr(tokenizer, "tool_parser", None), "__module__", None)
    if parser != JSON_TOOLS_PARSER:
        raise EngineError(
            "'tool_choice' can force a call only for models whose tool calls are "
            "<tool_call>{json}</tool_call> (mlx-lm's json_tools parser); use "
            "\"auto\"."
        )
    schema = forced_call_schema(tools, names)
    check_schema(schema, "tools")
    schema = {**schema, "x-guidance": JSON_LAYOUT}
    return (
        f'start: "{tokenizer.tool_call_start}" "\\n"? call "\\n"? '
        f'"{tokenizer.tool_call_end}"\ncall: %json {json.dumps(schema)}'
    )


def _lltokenizer(tokenizer, vocab_size: int, field: str):
    """llguidance's view of the tokenizer (about a second to build) and the
    ``TrialCompiler`` that holds it too, kept for the next answer."""
    from llguidance import LLTokenizer

    with _building:
        if _built[0] is not tokenizer:
            backend = getattr(tokenizer, "_tokenizer", tokenizer)
            try:
                serialized = _serialized(backend)
                eos = sorted(tokenizer.eos_token_ids)
                built = LLTokenizer(serialized, n_vocab=vocab_size, eos_token=eos)
            except Exception as error:  # e.g. a slow (Python) tokenizer
                raise EngineError(f"'{field}' needs a fast tokenizer here ({error}).") from None
            if _built[2] is not None:
                _built[2].close()
            trials = TrialCompiler(serialized, vocab_size, eos, PARSER_LIMITS)
            _built[:] = [tokenizer, built, trials]
        return _built[1], _built[2]


def trial_compile(
    tokenizer, grammar: str, vocab_size: int, field: str, should_stop: Callable[[], bool]
):
    """Return ``tokenizer``'s LLTokenizer once ``grammar`` has compiled within
    engine/formats/grammar_budget.py's budget in a process that can be stopped
    (``should_stop``: the request's stop); raise an EngineError naming ``field`` when it did
    not. Safe from any thread; a grammar that passed passes again at once."""
    lltokenizer, trials = _lltokenizer(tokenizer, vocab_size, field)
    trials.check(grammar, field, should_stop)
    return lltokenizer


def _serialized(backend) -> str:
    """A fast tokenizer as the JSON llguidance reads (as ``llguidance.hf`` makes it)."""
    from copy import copy

    rust = copy(backend.backend_tokenizer)
    rust.no_padding()
    rust.no_truncation()
    return rust.to_str()


class GrammarConstraint:
    """The matcher of one answer; its state always follows the emitted tokens. ``field``:
    the request field the grammar came from, named in errors."""

    def __init__(
        self,
        tokenizer,
        grammar: str,
        vocab_size: int,
        field: str = "response_format",
        should_stop: Callable[[], bool] = lambda: False,
    ):
        """Compile ``grammar`` once it has compiled within engine/formats/grammar_budget.py's
        budget in a process that can be stopped (``should_stop``: the request's stop)."""
        from llguidance import LLParserLimits

        matcher_class = _matcher_class(field)
        lltokenizer = trial_compile(tokenizer, grammar, vocab_size, field, should_stop)
        self.grammar = grammar
        try:
            self.matcher = matcher_class(
                lltokenizer, grammar, limits=LLParserLimits(**PARSER_LIMITS)
            )
            error = self.matcher.get_error() if self.matcher.is_error() else None
        except (ValueError, TypeError) as raised:
            error = str(raised)
        if error:
            raise EngineError(f"'{field}' asks for output this server cannot constrain: {error}")
        self.vocab_size = vocab_size

    def allowed(self, draft: Sequence[int]) -> int:
        """How many leading ``draft`` tokens the grammar allows from here."""
        count = self.matcher.validate_tokens(list(draft))
        self._check("checking a draft")
        return count

    def forced(self) -> list[int]:
        """What the grammar forces from here (a key, its quotes and colon), as llguidance
        tokenizes it: a draft the target keeps unless it spells the same text otherwise."""
        if self.matcher.is_stopped():
            return []
        forced = list(self.matcher.compute_ff_tokens())
        self._check("computing the forced text")
        return forced

    def masks(self, tokens: Sequence[int], count: int) -> mx.array:
        """[count, vocab] booleans: row i is what the grammar allows after ``tokens[:i]``
        (which it must allow); the matcher's state is left as it was."""
        rows, consumed = [], 0
        for i in range(count):
            rows.append(np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint8))
            self._check("computing a mask")
            if i < count - 1 and not self.matcher.is_stopped():  # (stopped: only the end)
                if not self.matcher.consume_token(tokens[i]):
                    raise self._failure("it refused a draft token it had allowed")
                consumed += 1
        if consumed:
            self.matcher.rollback(consumed)
        bits = np.unpackbits(np.stack(rows), axis=1, bitorder="little")[:, : self.vocab_size]
        if not bits.any(axis=1).all():
            raise self._failure("it allowed no token at all")
        return mx.array(bits.astype(np.bool_))

    def accept(self, tokens: Sequence[int]) -> None:
        """The matcher takes the emitted ``tokens`` (once the grammar is complete, the
        end-of-sequence token it allowed needs no taking)."""
        for token in tokens:
            if self.matcher.is_stopped():
                return
            if not self.matcher.consume_token(token):
                raise self._failure("it refused a token chosen under its own mask")

    def _check(self, doing: str) -> None:
        if self.matcher.is_error():
            raise self._failure(doing)

    def _failure(self, what: str) -> EngineError:
        """The error for a matcher that failed mid-answer (a resource limit hit, or an
        invariant broken: every token it takes was chosen under its own mask), logged
        with the grammar: the server's fault, never the request's."""
        reason = self.matcher.get_error().split("\n", 1)[0] or what
        log.error(
            "Constrained decoding failed (%s; %s). Grammar: %s",
            what,
            reason,
            self.grammar[:LOGGED_GRAMMAR_CHARS],
        )
        return EngineError(
            f"Internal error: constrained decoding failed mid-answer ({reason}). This is "
            "the server's fault, not the request's; please report it with the server's log."
        )
