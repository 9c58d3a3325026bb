"""Grammars compile within a budget (engine/formats/grammar_budget.py): the 128-regex schema that
wedged the engine gets a bounded refusal, a request that stops kills its compile, a compile
past its memory dies alone, and the next grammar compiles at once in the same process."""

import sys

import pytest

import engine.formats.grammar_budget as grammar_budget
from engine.errors import EngineError
from engine.formats.grammar import GrammarConstraint, json_schema_grammar
from engine.formats.schemas import check_schema

from .schema_bombs import compact_size, reference_chain, regex_bomb, widest_within
from .tiny_model import write_byte_tokenizer

pytest.importorskip("llguidance")
VOCAB = 259
SIMPLE = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from mlx_lm.tokenizer_utils import load

    folder = tmp_path_factory.mktemp("byte-tokenizer")
    write_byte_tokenizer(folder)
    return load(folder)


def trials_of(tokenizer):
    """The TrialCompiler of ``tokenizer`` (built with its first grammar)."""
    GrammarConstraint(tokenizer, json_schema_grammar(SIMPLE), VOCAB)
    from engine.formats.grammar import _built

    assert _built[0] is tokenizer
    return _built[2]


def test_the_128_regex_schema_gets_a_bounded_refusal_and_the_next_grammar_compiles(tokenizer):
    schema = regex_bomb()
    assert 4_000 < compact_size(schema) < 6_000
    check_schema(schema, "response_format")  # within every static limit
    trials = trials_of(tokenizer)
    stopped = trials.stopped
    with pytest.raises(EngineError, match="does not compile within 1 s and 256 MB"):
        GrammarConstraint(tokenizer, json_schema_grammar(schema), VOCAB)
    assert trials.stopped == stopped + 1
    constraint = GrammarConstraint(tokenizer, json_schema_grammar(SIMPLE), VOCAB)
    answer = list(tokenizer.encode('{"name": "a"}', add_special_tokens=False))
    assert constraint.allowed(answer) == len(answer)


def test_a_request_that_stops_kills_its_compile(tokenizer):
    """The server's time cap (or a client gone) stops the compile at once, well before the
    budget; the process then compiles the next grammar."""
    trials = trials_of(tokenizer)
    stopped = trials.stopped
    looks = []

    def should_stop() -> bool:
        looks.append(True)
        return len(looks) > 3  # a few polls (tens of milliseconds) into the compile

    with pytest.raises(EngineError, match="stopped while its grammar was compiling"):
        GrammarConstraint(
            tokenizer, json_schema_grammar(regex_bomb(96)), VOCAB, should_stop=should_stop
        )
    assert len(looks) == 4 and trials.stopped == stopped + 1
    GrammarConstraint(tokenizer, json_schema_grammar({"type": "integer"}), VOCAB)


def test_a_grammar_that_compiled_is_not_compiled_again_in_the_process(tokenizer):
    trials = trials_of(tokenizer)
    jobs = trials._job
    for _ in range(3):
        GrammarConstraint(tokenizer, json_schema_grammar(SIMPLE), VOCAB)
    assert trials._job == jobs


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the memory limit is Linux's")
def test_a_compile_past_its_memory_dies_alone(tokenizer, monkeypatch):
    from engine.formats.grammar import JSON_LAYOUT, PARSER_LIMITS, _serialized
    from llguidance import LLMatcher

    monkeypatch.setattr(grammar_budget, "COMPILE_MEMORY_BYTES", 24 << 20)
    monkeypatch.setattr(grammar_budget, "COMPILE_SECONDS", 60.0)  # memory binds first
    trials = grammar_budget.TrialCompiler(
        _serialized(tokenizer._tokenizer), VOCAB, sorted(tokenizer.eos_token_ids), PARSER_LIMITS
    )
    try:
        bomb = LLMatcher.grammar_from_json_schema(regex_bomb(), defaults=JSON_LAYOUT)
        with pytest.raises(EngineError, match=r"within 60 s and 24 MB here \(out of memory\)"):
            trials.check(bomb, "format")
        simple = LLMatcher.grammar_from_json_schema(SIMPLE, defaults=JSON_LAYOUT)
        trials.check(simple, "format")
        assert trials.stopped == 1
    finally:
        trials.close()


def test_a_grammar_the_grammar_engine_crashes_on_crashes_only_its_child(tokenizer):
    """The longest $ref chain within the limits: llguidance 1.9.1 overflows its stack on it
    (a segmentation fault that took the whole server down before); now a refusal."""
    trials = trials_of(tokenizer)
    chain = widest_within(reference_chain, 1, 10_000)
    with pytest.raises(EngineError, match="^'response_format' "):
        GrammarConstraint(tokenizer, json_schema_grammar(chain), VOCAB)
    GrammarConstraint(tokenizer, json_schema_grammar({"type": "boolean"}), VOCAB)
    assert trials._ready


def test_a_grammar_that_compiled_is_not_held_up_by_another_compiling(tokenizer):
    """A request's grammar is trial-compiled before its turn, so another request's compile
    may hold the compiler while an answer in its turn checks its own, already passed: that
    check must not wait for the other's budget (the engine's turn would wait with it)."""
    import threading
    import time

    trials = trials_of(tokenizer)  # SIMPLE has compiled
    simple = json_schema_grammar(SIMPLE)
    compiling = threading.Thread(
        target=lambda: pytest.raises(
            EngineError, trials.check, json_schema_grammar(regex_bomb()), "f"
        )
    )
    compiling.start()
    time.sleep(0.2)  # the bomb holds the compiler for its 1 s budget
    began = time.monotonic()
    trials.check(simple, "response_format")
    waited = time.monotonic() - began
    compiling.join()
    assert waited < 0.3, waited  # else about 0.8 s, the rest of the bomb's budget
