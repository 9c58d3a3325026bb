"""Cold start: a first answer drafts as much as its match class usually earns."""

import pytest

from engine import adaptive
from engine.adaptive import AdaptiveMemory, AdaptivePolicy, CostCurve

CURVE = {1: 0.100, 5: 0.164, 9: 0.200, 17: 0.220, 33: 0.324}  # flat, as on this CPU


class _Drafter:
    name = "copying"
    rows_per_pass = 1


def test_a_class_prior_sets_the_first_draft_length():
    flat = AdaptivePolicy(CostCurve(CURVE)).draft_length(16, match_length=24)
    sure = AdaptivePolicy(CostCurve(CURVE), priors={adaptive.match_class(24): (0.95, 0.05)})
    assert sure.draft_length(16, match_length=24) > flat
    assert sure.draft_length(16, match_length=24) >= 8
    # other classes keep the flat prior
    assert sure.draft_length(16, match_length=1) == AdaptivePolicy(CostCurve(CURVE)).draft_length(
        16, match_length=1
    )


def test_memory_hands_the_drafters_priors_to_its_policies(monkeypatch):
    monkeypatch.setattr(adaptive, "CLASS_PRIORS", {"copying": {0: (0.1, 0.9)}})
    memory = AdaptiveMemory()
    memory.curves["m"] = CostCurve(CURVE)
    policy = memory.policy("m", _Drafter())
    assert policy.tracker(0).probability(0) == pytest.approx(0.1)
    assert policy.draft_length(16) == 0  # a class that rarely pays does not draft cold


def test_learning_overrides_the_prior():
    policy = AdaptivePolicy(CostCurve(CURVE), priors={0: (0.95, 0.05)})
    for _ in range(30):
        length = max(policy.draft_length(16), 1)
        policy.record(length, 0, 0.12)
    assert policy.draft_length(16) == 0
