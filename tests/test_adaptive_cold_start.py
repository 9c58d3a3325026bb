"""Cold start: a first answer drafts as much as its match class usually earns."""

import pytest

from engine.policy import adaptive
from engine.policy.adaptive import AdaptiveMemory, AdaptivePolicy, CostCurve
from engine.policy.draft_policy import MatchClass

from .policy_steps import choose, length, passed

CURVE = {1: 0.100, 5: 0.164, 9: 0.200, 17: 0.220, 33: 0.324}  # flat, as on this CPU


class _Drafter:
    name = "copying"
    rows_per_pass = 1


def test_a_class_prior_sets_the_first_draft_length():
    flat = length(AdaptivePolicy(CostCurve(CURVE)), 16, match_length=24)
    sure = AdaptivePolicy(CostCurve(CURVE), priors={adaptive.match_class(24): (0.95, 0.05)})
    assert length(sure, 16, match_length=24) > flat
    assert length(sure, 16, match_length=24) >= 8
    # other classes keep the flat prior
    plain = AdaptivePolicy(CostCurve(CURVE))
    assert length(sure, 16, match_length=1) == length(plain, 16, match_length=1)


def test_memory_hands_the_drafters_priors_to_its_policies():
    memory = AdaptiveMemory(priors={"copying": {MatchClass.NOT_SAID: (0.1, 0.9)}})
    memory.curves["m"] = CostCurve(CURVE)
    policy = memory.policy("m", _Drafter())
    assert policy.tracker(MatchClass.NOT_SAID).probability(0) == pytest.approx(0.1)
    assert length(policy, 16) == 0  # a class that rarely pays does not draft cold
    engines = AdaptiveMemory().policy("m", _Drafter())  # the engine's own: none for "copying"
    assert engines.tracker(MatchClass.NOT_SAID).probability(0) == pytest.approx(0.5)


def test_learning_overrides_the_prior():
    policy = AdaptivePolicy(CostCurve(CURVE), priors={MatchClass.NOT_SAID: (0.95, 0.05)})
    for _ in range(30):
        choice = choose(policy, 16)
        passed(policy, choice, max(choice.length, 1), 0, 0.12)
    assert length(policy, 16) == 0
