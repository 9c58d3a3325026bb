"""One pass of the draft → verify → accept loop, apart from the model.

``plan_pass`` says what a pass sends: the drafter proposes up to ``limit`` tokens a row,
each row is cut after an end-of-sequence token, and the policy (``draft_policy``) chooses
how much of it goes out (``DraftPlan``). The target then judges the rows: the model in
``decode`` (``tree.Verdict``), or a known greedy answer in the replays (``judge_by_answer``).
``learn_pass`` hands what the pass did to the drafter (``observe``), the policy (``record``)
and, where the caller keeps them here, the statistics (``record_pass``).

The decode loop (``decode.speculative_decode``), the replay of a finished answer
(``replay.replay``) and the tuning replay (``bench.tune.simulate``) all run their passes
through these steps. Pure Python: no MLX.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..drafters.base import Drafter, Proposal
from ..stats import DecodeStats
from .draft_policy import (
    NO_DRAFT,
    AlternativesOutcome,
    Choice,
    DraftPolicy,
    PassOutcome,
    UnsentDraft,
)


@dataclass
class DraftPlan:
    """What one pass sends: ``rows``; ``grammar``: they are the grammar's own draft;
    ``sure``: how many leading tokens of the drafter's row the grammar forces; ``choice``:
    what the policy chose of the drafter's tokens (handed back to it with the outcome);
    ``proposal``: the rows the policy judged and what they rest on."""

    rows: list[list[int]]
    grammar: bool = False
    sure: int = 0
    choice: Choice = NO_DRAFT
    proposal: Proposal | None = None
    alternatives: int = 0  # of ``rows``, the last this many are alternatives (``Proposal``)
    blind: bool = False  # queued before its input was read: nothing went out of ``choice``
    unsent: list[list[int]] = field(default_factory=list)  # a blind pass's rows, not sent

    def went_blind(self) -> "DraftPlan":
        """This pass as it went out blind (``schedule.PassSchedule``): no rows; the choice
        and the rows are what would have gone out, for the policy to learn from."""
        return DraftPlan(
            [], choice=self.choice, proposal=self.proposal, blind=True, unsent=self.rows
        )

    def may_queue_next(self, drafter: Drafter) -> bool:
        """Whether the pass after this one could go out blind: this one sends nothing, and the
        drafter learns nothing from the logits a blind pass does not keep."""
        return not self.rows and not self.grammar and not drafter.wants_target_topk

    @classmethod
    def of(cls, proposal: Proposal, policy: DraftPolicy, forced=()) -> "DraftPlan":
        """As much of ``proposal`` (the rows the loop would send, and what they rest on) as
        the policy says pays. Where the grammar forces the next tokens (``forced``, kept
        nearly always) at least those go out: the policy then judges only the drafter's tokens
        after them (of its first row), or, where that row does not begin with them, they are
        the draft (as much of them as pays on the curve)."""
        rows, sure = proposal.rows, len(forced)
        if sure and not (rows and rows[0][:sure] == list(forced)):
            row = list(forced[: policy.forced_length(sure)])
            return cls([row] if row else [], grammar=True, proposal=proposal)
        if not rows:
            return cls([], proposal=proposal)
        longest = max(len(r) for r in rows)
        if sure:
            after = Proposal([rows[0][sure:]], proposal.match_length + sure)
            choice = policy.choose(after, longest - sure) if longest > sure else NO_DRAFT
            length = sure + choice.length if choice.length else policy.forced_length(sure)
            sent = [rows[0][:length]] if length else []
            return cls(sent, sure=min(sure, length), choice=choice, proposal=proposal)
        choice = policy.choose(proposal, longest)
        own = len(rows) - proposal.alternatives
        chosen = rows[: min(choice.rows, own)] + (rows[own:] if choice.alternatives else [])
        sent = [r[: choice.length] for r in chosen] if choice.length > 0 else []
        extra = len(rows) - own if sent and choice.alternatives else 0
        return cls(sent, choice=choice, proposal=proposal, alternatives=extra)

    def outcome(
        self,
        verified: int,
        accepted: int,
        seconds: float,
        depth: int | None = None,
        tree: bool = False,
        first_row: tuple[int, int] | None = None,
        emitted: Sequence[int] = (),
    ) -> PassOutcome:
        """The pass as the policy learns from it: ``verified`` draft tokens in ``seconds``,
        ``accepted`` of them kept out of ``depth`` (a tree's deepest row; default: the rows'
        tokens), counting the drafter's tokens only (depth 0: the pass's cost alone);
        ``tree``: a tree pass, ``first_row`` its first row (its length, its tokens kept);
        ``emitted``: what the pass emitted (what the alternative rows are judged by)."""
        depth = sum(map(len, self.rows)) if depth is None else depth
        if self.grammar:
            learned, depth = accepted, 0
        else:
            learned, depth = max(accepted - self.sure, 0), max(depth - self.sure, 0)
        alternatives = None
        if self.alternatives:
            own, extra = self.rows[: -self.alternatives], self.rows[-self.alternatives :]
            best_own = max(min(matched_length(row, emitted, 0), accepted) for row in own)
            tokens = sum(map(len, extra))
            alternatives = AlternativesOutcome(len(own), tokens, accepted - best_own)
        unsent = None
        if self.unsent:  # what the draft would have kept of the token the blind pass made
            made = emitted[0] if emitted else None
            tokens = tree_size(self.unsent) if len(self.unsent) > 1 else len(self.unsent[0])
            kept = any(row[0] == made for row in self.unsent)
            unsent = UnsentDraft(tokens, len(self.unsent) > 1, kept, self.unsent[0][0] == made)
        return PassOutcome(
            verified, learned, seconds, depth, tree, first_row, alternatives, self.blind, unsent
        )


def cut_at_eos(draft: list[int], eos_tokens: Collection[int]) -> list[int]:
    """A draft never runs past end-of-sequence."""
    for i, token in enumerate(draft):
        if token in eos_tokens:
            return draft[: i + 1]
    return draft


def plan_pass(
    drafter: Drafter,
    limit: int,
    eos_tokens: Collection[int],
    policy: DraftPolicy,
    *,
    forced: Sequence[int] = (),
    first_row_only: bool = False,
    admit: Callable[[list], list[list[int]]] | None = None,
    allowed: Callable[[list[int]], int] | None = None,
) -> DraftPlan:
    """What one pass sends: the drafter's proposal of rows of at most ``limit`` tokens
    (``limit`` 0 or less: none, and the drafter is not asked), each cut after an
    end-of-sequence token, as much of it as ``policy`` says pays (``DraftPlan.of``).

    ``forced``: what a grammar forces next (cut like a row); ``first_row_only``: only the
    first row can be verified (one row per pass, or a grammar's); ``admit``: the rows as the
    caller lets them through (the vocabulary gate), before anything else; ``allowed``: how
    many leading tokens of a row a grammar permits."""
    if limit <= 0:
        return DraftPlan([])
    proposal = drafter.propose(limit)
    rows = admit(proposal.rows) if admit is not None else proposal.rows
    rows = [cut_at_eos(list(row[:limit]), eos_tokens) for row in rows]
    if first_row_only:
        rows = rows[:1]
    if allowed is not None:
        rows = [row[: allowed(row)] for row in rows]
    own = len(proposal.rows) - proposal.alternatives  # rows before it are the drafter's own
    drafted = [row for row in rows if row]
    extra = sum(1 for i, row in enumerate(rows) if row and i >= own)
    sendable = proposal.sendable(drafted, extra)
    return DraftPlan.of(sendable, policy, cut_at_eos(list(forced[:limit]), eos_tokens))


class LearnsCost(Protocol):
    """What learns a pass's cost beside the policy (``schedule.PassSchedule``)."""

    def learn(self, choice: Choice, outcome: PassOutcome) -> None: ...


class Judged(Protocol):
    """What the target decided of one pass (``tree.Verdict``, ``AnswerVerdict``)."""

    emitted: list[int]  # accepted draft tokens, then the target's own token (unless EOS ended it)
    accepted: int
    drafted: int  # tokens sent to verify
    row: int  # the draft row the accepted tokens came from
    depth: int | None  # longest row, for tree passes
    first_row: tuple[int, int] | None  # a tree's first row: its length, tokens accepted


@dataclass
class AnswerVerdict:
    """A pass judged against a known greedy answer (a ``Judged``); ``matches``: each row's
    tokens that equal the answer."""

    emitted: list[int]
    accepted: int
    drafted: int
    row: int
    matches: list[int]
    depth: int | None = None
    first_row: tuple[int, int] | None = None


def matched_length(row: Sequence[int], target: Sequence[int], start: int) -> int:
    """How many leading tokens of ``row`` equal ``target`` from ``start`` on."""
    n = 0
    while n < len(row) and start + n < len(target) and row[n] == target[start + n]:
        n += 1
    return n


def tree_size(rows: Sequence[Sequence[int]]) -> int:
    """Draft tokens a tree verification sends: the nodes of the rows' prefix tree."""
    return len({tuple(row[:j]) for row in rows for j in range(1, len(row) + 1)})


def judge_by_answer(
    rows: list[list[int]],
    answer: Sequence[int],
    start: int,
    eos_tokens: Collection[int],
    tree: bool,
) -> AnswerVerdict:
    """The greedy target's verdict on ``rows`` where its answer from ``start`` on is known:
    the longest matching prefix of any row (``tree``: all rows in one tree pass; otherwise
    only the first row is sent), then the answer's next token unless an end-of-sequence
    token ended it."""
    sent = rows if tree else rows[:1]
    matches = [matched_length(row, answer, start) for row in sent]
    accepted = max(matches, default=0)
    emitted = list(answer[start : start + accepted])
    if not (emitted and emitted[-1] in eos_tokens):
        emitted.append(answer[start + accepted])
    row = matches.index(accepted) if matches else 0
    if len(sent) > 1:
        first_row = (len(sent[0]), matches[0])
        depth = max(map(len, sent))
        return AnswerVerdict(emitted, accepted, tree_size(sent), row, matches, depth, first_row)
    return AnswerVerdict(emitted, accepted, len(sent[0]) if sent else 0, row, matches)


def learn_pass(
    drafter: Drafter,
    policy: DraftPolicy,
    plan: DraftPlan,
    verdict: Judged,
    seconds: float,
    *,
    target_topk: Sequence[Sequence[int]] | None = None,
    stats: DecodeStats | None = None,
    eos_tokens: Collection[int] = (),
    schedule: LearnsCost | None = None,
) -> int:
    """After the target judged ``plan``'s rows (``verdict``), in ``seconds``: the drafter
    observes what the pass emitted (the grammar's own draft is not the drafter's: it learns
    no acceptance from it), the ``schedule`` (if given) what the pass cost, the policy its
    choice's outcome, and ``stats`` (if given) counts the pass. Returns the draft tokens kept, as ``stats`` counts them where
    given (an end-of-sequence token in ``eos_tokens`` excluded), else as emitted."""
    emitted, rows = verdict.emitted, plan.rows
    accepted = min(verdict.accepted, len(emitted))
    drafter.observe(
        emitted,
        accepted=0 if plan.grammar else accepted,
        drafted=len(rows[verdict.row]) if rows and not plan.grammar else 0,
        row=verdict.row,
        target_topk=target_topk,
    )
    tree = verdict.depth is not None
    outcome = plan.outcome(
        verdict.drafted, verdict.accepted, seconds, verdict.depth, tree, verdict.first_row, emitted
    )
    if schedule is not None:
        schedule.learn(plan.choice, outcome)
    policy.record(plan.choice, outcome)
    if stats is None:
        return accepted
    ended = emitted[-1] in eos_tokens
    kept, _ = stats.record_pass(verdict.drafted, accepted, len(emitted), seconds, ended, tree)
    return kept
