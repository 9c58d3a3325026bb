"""The oracle and the hindsight bound: drafters handed the plain run's own answer (benchmark
only).

It drafts the rest of the known answer, so every draft is accepted and a pass costs only
the verify of its length: the speed-up it reaches is the limit of n-gram speculation on
that machine or curve for that answer (drafting for free, every guess right). It is not in
the drafter registry, so the app and the CLI never offer it; the suite runs it through
``OracleSession``, a ``ChatSession`` that installs it instead of a registered drafter, and
the replays hand it every turn's answer up front.

``HindsightDrafter`` bounds what a better policy could make of the default drafter's own
drafts: each pass it sends, knowing the answer, the row of that drafter's proposal and the
length that give the most tokens per second on the curve, or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..drafters.base import Drafter, Proposal
from ..policy.passes import matched_length
from ..policy.verify_cost import CostCurve
from ..runtime.session import ChatSession

ORACLE = "oracle"


class OracleDrafter(Drafter):
    name = ORACLE
    summary = "benchmark only: drafts the plain run's own answer (the limit of speculation)"

    def __init__(self, answers: Sequence[Sequence[int]] = ()):
        super().__init__(None)
        self.queued = [list(a) for a in answers]  # the answers of the turns to come
        self.answer: list[int] = []
        self.said: list[int] = []  # this turn's answer so far

    def expect(self, answer: Sequence[int]) -> None:
        """The answer this turn gives (plain greedy decoding's, end-of-sequence dropped)."""
        self.answer = list(answer)

    def reset(self, prompt_tokens: Sequence[int]) -> None:
        if self.queued:
            self.answer = self.queued.pop(0)
        self.said = []

    def extend(self, tokens: Sequence[int]) -> None:
        self.reset(tokens)  # the next turn begins

    def propose(self, k: int) -> Proposal:
        done = len(self.said)
        if self.said != self.answer[:done]:
            return Proposal()  # off the known answer (a wrong reference): no guess at all
        rest = self.answer[done : done + k]
        return Proposal([rest] if rest else [])

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None) -> None:
        self.said.extend(int(t) for t in emitted)


class BestCut:
    """Per pass, knowing the answer: the row and length that give the most tokens per second
    on ``curve``, or nothing (a table by tokens kept, so that choosing costs no time). Sending
    nothing is priced as the replay charges it, a queued pass (``CostCurve.pipelined``), so
    hindsight is a bound on every strategy priced alike."""

    def __init__(self, curve: CostCurve):
        self.curve = curve
        nothing = curve.queued_base()
        self.table: list[tuple[float, int]] = [(1 / nothing, 0)]  # [m]: (rate, length)

    def of_matched(self, matched: int) -> tuple[float, int]:
        """The most tokens per second when the first ``matched`` drafts would be kept, and
        how many to send for it."""
        while len(self.table) <= matched:
            sent = len(self.table)
            rate = (sent + 1) / self.curve.base(sent + 1)
            self.table.append(max(self.table[-1], (rate, sent)))
        return self.table[matched]

    def of_rows(self, rows, k: int, truth: OracleDrafter) -> tuple[float, int, int]:
        """(tokens per second, length, row) of the best cut of ``rows`` (``k`` tokens at most
        each) where ``truth`` is in its answer: length 0, row 0 where nothing pays."""
        said, best = len(truth.said), (0.0, 0, 0)
        for row, draft in enumerate(rows):
            best = max(best, (*self.of_matched(matched_length(draft[:k], truth.answer, said)), row))
        return best


class AnswerKnowingDrafter(Drafter):
    """A benchmark's wrapper of ``inner`` that knows the answers (``truth``) and the best cut
    of each proposal on ``curve`` (``best``); the drafter's own calls go through to it."""

    def __init__(self, inner: Drafter, answers: Sequence[Sequence[int]], curve: CostCurve):
        super().__init__(None)
        self.inner, self.truth, self.best = inner, OracleDrafter(answers), BestCut(curve)

    def attach_model(self, model_key: str, **data) -> None:
        super().attach_model(model_key, **data)
        self.inner.attach_model(model_key, **data)

    def reset(self, prompt_tokens: Sequence[int]) -> None:
        self.truth.reset(prompt_tokens)
        self.inner.reset(prompt_tokens)

    def extend(self, tokens: Sequence[int]) -> None:
        self.truth.extend(tokens)
        self.inner.extend(tokens)

    def flush(self) -> None:
        self.inner.flush()


class WatchedDrafter(AnswerKnowingDrafter):
    """``inner`` as the default runs it (its name, rows and table), watched by a benchmark
    that knows the answers: a subclass notes what it wants in ``propose`` and ``observe``,
    then hands on to this ``observe``, which keeps ``truth`` in step."""

    name = "watched"  # until ``inner``'s is known

    def __init__(self, inner: Drafter, answers: Sequence[Sequence[int]], curve: CostCurve):
        super().__init__(inner, answers, curve)
        self.name, self.multi_row = inner.name, inner.multi_row

    @property
    def rows_per_pass(self) -> int:
        return self.inner.rows_per_pass

    @property
    def wants_static_table(self) -> bool:
        return self.inner.wants_static_table

    def propose(self, k: int) -> Proposal:
        return self.inner.propose(k)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None) -> None:
        self.truth.observe(emitted)
        self.inner.observe(emitted, accepted=accepted, drafted=drafted, row=row)


class HindsightDrafter(AnswerKnowingDrafter):
    """``inner``'s rows, each pass cut to the one row and length that pay most knowing the
    answer. One row suffices: a tree keeps no more than its best row and costs at least
    that row's pass; no length past the row's match pays, as c(n) never falls (``CostCurve``
    makes it non-decreasing). Each pass is best alone; the whole answer's least time could
    differ, as a pass's choice changes where the next one starts."""

    name = "hindsight"
    summary = "benchmark only: the default drafter's rows, cut knowing the answer"

    def __init__(self, inner: Drafter, answers: Sequence[Sequence[int]], curve: CostCurve):
        super().__init__(inner, answers, curve)
        self.row = 0  # the inner row sent last

    def propose(self, k: int) -> Proposal:
        proposal = self.inner.propose(k)
        _, length, self.row = self.best.of_rows(proposal.rows, k, self.truth)
        if not length:
            return Proposal()
        return Proposal([proposal.rows[self.row][:length]], proposal.match_length)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None) -> None:
        self.truth.observe(emitted)
        self.inner.observe(emitted, accepted=accepted, drafted=drafted, row=self.row)


class OracleSession(ChatSession):
    """A chat whose drafter is the oracle, whatever drafter the request names."""

    def __init__(self, loaded, memory, oracle: OracleDrafter):
        super().__init__(loaded, memory)
        self.oracle = oracle

    def _prepare_drafter(self, tokens, request) -> None:
        self.drafter = self.oracle
        self.oracle.reset(tokens)
        self.drafter_key = request.draft


def best_fixed_count(ratio: dict, cap: int = 64) -> int:
    """The draft count k maximising (k + 1) / c(k + 1) on a measured c(n)/c(1) curve (never
    beyond its longest pass): what a perfect drafter should send per pass."""
    curve = CostCurve({int(n): r for n, r in ratio.items()})
    longest = max(min(cap, max(curve.lengths) - 1), 1)
    return max(range(1, longest + 1), key=lambda k: (k + 1) / curve.base(k + 1))
