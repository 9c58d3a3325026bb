"""Asking a draft policy as the decode loop does, in one line each (tests only)."""

from engine.drafters.base import Proposal
from engine.policy.draft_policy import Choice, PassOutcome
from engine.policy.schedule import PassSchedule


def choose(policy, limit: int, match_length=0, rows=1, follows="", first=0) -> Choice:
    """The policy's choice of a proposal of ``rows`` rows of ``limit`` tokens (the first
    ``first`` long where given) resting on a match of ``match_length`` (``follows`` as
    ``Proposal.follows``). The tokens themselves do not matter to a policy."""
    shape = [first or limit] + [limit] * (rows - 1)
    return policy.choose(Proposal([[1] * n for n in shape], match_length, follows), limit)


def length(policy, limit: int, **proposal) -> int:
    """The draft length ``choose`` sends."""
    return choose(policy, limit, **proposal).length


def passed(policy, choice: Choice, verified, accepted, seconds, depth=None, **tree) -> None:
    """A pass that sent ``choice``, learned from as the loop does (``passes.learn_pass``: its
    cost by a schedule on the policy's curve, then its acceptance by the policy):
    ``verified`` draft tokens in ``seconds``, ``accepted`` kept out of ``depth`` (default:
    ``verified``); ``tree``: ``tree=True`` and its ``first_row``."""
    depth = verified if depth is None else depth
    outcome = PassOutcome(verified, accepted, seconds, depth, **tree)
    PassSchedule(policy.curve).learn(choice, outcome)
    policy.record(choice, outcome)
