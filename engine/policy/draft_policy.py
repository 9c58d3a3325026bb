"""The decode loop's policy interface: how much of a proposal one pass sends, and what the
policy learns from the pass. Pure Python (no MLX), so planning can be tested and replayed
without a model.

Each pass the loop (``passes.plan_pass``, and the replays through it) asks
``choose(proposal, limit)`` once, sends what the returned ``Choice`` says, and hands the same
``Choice`` back to ``record`` with the pass's ``PassOutcome``: everything ``record`` needs
travels in those two values, nothing is left on the policy between the calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol, runtime_checkable

from ..drafters.base import Proposal


class MatchClass(IntEnum):
    """What a proposal rests on, as ``adaptive.match_class`` sorts it; acceptance is learned
    per class. The numbers are the keys of the fitted priors (``adaptive.CLASS_PRIORS``) and
    of ``python -m engine.bench.tune``'s printout."""

    NOT_SAID = 0  # the drafter does not say how long a match it copies
    SHORT = 1  # a match of 1-2 tokens
    MEDIUM = 2  # 3-5 tokens
    COPY = 3  # 6-11 tokens
    LONG_COPY = 4  # 12 or more tokens
    USUAL_SHORT = 5  # 1-2 tokens whose drafted token usually followed them (``USUAL``)
    ONCE_SHORT = 6  # 1-2 tokens seen once before, followed then by the drafted token (``ONCE``)


@dataclass(frozen=True)
class Choice:
    """What to send of one proposal: its first ``length`` tokens of each of its first
    ``rows`` rows (``length`` 0: nothing), and of its alternative rows too where
    ``alternatives`` (``Proposal.alternatives``; ``rows`` then counts only the rows before
    them). ``kind``: the match class judged (None where the policy judged no class);
    ``idle``: a proposal that was there but did not pay, which counts toward the next probe;
    ``features``: what a calibrated policy judged the proposal by
    (``calibrated_policy.proposal_features``), learned from with the outcome."""

    length: int
    rows: int = 1
    kind: MatchClass | None = None
    idle: bool = False
    features: tuple = ()
    alternatives: bool = False


NO_DRAFT = Choice(0)


@dataclass(frozen=True)
class AlternativesOutcome:
    """What a pass's alternative rows (``Proposal.alternatives``) did: ``tokens`` of them were
    sent beside ``own_rows`` of the drafter's own rows, and the pass kept ``gained`` tokens
    more than the best of those own rows would have."""

    own_rows: int
    tokens: int
    gained: int


@dataclass(frozen=True)
class UnsentDraft:
    """The draft a blind pass did not send (``DraftPlan.went_blind``), judged by the token the
    pass made: ``tokens`` it would have verified (a tree's nodes, ``tree``), and whether that
    token begins its first row (``first_kept``: the first row's first token would have been
    kept) or any of its rows (``kept``)."""

    tokens: int
    tree: bool
    kept: bool
    first_kept: bool


@dataclass(frozen=True)
class PassOutcome:
    """What one pass did, as the policy learns from it: ``verified`` tokens of draft went
    through the target in ``seconds``; of the drafter's own tokens ``accepted`` were kept out
    of ``depth`` judged (0: none, the pass's cost alone); ``tree``: several rows in one tree
    pass, whose ``first_row`` (its length, its tokens accepted) is learned as a row;
    ``alternatives``: what its alternative rows did, where it sent any; ``blind``: queued
    before its input token was read, so ``seconds`` is a pipelined token's time, not c(1);
    ``unsent``: a blind pass's draft that did not go out, where it had one."""

    verified: int
    accepted: int
    seconds: float
    depth: int
    tree: bool = False
    first_row: tuple[int, int] | None = None
    alternatives: AlternativesOutcome | None = None
    blind: bool = False  # queued before its input token was read (``schedule``)
    unsent: UnsentDraft | None = None


@runtime_checkable
class DraftPolicy(Protocol):
    """How the decode loop asks a policy (``FixedDraftLength``, ``adaptive.AdaptivePolicy``)
    what a pass sends, and hands it what the pass did. When passes go out is the schedule's
    (``engine.policy.schedule``)."""

    def choose(self, proposal: Proposal, limit: int) -> Choice:
        """How much of ``proposal`` (rows of at most ``limit`` tokens) to send."""
        ...

    def forced_length(self, available: int) -> int:
        """How many of ``available`` grammar-forced tokens to send."""
        ...

    def record(self, choice: Choice, outcome: PassOutcome) -> None:
        """Learn from the pass that sent what ``choice`` said."""
        ...


class FixedDraftLength:
    """Draft exactly what the settings ask for (adaptive policies replace this)."""

    def choose(self, proposal: Proposal, limit: int) -> Choice:
        """All of it: every row (its alternatives too), ``limit`` tokens each; what the
        proposal rests on is ignored."""
        return Choice(limit, max(len(proposal.rows), 1), alternatives=True)

    def forced_length(self, available: int) -> int:
        return available

    def record(self, choice: Choice, outcome: PassOutcome) -> None:
        pass
