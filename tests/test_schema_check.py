"""engine/formats/schemas.py's check cannot explode: its work is linear in the schema's size and
within its step budget (counted, not timed), on generated schemas nested to the limits and
on the reported bombs; its verdict on references is the least fixed point it always was."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import EngineError
from engine.formats.schemas import (
    MAX_CHECK_STEPS,
    MAX_SCHEMA_DEPTH,
    NAMED_REFERENCES,
    STEPS_PER_CHAR,
    CheckedSchema,
    check_schema,
    schema_check_steps,
)

from .schema_bombs import compact_size, deep_required, reference_chain, widest_within

NAMES = ("a", "b", "c")
DEFINITIONS = ("A", "B", "C", "D")


def verdict(schema) -> str:
    try:
        check_schema(schema, "schema")
    except EngineError as error:
        return str(error)
    return "ok"


def within_budget(schema) -> int:
    """The check's steps on ``schema``, asserted linear in its size and within budget."""
    steps = schema_check_steps(schema)
    assert steps <= MAX_CHECK_STEPS
    assert steps <= STEPS_PER_CHAR * compact_size(schema), (steps, compact_size(schema))
    return steps


# -- a naive reference: the old check's fixed point, rounds over every target, with the
# required names made distinct (its only exponential part), for small schemas


def naive_endless(schema) -> list[str]:
    targets = {}
    pending = [schema]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            reference = value.get("$ref")
            if isinstance(reference, str) and reference not in targets:
                target = naive_resolve(schema, reference)
                if target is not None:
                    targets[reference] = target
            pending.extend(reversed(list(value.values())))  # in document order
        elif isinstance(value, list):
            pending.extend(reversed(value))
    ends = dict.fromkeys(targets, False)
    changed = True
    while changed:
        changed = False
        for reference in targets:
            if not ends[reference] and naive_can_end(targets[reference], ends):
                ends[reference] = changed = True
    if naive_can_end(schema, ends):
        return []
    return [reference for reference, done in ends.items() if not done]


def naive_can_end(value, ends) -> bool:
    if not isinstance(value, dict):
        return value is not False
    reference = value.get("$ref")
    if isinstance(reference, str) and not ends.get(reference, True):
        return False
    if isinstance(value.get("allOf"), list) and not all(
        naive_can_end(part, ends) for part in value["allOf"]
    ):
        return False
    for key in ("anyOf", "oneOf"):
        if value.get(key) and isinstance(value[key], list):
            if not any(naive_can_end(part, ends) for part in value[key]):
                return False
    properties = value.get("properties")
    if isinstance(properties, dict) and isinstance(value.get("required"), list):
        for name in dict.fromkeys(value["required"]):
            if isinstance(name, str) and not naive_can_end(properties.get(name, True), ends):
                return False
    least = value.get("minItems")
    if isinstance(least, int) and least > 0:
        prefix = value.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        if not all(naive_can_end(part, ends) for part in prefix[:least]):
            return False
        if least > len(prefix) and not naive_can_end(value.get("items", True), ends):
            return False
    return True


def naive_resolve(schema, reference):
    if reference != "#" and not reference.startswith("#/"):
        return None
    value = schema
    for part in reference[2:].split("/") if reference != "#" else []:
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return value


# -- generated schemas: objects whose required names repeat, references between
# definitions (chains and cycles), unions, arrays that need items, and `false`

leaves = st.one_of(
    st.just({"type": "string"}),
    st.just({"type": "integer"}),
    st.booleans(),
    st.sampled_from(DEFINITIONS + ("#", "X")).map(
        lambda name: {"$ref": name if name == "#" else f"#/$defs/{name}"}
    ),
    st.just({"type": "string", "pattern": "^[a-z]+$"}),
)


def nested(children):
    objects = st.builds(
        lambda properties, required: {
            "type": "object",
            "properties": properties,
            "required": required,
        },
        st.dictionaries(st.sampled_from(NAMES), children, max_size=3),
        st.lists(st.sampled_from(NAMES), max_size=6),  # repeats: the old check's bomb
    )
    unions = st.builds(
        lambda key, parts: {key: parts},
        st.sampled_from(("anyOf", "oneOf", "allOf")),
        st.lists(children, min_size=1, max_size=3),
    )
    arrays = st.builds(
        lambda least, prefix, items: {
            "type": "array",
            "minItems": least,
            "prefixItems": prefix,
            "items": items,
        },
        st.integers(0, 3),
        st.lists(children, max_size=2),
        children,
    )
    referring = st.builds(
        lambda name, rest: {"$ref": f"#/$defs/{name}", **rest},
        st.sampled_from(DEFINITIONS),
        objects,
    )
    return st.one_of(objects, unions, arrays, referring)


schemas = st.builds(
    lambda definitions, root: (
        {"$defs": definitions, **root}
        if isinstance(root, dict)
        else {"$defs": definitions, "allOf": [root]}
    ),
    st.dictionaries(
        st.sampled_from(DEFINITIONS), st.recursive(leaves, nested, max_leaves=12), max_size=4
    ),
    st.recursive(leaves, nested, max_leaves=20),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas)
def test_generated_schemas_are_checked_in_linear_steps_with_the_old_verdict(schema):
    within_budget(schema)
    outcome = verdict(schema)
    endless = naive_endless(schema)
    if endless:
        named = ", ".join(endless[:NAMED_REFERENCES])
        assert "no JSON value that ends" in outcome and f"through {named} " in outcome
    else:
        assert "no JSON value that ends" not in outcome


def scaled(core, depth: int, repeats: int, copies: int) -> dict:
    """A generated schema grown to the limits: ``copies`` of it side by side under ``allOf``,
    wrapped ``depth`` deep in objects that each require their property ``repeats`` times."""
    schema = {"allOf": [core] * copies}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"p": schema}, "required": ["p"] * repeats}
    return schema


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    schemas,
    st.integers(0, MAX_SCHEMA_DEPTH // 3),
    st.integers(1, 64),
    st.sampled_from(["depth", "repeats", "copies"]),
)
def test_generated_schemas_grown_to_the_limits_stay_within_the_budget(core, depth, repeats, grow):
    """The same schemas, nested as deep as the depth limit allows and widened (more repeats,
    or more copies) until the next step would pass the size limit."""
    grown = {
        "depth": lambda n: scaled(core, min(n, MAX_SCHEMA_DEPTH // 3), repeats, 1),
        "repeats": lambda n: scaled(core, depth, n, 1),
        "copies": lambda n: scaled(core, depth, repeats, n),
    }[grow]
    within_budget(widest_within(grown, 1, 40_000))


@pytest.mark.parametrize(
    "schema",
    [
        # the reported bomb's shape (2.5 KB, within every limit): the old check walked
        # 17 ** 21 paths
        deep_required(21, 17),
        deep_required(MAX_SCHEMA_DEPTH // 3, 30),  # as deep as the limit allows
        widest_within(lambda n: deep_required(20, n), 1, 20_000),  # as wide as it allows
        widest_within(reference_chain, 1, 10_000),  # the $ref chain, as long as fits
        widest_within(lambda n: {"anyOf": [{"$ref": "#"}] * n, "required": ["x"] * n}, 1, 30_000),
        {"type": "string", "allOf": [{"pattern": "^.*0.*$"}] * 2000},  # refused on its count
    ],
    ids=["required-bomb", "required-deepest", "required-widest", "ref-chain", "wide", "regexes"],
)
def test_the_bombs_are_checked_within_the_budget(schema):
    within_budget(schema)
    verdict(schema)


def test_a_chain_of_references_that_ends_passes_and_a_cycle_is_named():
    chain = widest_within(reference_chain, 1, 10_000)
    assert verdict(chain) == "ok"
    length = len(chain) - 2  # the definitions that refer on, the root's $ref aside
    looped = {**chain, f"{length:x}": {"$ref": "#/0"}}  # the last leads back to the first
    outcome = verdict(looped)
    assert "no JSON value that ends" in outcome and "#/0, #/1, #/2" in outcome
    assert verdict(deep_required(21, 17)) == "ok"


def test_past_the_step_budget_the_check_stops_with_a_400_naming_the_limit():
    """A list of 600,000 values (a 1.2 MB body) walks past the budget and is refused there,
    before its size is even measured."""
    schema = {"enum": [0] * 600_000}
    with pytest.raises(EngineError, match=f"more than {MAX_CHECK_STEPS:,} steps"):
        check_schema(schema, "response_format")
    assert schema_check_steps(schema) == MAX_CHECK_STEPS + 1


def test_a_checked_schema_is_marked_and_not_checked_again():
    checked = check_schema({"type": "object"}, "response_format")
    assert isinstance(checked, CheckedSchema) and checked == {"type": "object"}
    assert check_schema(checked, "response_format") is checked
    assert schema_check_steps(checked) == 0
