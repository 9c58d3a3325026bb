"""Constrained decoding (a JSON schema through llguidance): speculation equals constrained
plain decoding, mlx-lm's generate_step with the same mask as a logits processor, and a
draft token the grammar forbids is never sent to the target."""

import json

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.generate import generate_step

from engine.loop.decode import Target, TokenChooser, speculative_decode
from engine.drafters import make_drafter
from engine.formats.grammar import GrammarConstraint, json_schema_grammar
from engine.settings import DraftSettings, SamplingSettings

from .tiny_model import make_tiny_llama, write_byte_tokenizer

llguidance = pytest.importorskip("llguidance")

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
    },
    "required": ["name", "tags"],
    "additionalProperties": False,
}
VOCAB = 259


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from mlx_lm.tokenizer_utils import load

    folder = tmp_path_factory.mktemp("byte-tokenizer")
    write_byte_tokenizer(folder)
    return load(folder)


@pytest.fixture(scope="module")
def model():
    return make_tiny_llama(seed=3)


def prompt_of(tokenizer):
    text = 'Answer {"name": "abab", "tags": ["abab", "abab", "abab"]} ' * 3
    return list(tokenizer.encode(text, add_special_tokens=False))


def reference(model, tokenizer, prompt, count):
    """mlx-lm's plain decoding with the grammar's mask as a logits processor."""
    constraint = GrammarConstraint(tokenizer, json_schema_grammar(SCHEMA), VOCAB)
    fed = [len(prompt)]

    def mask(tokens, logits):
        constraint.accept(tokens[fed[0] :].tolist())
        fed[0] = len(tokens)
        return mx.where(constraint.masks([], 1), logits, -mx.inf)

    tokens, rows = [], []
    for token, logprobs in generate_step(
        mx.array(prompt, dtype=mx.uint32), model, max_tokens=count, logits_processors=[mask]
    ):
        tokens.append(int(token))
        rows.append(logprobs)
        if int(token) in tokenizer.eos_token_ids:
            break
    return tokens, rows


def constrained(model, tokenizer, prompt, drafter, count, logprobs=3):
    target = Target(model)
    history = list(prompt)
    target.prefill(history[:-1])
    drafts = make_drafter(
        DraftSettings(drafter=drafter, draft_count=8, ngram_order=3, ngram_min=1, adaptive=False)
    )
    drafts.reset(history)
    constraint = GrammarConstraint(tokenizer, json_schema_grammar(SCHEMA), VOCAB)
    chooser = TokenChooser(SamplingSettings(), logprobs, constraint)
    results = list(
        speculative_decode(
            target,
            drafts,
            chooser,
            history,
            max_tokens=count,
            draft_count=8,
            eos_tokens=set(tokenizer.eos_token_ids),
        )
    )
    return history[len(prompt) :], results


@pytest.mark.parametrize("drafter", ["none", "prompt-lookup"])
def test_constrained_speculation_equals_constrained_plain_decoding(model, tokenizer, drafter):
    prompt = prompt_of(tokenizer)
    expected, rows = reference(model, tokenizer, prompt, 80)
    tokens, results = constrained(model, tokenizer, prompt, drafter, 80)
    assert tokens == expected
    values = [v for r in results for v in r.logprobs]
    for row, token, (value, top) in zip(rows, tokens, values):
        assert value == pytest.approx(row[token].item(), abs=1e-4)
        assert top[0][0] == token  # greedy
    if drafter != "none":
        assert sum(r.accepted for r in results) > 0, "no draft accepted: the test proves nothing"
    text = tokenizer.decode([t for t in tokens if t not in tokenizer.eos_token_ids])
    if tokens[-1] in tokenizer.eos_token_ids:  # finished: valid JSON of the schema
        answer = json.loads(text)
        assert set(answer) == {"name", "tags"}
    else:
        assert text.startswith("{")


def test_a_draft_token_the_grammar_forbids_is_never_sent(model, tokenizer, monkeypatch):
    prompt = prompt_of(tokenizer)
    sent, cut = [], []
    forward = Target.forward

    def spy(self, tokens):
        sent.append((self.offset, list(tokens)))
        return forward(self, tokens)

    allowed = GrammarConstraint.allowed

    def counting(self, draft):
        count = allowed(self, draft)
        cut.append(count < len(draft))
        return count

    monkeypatch.setattr(Target, "forward", spy)
    monkeypatch.setattr(GrammarConstraint, "allowed", counting)
    monkeypatch.setattr(GrammarConstraint, "forced", lambda self: [])  # the drafter drafts
    tokens, _ = constrained(model, tokenizer, prompt, "prompt-lookup", 80, logprobs=None)
    assert any(cut), "no draft held a forbidden token: the test proves nothing"
    history = prompt + tokens
    for offset, inputs in sent:
        check = GrammarConstraint(tokenizer, json_schema_grammar(SCHEMA), VOCAB)
        check.accept(history[len(prompt) : offset + 1])
        assert check.allowed(inputs[1:]) == len(inputs) - 1


def test_what_the_grammar_forces_is_drafted_and_kept(model, tokenizer, monkeypatch):
    """Keys, quotes and separators the schema forces go out as a draft of their own (the
    drafter is not asked that pass): fewer passes, the same tokens."""
    prompt = prompt_of(tokenizer)
    tokens, results = constrained(model, tokenizer, prompt, "prompt-lookup", 80, logprobs=None)
    forced = GrammarConstraint.forced
    drafted_by_grammar = []

    def spy(self):
        drafted_by_grammar.append(forced(self))
        return drafted_by_grammar[-1]

    sent, forward = [], Target.forward

    def sending(self, tokens):
        sent.append((self.offset, list(tokens)))
        return forward(self, tokens)

    monkeypatch.setattr(GrammarConstraint, "forced", spy)
    monkeypatch.setattr(Target, "forward", sending)
    again, _ = constrained(model, tokenizer, prompt, "prompt-lookup", 80, logprobs=None)
    passes = list(sent)  # the prompt is read by prefill, not forward
    monkeypatch.setattr(GrammarConstraint, "forced", lambda self: [])
    unforced, plain_passes = constrained(model, tokenizer, prompt, "prompt-lookup", 80, None)
    assert tokens == again == unforced
    assert tokenizer.decode(drafted_by_grammar[0]).startswith('{"name": "')
    assert len(results) < len(plain_passes), "the grammar's drafts saved no pass"
    history = prompt + tokens
    assert len(passes) == len(results)
    for offset, inputs in passes:  # the grammar allows every draft it made
        check = GrammarConstraint(tokenizer, json_schema_grammar(SCHEMA), VOCAB)
        check.accept(history[len(prompt) : offset + 1])
        assert check.allowed(inputs[1:]) == len(inputs) - 1


def test_masks_leave_the_matcher_where_it_was(tokenizer):
    constraint = GrammarConstraint(tokenizer, json_schema_grammar(SCHEMA), VOCAB)
    opening = list(tokenizer.encode('{"name"', add_special_tokens=False))
    masks = np.array(constraint.masks(opening, len(opening) + 1))
    assert masks.shape == (len(opening) + 1, VOCAB)
    assert all(masks[i, t] for i, t in enumerate(opening))
    assert constraint.allowed(opening) == len(opening)  # still at the start
    assert masks[0].sum() == 1  # only "{" may open the object


def test_a_bad_schema_is_an_error_naming_response_format(tokenizer):
    from engine.errors import EngineError

    with pytest.raises(EngineError, match="response_format"):
        GrammarConstraint(
            tokenizer,
            json_schema_grammar({"type": "object", "properties": {"a": {"$ref": "#/nope"}}}),
            VOCAB,
        )


class QuoteGuesser:
    """Guesses the whole answer '"abab"' on the first pass: the grammar forces its quote, the
    letter after it is the model's choice, so it must be checked against the sample."""

    name, drafts, multi_row, wants_target_topk = "quote-guesser", True, False, 0

    def __init__(self, tokenizer):
        self.guess = list(tokenizer.encode('"abab"', add_special_tokens=False))
        self.first = True

    def propose(self, k):
        from engine.drafters.base import Proposal

        rows, self.first = ([self.guess[:k]] if self.first else []), False
        return Proposal(rows, 1)

    def observe(self, emitted, **details):
        pass


def test_sampled_answers_with_the_grammars_drafts_follow_constrained_sampling(
    model, tokenizer, monkeypatch
):
    """Sampled, under a schema whose answers differ in their first letter (the grammar forces
    the quote before it and the rest after it): answers drawn with the grammar's drafts and a
    guess of the letter must be distributed as constrained plain sampling's, and a chooser
    that keeps drafts unchecked must not be (so the test can fail)."""
    from collections import Counter

    from .identity import CHI_SQUARE_CRITICAL, chi_square

    schema = {"type": "string", "enum": ["abab", "baba", "cbcb", "dcdc"]}
    prompt, runs = prompt_of(tokenizer), 300

    def answers(drafting: bool, seed: int, chooser_class=TokenChooser) -> Counter:
        mx.random.seed(seed)
        drawn = Counter()
        for _ in range(runs):
            target, history = Target(model), list(prompt)
            target.prefill(history[:-1])
            if drafting:
                drafts = QuoteGuesser(tokenizer)
            else:
                drafts = make_drafter(DraftSettings(drafter="none", adaptive=False))
            constraint = GrammarConstraint(tokenizer, json_schema_grammar(schema), VOCAB)
            chooser = chooser_class(SamplingSettings(temperature=1.0), None, constraint)
            eos = set(tokenizer.eos_token_ids)
            results = list(
                speculative_decode(
                    target, drafts, chooser, history, max_tokens=12, draft_count=8, eos_tokens=eos
                )
            )
            answer = [t for t in history[len(prompt) :] if t not in eos]
            drawn[schema["enum"].index(json.loads(tokenizer.decode(answer)))] += 1
            drawn["accepted"] += sum(r.accepted for r in results)
        return drawn

    class NoCheck(TokenChooser):
        def choose(self, logits, history, draft):
            chosen = super().choose(logits, history, draft)
            return list(draft) + chosen[len(draft) :]

    plain, drafted = answers(False, seed=21), answers(True, seed=22)
    assert plain.pop("accepted") == 0 and drafted.pop("accepted") > runs  # quote, letter, rest
    assert chi_square(plain, drafted, 4) < CHI_SQUARE_CRITICAL
    broken = answers(True, seed=23, chooser_class=NoCheck)
    broken.pop("accepted")
    assert chi_square(plain, broken, 4) > 5 * CHI_SQUARE_CRITICAL


# Hostile schemas: refused before compiling, or, when the grammar engine fails mid-answer,
# the server's fault (a 500 with the grammar in the log), never a silent or a client error

MUTUAL_REFS = {  # every A holds a B and every B an A: no finite instance
    "$defs": {
        "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}, "required": ["b"]},
        "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]},
    },
    "$ref": "#/$defs/A",
}


@pytest.mark.parametrize(
    "schema,named",
    [
        ({"type": "string", "allOf": [{"pattern": "^.*0.*$"}] * 160}, "160 regular expressions"),
        ({"type": "string", "allOf": [{"pattern": "^.*0.*$"}] * 2000}, "2,000 anyOf/oneOf/allOf"),
        ({"anyOf": [{"const": i} for i in range(5000)]}, "5,000 anyOf/oneOf/allOf"),
        (
            {"anyOf": [{"type": "object", "required": [f"k{i}"]} for i in range(5000)]},
            "more than 8,192 objects and arrays",
        ),
        (json.loads('{"items": ' * 100 + "{}" + "}" * 100), "more than 64 levels"),
        ({"type": "string", "description": "x" * 70_000}, "70,034 characters"),
        (MUTUAL_REFS, "#/$defs/A, #/$defs/B always lead back"),
        ({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}, "through #"),
    ],
)
def test_a_schema_past_a_limit_is_refused_before_compiling_naming_it(schema, named, monkeypatch):
    from engine.errors import EngineError

    def never(*args, **kwargs):
        raise AssertionError("compiled")

    monkeypatch.setattr(llguidance.LLMatcher, "grammar_from_json_schema", never)
    with pytest.raises(EngineError, match="^'response_format' .*" + named.replace("$", r"\$")):
        json_schema_grammar(schema)


def test_recursive_schemas_with_a_way_out_are_compiled(tokenizer):
    tree = {
        "$defs": {
            "N": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}}},
                "required": ["kids"],
            }
        },
        "$ref": "#/$defs/N",
    }
    optional = {**MUTUAL_REFS, "$ref": "#/$defs/A", "required": []}
    optional["$defs"] = {**MUTUAL_REFS["$defs"], "A": {**MUTUAL_REFS["$defs"]["A"], "required": []}}
    for schema in (tree, optional):
        GrammarConstraint(tokenizer, json_schema_grammar(schema), VOCAB)


def test_a_grammar_failing_mid_answer_is_an_internal_error_logged_with_the_grammar(
    tokenizer, caplog
):
    """The mutual references, past the schema check: llguidance runs out of parser items
    computing what "{" forces. That is the engine's failure, not the client's."""
    from engine.errors import EngineError

    from engine.formats.grammar import JSON_LAYOUT

    grammar = llguidance.LLMatcher.grammar_from_json_schema(MUTUAL_REFS, defaults=JSON_LAYOUT)
    opening = list(tokenizer.encode('{"', add_special_tokens=False))
    constraint = GrammarConstraint(tokenizer, grammar, VOCAB)
    assert np.array(constraint.masks([], 1))[0, opening[0]]  # only "{" may open it
    with pytest.raises(EngineError, match="^Internal error: .*server's fault"):
        constraint.accept(opening[:1])
    assert any('"$defs"' in record.getMessage() for record in caplog.records)
    with pytest.raises(EngineError, match="^Internal error"):  # never an end-only mask
        constraint.masks([], 1)
    with pytest.raises(EngineError, match="^Internal error"):
        GrammarConstraint(tokenizer, grammar, VOCAB).masks(opening, 2)


def test_a_forced_call_writes_only_the_keys_its_tool_names(tmp_path):
    """A parameters schema without ``additionalProperties`` is closed for a forced call:
    the grammar refuses an invented key at its first character, nested objects too, and
    allows the call that keeps to the schema; a free-form object stays open."""
    from engine.formats.grammar import tool_call_grammar

    from .tool_model import load_tool_tokenizer

    tokenizer = load_tool_tokenizer(tmp_path)
    where = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "near": {"type": "object", "properties": {}}},
        "required": ["city"],
    }
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {**where, "properties": {**where["properties"], "extra": {}}},
        },
    }

    def allowed(arguments: str) -> tuple[int, int]:
        grammar = tool_call_grammar(tokenizer, [weather], ["get_weather"])
        constraint = GrammarConstraint(tokenizer, grammar, VOCAB, "tool_choice")
        text = f'<tool_call>{{"name": "get_weather", "arguments": {arguments}}}</tool_call>'
        tokens = list(tokenizer.encode(text, add_special_tokens=False))
        return constraint.allowed(tokens), len(tokens)

    good = '{"city": "x", "near": {}, "extra": {"any": 1}}'
    assert allowed(good)[0] == allowed(good)[1]
    prefix = '<tool_call>{"name": "get_weather", "arguments": '
    for invented, kept in (
        ('{"city": "x", "country": "y"}', '{"city": "x", "'),  # no key begins with "c"
        ('{"city": "x", "near": {"zip": 1}}', '{"city": "x", "near": {'),  # only "}"
    ):
        assert allowed(invented)[0] == len(prefix) + len(kept)
