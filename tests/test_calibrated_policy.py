"""The calibrated policy (engine/policy/calibrated_policy.py): pure, no model. It learns from the
passes it is told about: rejections at a position cut its drafts, acceptances lengthen them."""

import subprocess
import sys

import pytest

from engine.drafters.base import Proposal
from engine.errors import EngineError
from engine.policy.calibrated_policy import (
    AcceptanceModel,
    CalibratedPolicy,
    PolicyMemory,
    fitted_model,
)
from engine.policy.draft_policy import PassOutcome
from engine.policy.verify_cost import CostCurve
from engine.settings import DraftSettings

# a curve where a pass of 16 tokens costs twice a one-token pass: length is a real choice
CURVE = {1: 0.010, 2: 0.011, 4: 0.012, 8: 0.015, 16: 0.020, 32: 0.030, 65: 0.050}
PROPOSAL = Proposal([list(range(100, 132))], match_length=3, continuation=((0.5, 2), (1.0, 1)))


class _Drafter:
    name = "suffix"
    rows_per_pass = 1


def policy() -> CalibratedPolicy:
    return CalibratedPolicy(CostCurve(CURVE), fitted_model("suffix"))


def teach(policy: CalibratedPolicy, accepted: int, passes: int = 200) -> None:
    """``passes`` passes that each sent the proposal's first 16 tokens and kept ``accepted``."""
    for _ in range(passes):
        choice = policy.choose(PROPOSAL, 32)
        if choice.length == 0:  # not drafting: record it as a 16-token pass all the same
            choice = type(choice)(16, 1, choice.kind, features=choice.features or ())
        policy.record(choice, PassOutcome(16, accepted, 0.02, 16))


def test_rejections_at_position_three_shorten_the_drafts():
    taught = policy()
    teach(taught, accepted=16)  # a chat copying long passages
    long = taught.choose(PROPOSAL, 32).length
    teach(taught, accepted=3)  # then every draft fails at its fourth token
    after = taught.choose(PROPOSAL, 32).length
    assert long > 8
    assert 0 < after <= 4


def test_acceptances_lengthen_the_drafts():
    start = policy()
    fitted = start.choose(PROPOSAL, 32).length
    teach(start, accepted=16)
    assert start.choose(PROPOSAL, 32).length > max(fitted, 16)


def test_learning_moves_the_acceptance_estimate_both_ways():
    model = fitted_model("suffix")
    features = policy().choose(PROPOSAL, 32).features
    start = model.probabilities(features, 8)
    for _ in range(50):
        model.learn(features, 8, 8)
    assert all(after > was for after, was in zip(model.probabilities(features, 8), start))
    for _ in range(300):
        model.learn(features, 8, 0)
    assert model.probabilities(features, 1)[0] < start[0]


def test_the_memory_shares_one_model_per_source_and_forgets_it():
    memory = PolicyMemory(policy_kind="calibrated")
    first = memory.policy("m", _Drafter(), CostCurve(CURVE))
    second = memory.policy("m", _Drafter(), CostCurve(CURVE))
    assert isinstance(first, CalibratedPolicy) and first.model is second.model
    apart = memory.policy("m", _Drafter(), CostCurve(CURVE), constrained=True)
    assert apart.model is not first.model
    assert not isinstance(memory.policy("m", _Drafter(), kind="adaptive"), CalibratedPolicy)
    memory.forget_acceptance()
    assert memory.policy("m", _Drafter(), CostCurve(CURVE)).model is not first.model


def test_a_bad_policy_name_is_a_clear_error():
    with pytest.raises(EngineError, match="policy must be adaptive or calibrated"):
        DraftSettings(policy="clever").validated()
    assert DraftSettings(policy="calibrated").validated().policy == "calibrated"


def test_a_model_refuses_weights_of_the_wrong_size():
    with pytest.raises(ValueError, match="weights expected"):
        AcceptanceModel((0.0, 1.0))


def test_the_policy_imports_no_mlx():
    code = "import sys, engine.policy.calibrated_policy; print('mlx.core' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_suffix_counts_how_each_drafted_token_followed_its_context():
    from engine.drafters import make_drafter

    drafter = make_drafter(DraftSettings(drafter="suffix", options={"rows": 1, "locality": 0}))
    drafter.reset([1, 2, 3, 9, 5, 1, 2, 3, 9, 6, 1, 2, 3, 8, 7, 1, 2, 3])
    proposal = drafter.propose(4)
    assert proposal.rows[0][0] == 8  # the most recent occurrence drafts
    share, occurrences = proposal.continuation[0]
    assert (round(share, 3), occurrences) == (0.333, 3)  # 8 followed one of three
    assert proposal.continuation[1] == (1.0, 1)
    assert proposal.sendable([[9]]).continuation == ()  # another first token: not its counts


def test_suffix_says_when_its_first_row_goes_on_at_the_copy_cursor():
    from engine.drafters import make_drafter
    from engine.drafters.base import AT_CURSOR

    # the passage 10..17, then elsewhere 14 followed by 70, 71 (the most recent 14)
    prompt = [10, 11, 12, 13, 14, 15, 16, 17, 8, 14, 70, 71, 8]
    drafter = make_drafter(DraftSettings(drafter="suffix"))
    drafter.reset(prompt)
    drafter.observe([10])
    assert drafter.propose(2).source == ""  # nothing copied yet
    drafter.observe([11, 12, 99], accepted=2, drafted=2, row=0)  # an edit: 99 for 13
    drafter.observe([14])  # back to the passage
    proposal = drafter.propose(3)
    assert proposal.rows[0] == [15, 16, 17] and proposal.source == AT_CURSOR
    assert proposal.sendable([[70]]).source == ""
