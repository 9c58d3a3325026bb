"""The adaptive policy's acceptance counts kept across launches (``engine.policy.acceptance_store``):
what one service learned is where the next one starts; benchmarks never read or write it;
a bad file is set aside and the policy starts from its priors."""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace

import pytest

from engine.policy.acceptance_store import acceptance_path
from engine.policy.adaptive import AdaptiveMemory
from engine.policy.draft_policy import Choice, MatchClass, PassOutcome
from engine.policy.verify_cost import CostCurve

KEY = "some-model"
DRAFTER = SimpleNamespace(name="suffix", rows_per_pass=1)
CURVE = CostCurve({1: 1.0, 65: 1.0}, fixed=True)


def taught(memory: AdaptiveMemory, constrained: bool = False):
    """A policy that saw medium matches kept 0 times and copies kept 8 tokens deep, often."""
    policy = memory.policy(KEY, DRAFTER, CURVE, constrained)
    for _ in range(12):
        policy.record(Choice(8, 1, MatchClass.MEDIUM), PassOutcome(8, 0, 0.01, 8))
        policy.record(Choice(8, 1, MatchClass.COPY), PassOutcome(8, 8, 0.01, 8))
    return policy


def expected(policy, klass) -> list[float]:
    return policy.tracker(klass).expected_tokens(8)


def test_a_new_service_memory_starts_where_the_last_one_left_off(private_dirs):
    first = AdaptiveMemory(persist=True)
    first_policy = taught(first)
    first.save_acceptance()
    kept = json.loads(acceptance_path(KEY).read_text())["drafters"]["suffix"]["free"]
    # positions never reached are not written: copies were kept 8 deep, medium matches never
    reached = {MatchClass(int(k)): len(counts["reached"]) for k, counts in kept.items()}
    assert reached == {MatchClass.MEDIUM: 1, MatchClass.COPY: 8}

    later = AdaptiveMemory(persist=True).policy(KEY, DRAFTER, CURVE)
    cold = AdaptiveMemory().policy(KEY, DRAFTER, CURVE)
    for klass in (MatchClass.MEDIUM, MatchClass.COPY):
        assert expected(later, klass) == pytest.approx(expected(first_policy, klass))
        assert expected(later, klass) != pytest.approx(expected(cold, klass))
    # answers under a grammar keep counts of their own, not taught here
    constrained = AdaptiveMemory(persist=True).policy(KEY, DRAFTER, CURVE, constrained=True)
    assert expected(constrained, MatchClass.COPY) == pytest.approx(expected(cold, MatchClass.COPY))


def test_counts_of_a_drafter_not_used_since_are_kept_on_the_next_save(private_dirs):
    first = AdaptiveMemory(persist=True)
    taught(first)
    first.save_acceptance()
    other = SimpleNamespace(name="prompt-lookup", rows_per_pass=1)
    second = AdaptiveMemory(persist=True)
    second.policy(KEY, other, CURVE).record(
        Choice(4, 1, MatchClass.SHORT), PassOutcome(4, 1, 0.01, 4)
    )
    second.save_acceptance()
    drafters = json.loads(acceptance_path(KEY).read_text())["drafters"]
    assert set(drafters) == {"suffix", "prompt-lookup"}
    third = AdaptiveMemory(persist=True).policy(KEY, DRAFTER, CURVE)
    assert expected(third, MatchClass.COPY)[0] > 0.95


def test_a_benchmark_memory_neither_reads_nor_writes_the_file(private_dirs):
    saved = AdaptiveMemory(persist=True)
    taught(saved)
    saved.save_acceptance()
    kept = acceptance_path(KEY).read_bytes()
    cold = AdaptiveMemory().policy(KEY, DRAFTER, CURVE)
    fresh = AdaptiveMemory(persist=True)
    assert expected(cold, MatchClass.COPY) != pytest.approx(
        expected(fresh.policy(KEY, DRAFTER, CURVE), MatchClass.COPY)
    )
    benchmark = AdaptiveMemory()
    benchmark.policy(KEY, DRAFTER, CURVE).record(
        Choice(8, 1, MatchClass.COPY), PassOutcome(8, 0, 0.01, 8)
    )
    benchmark.save_acceptance()
    assert acceptance_path(KEY).read_bytes() == kept


GOOD = {"accepted": [1.0, 0.5], "reached": [2.0, 1.0], "bonus": [0, 0], "alternatives": [0, 0]}


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        json.dumps({"version": 99, "drafters": {}}),
        json.dumps({"version": 1, "drafters": {"suffix": {"sometimes": {}}}}),
        json.dumps({"version": 1, "drafters": {"suffix": {"free": {"42": GOOD}}}}),
        json.dumps(
            {"version": 1, "drafters": {"suffix": {"free": {"3": {**GOOD, "accepted": [3, 0]}}}}}
        ),
        json.dumps(
            {"version": 1, "drafters": {"suffix": {"free": {"3": {**GOOD, "reached": [2, -1]}}}}}
        ),
        json.dumps({"version": 1, "drafters": {"suffix": {"free": {"3": {**GOOD, "bonus": 1}}}}}),
        json.dumps(
            {"version": 1, "drafters": {"suffix": {"free": {"3": {**GOOD, "reached": [1e999]}}}}}
        ),
    ],
    ids=[
        "not json",
        "another version",
        "unknown kind",
        "unknown class",
        "more kept than reached",
        "negative",
        "gain not a pair",
        "infinite",
    ],
)
def test_a_bad_file_is_set_aside_and_the_policy_starts_from_its_priors(
    private_dirs, caplog, content
):
    path = acceptance_path(KEY)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with caplog.at_level(logging.WARNING):
        policy = AdaptiveMemory(persist=True).policy(KEY, DRAFTER, CURVE)
    cold = AdaptiveMemory().policy(KEY, DRAFTER, CURVE)
    assert expected(policy, MatchClass.COPY) == pytest.approx(expected(cold, MatchClass.COPY))
    assert not path.exists() and list(path.parent.glob(f"{path.name}.corrupt-*"))
    assert "acceptance file" in caplog.text and "starts from its priors" in caplog.text


def test_the_service_keeps_what_an_answer_taught(private_dirs, tiny_model_dir):
    from engine.events import DoneEvent
    from engine.policy.verify_cost import curve_from_spec
    from engine.runtime.model_ngrams import model_key
    from engine.runtime.service import EngineService
    from engine.settings import DraftSettings, GenerationRequest

    service = EngineService()
    request = GenerationRequest(
        messages=[{"role": "user", "content": "abcabcabc abcabc abcabc"}],
        model=str(tiny_model_dir),
        max_tokens=24,
        # a curve to plan on (a model never measured here decodes plainly)
        draft=DraftSettings(
            drafter="prompt-lookup", draft_count=4, cost_curve=curve_from_spec("flat-2pct")
        ),
    )

    async def run():
        return [event async for event in service.generate(request)]

    try:
        events = asyncio.run(run())
    finally:
        service.shutdown()
    assert isinstance(events[-1], DoneEvent) and events[-1].stats["drafted"] > 0
    path = acceptance_path(model_key(service._loaded))
    assert "prompt-lookup" in json.loads(path.read_text())["drafters"]


def test_an_oversized_or_irregular_file_is_not_read(private_dirs, caplog):
    """A file past the size cap, or a folder in its place, is set aside unread."""
    from engine.policy.acceptance_store import MAX_ACCEPTANCE_FILE_BYTES

    path = acceptance_path(KEY)
    path.parent.mkdir(parents=True)
    for plant in (
        lambda: path.write_bytes(b" " * (MAX_ACCEPTANCE_FILE_BYTES + 1)),
        lambda: path.mkdir(),
    ):
        plant()
        with caplog.at_level(logging.WARNING):
            policy = AdaptiveMemory(persist=True).policy(KEY, DRAFTER, CURVE)
        cold = AdaptiveMemory().policy(KEY, DRAFTER, CURVE)
        assert expected(policy, MatchClass.COPY) == pytest.approx(expected(cold, MatchClass.COPY))
        assert not path.exists() and "acceptance file" in caplog.text
        caplog.clear()
