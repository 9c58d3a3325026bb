"""Adaptive speculation: draft only as much as pays, judged in tokens per second.

- **Verify cost** ``c(n)``: the curve it is given (``engine.policy.verify_cost``: measured for
  this model on this machine, a prior shape until then, or a named device curve) plus the
  drafter's own time per pass (``host_seconds``, measured as it runs): a drafter costing
  0.5 ms a pass is a tax where a pass costs a few milliseconds.
- **Acceptance**: per drafter, per match class and per draft position i, the probability
  that draft token i is accepted given tokens 0..i-1 were, as counts that fade by a
  factor 0.85 at every pass that drafted in that class (about the last seven count; a
  switch from copying to new text is followed within about twenty passes). Position 0
  starts from a prior of one observation: the drafter's measured acceptance for that match
  class (``CLASS_PRIORS``, so a first answer drafts as long as such matches earn), else
  Beta(0.5, 0.5); position 1 from one pseudo-observation at position 0's estimate, so
  when it was not reached lately it follows position 0 instead of keeping stale failures,
  and so on for each position. Copies (matches of 6 or more tokens) share one rate from
  position 2 on (from one pseudo-observation at position 1's estimate): a copy ends at any
  of its tokens alike, and a rate per position, each reached a few times, let one failure
  at position 7 cut every copy to 7 tokens long after. Shorter matches keep a rate per
  position: shared, the high rate a copy-heavy answer left to 3-5-token matches sent long
  drafts into the next answer's prose.
- **Match classes**: copying drafters say how long a match their proposal rests on
  (``Proposal.match_length``): unknown, 1-2, 3-5, 6-11 or 12+ tokens. A long match that
  copies a code block is not judged by the short matches that failed in the prose
  before it. A 1-2-token match whose drafted token is what usually followed its two or
  more earlier occurrences (``Proposal.follows`` is ``USUAL``) has a class of its own, and one
  seen only once before, whose drafted token followed it then (``ONCE``), another: on the
  tuning prompts their first tokens were kept 69% and 39% of the time, other short
  matches' 16%. Kept together, the first kind's successes (often a copy from the prompt)
  had the second kind (often prose repeating itself) draft long and fail at the start of
  the next chat.
- **Constrained answers** (a JSON schema, a forced tool call) keep their acceptance apart
  from free text's: a schema's values are short copies from the prompt that pay far more
  often than short matches in prose do, and an answer is known to be constrained before its
  first pass, so neither regime's failures hold the other's drafts back.
- **Proposal first**: the drafter proposes (cheap) before the policy chooses, so the
  policy knows whether there is a guess and how strong its match is, and trims it.
- **Probing**: when no draft pays, one 1-token draft is still sent once a class has had
  a proposal on 16 passes without drafting, so a drafter that starts paying again is
  noticed; where a 2-token pass costs much more than a 1-token one, only after as many idle
  passes as keep a probe's extra cost under 1% of their time (``probe_interval``).
- **Grammar-forced tokens** (``forced_length``): a schema's keys and separators are kept
  nearly always, so as many go out as give the most tokens per second on the curve.
- **Choice**: the draft length L (0..limit) maximising
  ``E[tokens | L] / c(1 + L)`` with ``E[tokens | L] = 1 + Σ_{j≤L} Π_{i<j} p_i`` (p_i of the
  first row, over the positions it has); L = 0 (plain decoding) when no draft pays. A
  multi-row drafter's R rows of L tokens (the first row perhaps shorter) go out as one tree
  when ``(E[tokens | L] + b) / (c(1 + R × L) + tree extra)`` is higher still. b (at most
  L) is L times the tokens a tree's other rows have lately added beyond its first row per
  token of that row (per match class, fading like the counts, from a prior fitted on the
  tuning prompts, ``TREE_BONUS_PRIORS``); the tree extra is what a tree pass costs beyond a
  row of as many tokens (``CostCurve.tree_extra``). R is two, and more while each costs at
  most 5% more than two. Where rows are nearly free they ride along; where a tree pass costs
  more they go out only where they have been adding enough.
- **Alternative rows** (``Proposal.alternatives``: a second source's guesses, the static
  table's other usual followers) are judged apart from the drafter's own rows: they go out
  beside the R own rows a tree would send (the first row alone where there is no other)
  when ``(E[tokens | L] + b + a) / c(1 + R × L + A)`` is higher still, A their tokens (each
  row at most L) and a = A times the tokens they have lately kept beyond the own rows per
  token sent (fading as the tree bonus does, from a prior measured on the tuning split,
  ``ALTERNATIVES_PRIORS``).

When passes go out (a plain opening, giving up, blind passes) is the schedule's
(``engine.policy.schedule``), not the policy's: the policy chooses what a pass sends and learns
acceptance.

The service owns the curves and the acceptance memory (``AdaptiveMemory``), never this
module.
"""

from __future__ import annotations

import math

from .acceptance_store import Saved, load_acceptance, save_acceptance
from .draft_policy import Choice, MatchClass, NO_DRAFT, PassOutcome
from ..drafters.base import ONCE, USUAL, Proposal
from .schedule import BlindGain, PassSchedule
from .verify_cost import (
    CostCurve,
    load_cost_curve,
    PACE_ROUNDS,
    measurement_step_count,
    measurement_steps,
    pace_steps,
    prior_cost_curve,
    save_cost_curve,
)

# draft positions counted per match class: a safety bound on memory and on the acceptance
# file read back, not a measurement (twice the largest draft count, 64, so every draft fits)
MAX_POSITIONS = 128
# acceptance counts kept per drafted pass (a memory of about 1 / 0.15 = 7 passes). Replayed on
# the tuning split (`python -m engine.bench.sweep DECAY 0.85,0.7,0.95 --conversations` the
# three tuning files; 3 sources x 5 curves, the default uncharged, one process), 0.7 made 0.9985x
# what 0.85 makes (0.981-1.001) and 0.95 1.0021x (0.996-1.012): no change either way
DECAY = 0.85
# passes with a proposal but no draft before a 1-token probe, at least (``probe_interval``
# waits longer where a probe is dear). Probes at all: without them real-chat dev 0.976x
# (0.902-1.003; results.md, "Tried and not shipped"). Replayed on the tuning split as DECAY,
# 8 made 1.0024x what 16 makes (1.000-1.011), 32 0.9945x (0.971-1.002): no change
PROBE_INTERVAL = 16
PROBE_SHARE = 0.01  # of the idle passes' time, the most a probe's extra cost may be
PRIOR_ACCEPT = 0.5
# a longer draft or a wider tree is chosen only where its rate beats the best so far by more
# than this: equal rates (a flat stretch of the curve, rows that add nothing) keep the shorter,
# cheaper pass rather than flip on float rounding of the sums (a tolerance, not a
# measurement: 0.01%, far below what any replay resolves)
CLEARLY_BETTER = 1.0001
# rows beyond a tree's second may make its pass this much dearer. 0 instead on the real-chat
# dev replay: 1.000x (0.989-1.010), no change (results.md, "Tried and not shipped")
ROW_SLACK = 0.05
# on a curve not measured for the model, a draft must promise 10% more than plain decoding:
# a margin for the guess's error, never swept (a replay plans on named curves, never a guess)
GUESS_MARGIN = 1.1
PRIOR_REJECT = 0.5
# Cold start, per drafter and match class (``MatchClass``, as ``match_class`` sorts): the
# prior (accept, reject) pseudo-counts of position 0, so a first answer drafts as much as
# such matches usually earn instead of paying for learning. ``AdaptiveMemory`` hands them to
# its policies (a benchmark may hand others). Fitted on the benchmark's tuning prompts
# (python -m engine.bench.tune), checked on its check prompts; for suffix's usual short
# matches 0.9 gave the most tokens per second on the tuning set (0.51, 0.6 and 0.8 did less
# well), and for those seen once 0.39, 0.45 and 0.6 did the same within 0.1%. Real answers
# keep fewer first tokens (``python -m engine.bench.tune --conversations``: usual short 0.51,
# 3-5 tokens 0.56, copies 0.61); priors fitted there speed up first answers on real chat but
# slow those that copy from their prompt (resources/readme/benchmarks/results.md): not used.
Priors = dict[str, dict[MatchClass, tuple[float, float]]]
CLASS_PRIORS: Priors = {
    "suffix": {
        MatchClass.SHORT: (0.16, 0.84),
        MatchClass.MEDIUM: (0.8, 0.2),
        MatchClass.COPY: (0.84, 0.16),
        MatchClass.LONG_COPY: (0.98, 0.02),
        MatchClass.USUAL_SHORT: (0.9, 0.1),
        MatchClass.ONCE_SHORT: (0.39, 0.61),
    },
    "prompt-lookup": {
        MatchClass.SHORT: (0.34, 0.66),
        MatchClass.MEDIUM: (0.71, 0.29),
        MatchClass.COPY: (0.77, 0.23),
        MatchClass.LONG_COPY: (0.96, 0.04),
    },
    "ngram-cache": {MatchClass.NOT_SAID: (0.79, 0.21)},
}
# suffix-static and suffix-recycling draft suffix's rows first: their matches are suffix's
CLASS_PRIORS["suffix-static"] = CLASS_PRIORS["suffix"]
CLASS_PRIORS["suffix-recycling"] = CLASS_PRIORS["suffix"]
# Per drafter and match class: tokens a tree pass accepted beyond its first row per token of
# its first row, over the tuning prompts' tree passes (every row sent, draft count 16;
# python -m engine.bench.tune).
BonusPriors = dict[str, dict[MatchClass, float]]
TREE_BONUS_PRIORS: BonusPriors = {
    "suffix": {
        MatchClass.SHORT: 0.078,
        MatchClass.MEDIUM: 0.06,
        MatchClass.COPY: 0.112,
        MatchClass.LONG_COPY: 0.074,
        MatchClass.USUAL_SHORT: 0.03,
        MatchClass.ONCE_SHORT: 0.073,
    }
}
TREE_BONUS_PRIORS["suffix-static"] = TREE_BONUS_PRIORS["suffix"]
TREE_BONUS_PRIORS["suffix-recycling"] = TREE_BONUS_PRIORS["suffix"]
# Per drafter: tokens its alternative rows (``Proposal.alternatives``) kept beyond its own rows
# per alternative token sent, every row sent at a draft count of 16, over the real-chat tuning
# samples replayed against a table built without them (``python -m engine.bench.static_table
# --exclude``): ShareGPT 0.058, MT-bench 0.045, HumanEval 0.045 (2,206 kept of 41,253 sent).
ALTERNATIVES_PRIORS: dict[str, float] = {"suffix-static": 0.054}
TREE_BONUS_WEIGHT = 2.0  # pseudo-observations of the prior: trees
TREE_BONUS_LENGTH = 16  # of this many tokens a row
DEPTH_PRIOR = 1.0  # pseudo-observations at the estimate of the position before
POOLED_FROM = 2  # in copies' classes, positions from here on share one acceptance rate
COPY_CLASSES = (MatchClass.COPY, MatchClass.LONG_COPY)  # matches of 6 or more tokens
# match lengths where SHORT, MEDIUM, COPY and LONG_COPY begin (below the first: NOT_SAID)
MATCH_CLASS_STARTS = (1, 3, 6, 12)
# a short match's class by ``Proposal.follows``
SHORT_CLASSES = {USUAL: MatchClass.USUAL_SHORT, ONCE: MatchClass.ONCE_SHORT}


class RowGain:
    """Tokens some rows of a tree keep beyond others, per token of them sent: decayed sums
    (by ``DECAY`` per pass that sent them) over a prior rate that counts as
    ``TREE_BONUS_WEIGHT`` trees of ``TREE_BONUS_LENGTH`` tokens."""

    def __init__(self, prior: float):
        self.prior = prior
        self.gained = self.sent = 0.0

    def record(self, sent: int, gained: int) -> None:
        self.gained = self.gained * DECAY + gained
        self.sent = self.sent * DECAY + sent

    def rate(self) -> float:
        weight = TREE_BONUS_WEIGHT * TREE_BONUS_LENGTH
        return (self.gained + weight * self.prior) / (self.sent + weight)


class AcceptanceTracker:
    """Decayed per-position acceptance counts of one drafter."""

    features: tuple = ()  # what a choice on it was judged by beyond the class: nothing

    def __init__(
        self,
        prior_accept: float = PRIOR_ACCEPT,
        prior_reject: float = PRIOR_REJECT,
        prior_bonus: float = 0.0,
        pooled: bool = False,
        prior_alternatives: float = 0.0,
    ):
        self.pooled = pooled  # positions from ``POOLED_FROM`` on share one rate
        self.accepted = [0.0] * MAX_POSITIONS
        self.reached = [0.0] * MAX_POSITIONS
        self.prior_accept = prior_accept
        self.prior_reject = prior_reject
        # tokens a tree's other own rows keep beyond its first row, per first-row token
        self.bonus = RowGain(prior_bonus)
        # tokens the alternative rows keep beyond the own rows, per alternative token sent
        self.alternatives = RowGain(prior_alternatives)

    def counts(self) -> dict:
        """What it learned (not its priors), as ``restore`` takes it back: the positions up
        to the last one reached."""
        seen = next((i + 1 for i in range(MAX_POSITIONS - 1, -1, -1) if self.reached[i]), 0)
        return {
            "accepted": self.accepted[:seen],
            "reached": self.reached[:seen],
            "bonus": [self.bonus.gained, self.bonus.sent],
            "alternatives": [self.alternatives.gained, self.alternatives.sent],
        }

    def restore(self, counts: dict) -> None:
        """Take back ``counts`` (positions beyond those given start unseen)."""
        missing = MAX_POSITIONS - len(counts["reached"])
        self.accepted = list(counts["accepted"]) + [0.0] * missing
        self.reached = list(counts["reached"]) + [0.0] * missing
        self.bonus.gained, self.bonus.sent = counts["bonus"]
        self.alternatives.gained, self.alternatives.sent = counts["alternatives"]

    def decay(self, factor: float = DECAY) -> None:
        self.accepted = [a * factor for a in self.accepted]
        self.reached = [r * factor for r in self.reached]

    def record(self, depth: int, accepted: int) -> None:
        for i in range(min(accepted + 1, depth, MAX_POSITIONS)):
            self.reached[i] += 1.0
            if i < accepted:
                self.accepted[i] += 1.0

    def record_tree(self, first_row_length: int, beyond_first_row: int) -> None:
        self.bonus.record(first_row_length, beyond_first_row)

    def record_rows(self, outcome: PassOutcome) -> None:
        """What a tree pass's rows beyond its first did: the own rows' gain beyond the first
        row (``record_tree``) where it sent several, and the alternative rows' beyond them."""
        first_length, first_kept = outcome.first_row
        alternatives = outcome.alternatives
        gained = alternatives.gained if alternatives else 0
        if alternatives is None or alternatives.own_rows > 1:
            self.record_tree(first_length, outcome.accepted - gained - first_kept)
        if alternatives is not None:
            self.alternatives.record(alternatives.tokens, gained)

    def tree_bonus(self, length: int) -> float:
        """Tokens a tree of ``length``-token rows is expected to accept beyond its first row:
        ``length`` times the rate seen lately (the prior counts as ``TREE_BONUS_WEIGHT``
        trees of ``TREE_BONUS_LENGTH`` tokens)."""
        return min(self.bonus.rate() * length, length)

    def alternatives_gain(self, tokens: int) -> float:
        """Tokens ``tokens`` of alternative rows are expected to add beyond the own rows."""
        return self.alternatives.rate() * tokens

    def probabilities(self, length: int) -> list[float]:
        """P(draft token i accepted | tokens before it were) for i < length."""
        values: list[float] = []
        separate = POOLED_FROM if self.pooled else MAX_POSITIONS
        for i in range(min(length, MAX_POSITIONS, separate + 1)):
            if i == 0:
                p = (self.accepted[0] + self.prior_accept) / (
                    self.reached[0] + self.prior_accept + self.prior_reject
                )
            else:  # position i alone, or with every one after it where they share a rate
                seen = slice(i, None if i == separate else i + 1)
                p = (sum(self.accepted[seen]) + DEPTH_PRIOR * values[-1]) / (
                    sum(self.reached[seen]) + DEPTH_PRIOR
                )
            values.append(p)
        values += values[-1:] * (min(length, MAX_POSITIONS) - len(values))
        return values + [0.0] * (length - len(values))

    def probability(self, i: int) -> float:
        return self.probabilities(i + 1)[i]

    def expected_tokens(self, length: int) -> list[float]:
        """[E[emitted tokens | draft length L] for L = 0..length]."""
        return expected_tokens(self.probabilities(length))


def expected_tokens(probabilities: list[float]) -> list[float]:
    """[E[emitted tokens | draft length L] for L = 0..len(probabilities)], ``probabilities[i]``
    the chance draft token i is kept when those before it were."""
    values, total, survive = [1.0], 1.0, 1.0
    for p in probabilities:
        survive *= p
        total += survive
        values.append(total)
    return values


def match_class(match_length: int, follows: str = "") -> MatchClass:
    """``NOT_SAID`` when the drafter does not say, else ever longer matches' classes; a short
    match whose drafted token usually followed it (``follows``, as ``Proposal.follows``):
    ``USUAL_SHORT``; one whose drafted token followed its only earlier occurrence:
    ``ONCE_SHORT``."""
    klass = MatchClass(sum(1 for start in MATCH_CLASS_STARTS if match_length >= start))
    return SHORT_CLASSES.get(follows, klass) if klass == MatchClass.SHORT else klass


class AdaptiveMemory:
    """Cost curves (per model) and acceptance trackers (per model, drafter, and whether the
    answers are constrained) of one owner: the service keeps one for the process, a
    benchmark one per run. Never module globals. ``priors`` and ``bonus_priors``: the
    cold-start priors per drafter its policies start from (``CLASS_PRIORS``,
    ``TREE_BONUS_PRIORS``; a benchmark may compare others)."""

    def __init__(
        self,
        priors: Priors = CLASS_PRIORS,
        bonus_priors: BonusPriors = TREE_BONUS_PRIORS,
        persist: bool = False,
    ):
        self.curves: dict[str, CostCurve] = {}
        self.trackers: dict[tuple[str, str, bool], dict[MatchClass, AcceptanceTracker]] = {}
        self.blind_gains: dict[tuple[str, str, bool], BlindGain] = {}
        self.priors = priors
        self.bonus_priors = bonus_priors
        # the acceptance counts are kept on disk per model (``acceptance_store``): read when a
        # model's first policy is made, written by ``save_acceptance``
        self.persist = persist
        self.saved: dict[str, Saved] = {}  # per model: counts read, not yet in a policy

    def curve(self, model_key: str) -> CostCurve:
        """In memory, else on disk, else the prior shape (``measure_in_steps`` measures it)."""
        curve = self.curves.get(model_key)
        if curve is None:
            curve = self.curves[model_key] = load_cost_curve(model_key) or prior_cost_curve()
        return curve

    def measured(self, model_key: str) -> bool:
        """Whether the model's curve and its pipelined pace were measured on this machine."""
        curve = self.curve(model_key)
        return curve.measured and curve.pipelined is not None

    def use_measurement(
        self, model_key: str, points: dict[int, float], pipelined: float | None = None
    ) -> CostCurve:
        """Replace the model's curve by measured points (and pipelined pace) and save them."""
        curve = self.curves[model_key] = CostCurve(points, pipelined=pipelined)
        save_cost_curve(model_key, curve)
        return curve

    def measure_in_steps(self, model_key: str, target, context: int):
        """Measure the model's pipelined pace on ``target`` (a cache of its own, or one whose
        every pass is undone), ``pace_steps`` (1.0 where ``target`` cannot pipeline), then its
        curve after ``context`` more tokens of context (``measurement_steps``): a generator of
        (steps done, steps in all) that the service runs between requests, one pass a step.
        The total is known from the first step; the step that makes the least time of each
        length the model's curve saves it (and where the timing stopped early, at a length that
        costs its length, one more reports all done); stopped before that, the curve is left
        as it was."""
        done = 0
        total = 2 * (PACE_ROUNDS + 1) + measurement_step_count(context)
        pace = pace_steps(target)
        while True:
            try:
                next(pace)
            except StopIteration as stop:
                share = 1.0 if stop.value is None else stop.value
                break
            done += 1
            yield done, total
        samples: dict[int, list[float]] = {}
        for samples in measurement_steps(target, context, pipelined=share):
            done += 1
            yield done, total
        points = {n: min(times) for n, times in samples.items()}
        self.use_measurement(model_key, points, share)
        if done < total:  # it stopped at a length that costs its length: all done all the same
            yield total, total

    def forget_acceptance(self) -> None:
        self.trackers.clear()
        self.blind_gains.clear()

    def schedule(
        self,
        model_key: str,
        drafter,
        curve: CostCurve | None = None,
        constrained: bool = False,
        pipelines: bool = True,
    ) -> PassSchedule:
        """An answer's schedule (``schedule.PassSchedule``) on ``curve`` (default: the model's
        own), summing what queuing blind gains with every answer of (model, drafter,
        constrained or not) before it."""
        key = (model_key, drafter.name, constrained)
        gain = self.blind_gains.setdefault(key, BlindGain())
        return PassSchedule(curve or self.curve(model_key), gain, pipelines=pipelines)

    def policy(
        self, model_key: str, drafter, curve: CostCurve | None = None, constrained: bool = False
    ) -> "AdaptivePolicy":
        """A policy sharing this memory's acceptance counts for (model, drafter) and answers
        that are ``constrained`` by a grammar or not, planning on ``curve`` (default: the
        model's own)."""
        trackers = self.trackers.setdefault((model_key, drafter.name, constrained), {})
        policy = AdaptivePolicy(
            curve or self.curve(model_key),
            trackers,
            drafter.rows_per_pass,
            self.priors.get(drafter.name),
            self.bonus_priors.get(drafter.name),
            ALTERNATIVES_PRIORS.get(drafter.name, 0.0),
        )
        if self.persist and model_key not in self.saved:
            self.saved[model_key] = load_acceptance(model_key, MAX_POSITIONS)
        kept = self.saved.get(model_key, {}).pop((drafter.name, constrained), {})
        if not trackers:  # nothing learned in this process yet: what earlier ones learned
            for klass, counts in kept.items():
                policy.tracker(klass).restore(counts)
        return policy

    def save_acceptance(self) -> None:
        """Keep every model's acceptance counts on disk (where this memory ``persist``s),
        with what was read and not used since."""
        if not self.persist:
            return
        models = dict.fromkeys([key for key, _, _ in self.trackers] + list(self.saved))
        for model in models:
            saved = dict(self.saved.get(model, {}))
            for (key, drafter, constrained), trackers in self.trackers.items():
                if key == model and trackers:
                    counts = {klass: tracker.counts() for klass, tracker in trackers.items()}
                    saved[(drafter, constrained)] = counts
            if saved:
                save_acceptance(model, saved)


class AdaptivePolicy:
    """The decode loop's policy (a ``draft_policy.DraftPolicy``): after the drafter proposed,
    ``choose`` says how much of the proposal to send; ``record`` learns from the pass.
    ``priors`` and ``bonus_priors``: per match class, the cold-start acceptance (accept,
    reject) of position 0 and the tokens a tree's other rows add per first-row token."""

    def __init__(
        self,
        curve: CostCurve,
        trackers: dict[MatchClass, AcceptanceTracker] | None = None,
        rows: int = 1,
        priors: dict[MatchClass, tuple[float, float]] | None = None,
        bonus_priors: dict[MatchClass, float] | None = None,
        alternatives_prior: float = 0.0,
    ):
        self.curve = curve
        self.priors = priors or {}
        self.alternatives_prior = alternatives_prior
        self.trackers = trackers if trackers is not None else {}
        self.rows = max(1, rows)
        self.bonus_priors = bonus_priors or {}
        self.idle: dict[MatchClass, int] = {}  # per class: passes with a proposal but no draft

    def tracker(self, klass: MatchClass) -> AcceptanceTracker:
        """The acceptance memory of one match class."""
        tracker = self.trackers.get(klass)
        if tracker is None:
            prior = self.priors.get(klass, (PRIOR_ACCEPT, PRIOR_REJECT))
            bonus = self.bonus_priors.get(klass, 0.0)
            copies = klass in COPY_CLASSES
            tracker = self.trackers[klass] = AcceptanceTracker(
                *prior, bonus, pooled=copies, prior_alternatives=self.alternatives_prior
            )
        return tracker

    def choose(self, proposal: Proposal, limit: int) -> Choice:
        """The draft length and rows to send of ``proposal`` (its longest row ``limit``
        tokens; its first row perhaps shorter) resting on a match of its ``match_length``
        (``follows``: see ``match_class``). The first row earns only on tokens it has: a
        longer length pays, if at all, through the other rows."""
        if limit <= 0 or not self.curve.anchored:  # a guess: one plain pass gives c(1) first
            return NO_DRAFT
        own_rows = len(proposal.rows) - proposal.alternatives  # as ``DraftPlan.of`` splits them
        available = min(max(own_rows, 1), self.rows)
        alternatives = [len(row) for row in proposal.rows[own_rows:]]
        first = min((len(proposal.rows[0]) if proposal.rows else 0) or limit, limit)
        kind, tracker = self.judge(proposal)
        expected = tracker.expected_tokens(min(limit, MAX_POSITIONS))
        plain = best_rate = expected[0] / self.curve(1)
        best, rows, with_alternatives = 0, 1, False
        for length in range(1, len(expected)):
            own = expected[min(length, first)]
            rate = own / self.curve(1 + length)
            if length <= first and rate > best_rate * CLEARLY_BETTER:
                best, best_rate, rows, with_alternatives = length, rate, 1, False
            if alternatives:  # the own rows a tree would send, and the alternatives beside them
                sent = sum(min(n, length) for n in alternatives)
                tokens = own + tracker.alternatives_gain(sent)
                bonus = tracker.tree_bonus(length) if available > 1 else 0.0
                # not even beside the first row alone would they do better: no need to look on
                if (tokens + bonus) / self.curve.tree_cost(
                    1 + length + sent
                ) > best_rate * CLEARLY_BETTER:
                    width = self.tree_rows(length, available) if available > 1 else 1
                    tokens += bonus if width > 1 else 0.0
                    rate = tokens / self.curve.tree_cost(1 + width * length + sent)
                    if rate > best_rate * CLEARLY_BETTER:
                        best, best_rate, rows, with_alternatives = length, rate, width, True
            if available < 2:
                continue
            tokens = own + tracker.tree_bonus(length)
            if tokens / self.curve.tree_cost(1 + 2 * length) <= best_rate * CLEARLY_BETTER:
                continue  # not even the cheapest tree, two rows, would do better
            width = self.tree_rows(length, available)
            rate = tokens / self.curve.tree_cost(1 + width * length)
            if rate > best_rate * CLEARLY_BETTER:
                best, best_rate, rows, with_alternatives = length, rate, width, False
        guess = self.curve.guess  # a curve not measured for this model: draft only clear wins
        if guess and best_rate < plain * GUESS_MARGIN:
            best, rows, with_alternatives = 0, 1, False
        if best == 0 and not guess:  # one more idle pass, unless it is time for a probe
            if self.idle.get(kind, 0) + 1 > self.probe_interval():
                return Choice(1, 1, kind, features=tracker.features)
            return Choice(0, 1, kind, idle=True, features=tracker.features)
        return Choice(best, rows, kind, features=tracker.features, alternatives=with_alternatives)

    def judge(self, proposal: Proposal) -> tuple[MatchClass, AcceptanceTracker]:
        """The proposal's match class and what is expected of its draft tokens
        (``expected_tokens``, ``tree_bonus``): here the class's acceptance memory."""
        kind = match_class(proposal.match_length, proposal.follows)
        return kind, self.tracker(kind)

    def forced_length(self, available: int) -> int:
        """How many of ``available`` grammar-forced tokens to send (kept nearly always):
        the count that gives the most tokens per second on the curve."""
        rates = [(1 + n) / self.curve(1 + n) for n in range(available + 1)]
        return max(range(available + 1), key=lambda n: (rates[n], n))

    def probe_interval(self) -> int:
        """Idle passes before a probe: ``PROBE_INTERVAL``, or more where a probe's extra cost
        (c(2) - c(1)) would be more than ``PROBE_SHARE`` of those passes' time."""
        extra = max(self.curve(2) - self.curve(1), 0.0)
        return max(PROBE_INTERVAL, math.ceil(extra / (PROBE_SHARE * self.curve(1))))

    def learn(self, choice: Choice, outcome: PassOutcome) -> None:
        """The acceptance of a pass that judged the drafter's tokens, in its class's memory."""
        tracker = self.tracker(choice.kind)
        tracker.decay()
        if outcome.tree and outcome.first_row is not None:
            tracker.record(*outcome.first_row)
            tracker.record_rows(outcome)
        else:
            tracker.record(outcome.depth, outcome.accepted)

    def tree_rows(self, length: int, available: int) -> int:
        """The rows of a tree of ``length``-token rows: two, and more (of ``available``) while
        each makes the pass at most ``ROW_SLACK`` dearer than two (on a flat curve all, on a
        steep one two)."""
        two, rows = self.curve.tree_cost(1 + 2 * length), 2
        while (
            rows < available
            and self.curve.tree_cost(1 + (rows + 1) * length) <= (1 + ROW_SLACK) * two
        ):
            rows += 1
        return rows

    def record(self, choice: Choice, outcome: PassOutcome) -> None:
        """Learn the acceptance of the class ``choice`` judged (where the pass judged the
        drafter's tokens, or a blind pass's token judged its unsent draft's first), or count
        an idle pass toward the class's next probe. What the pass cost is the schedule's to
        learn (``schedule.PassSchedule.learn``)."""
        if outcome.depth and choice.kind is not None:
            self.learn(choice, outcome)
            self.idle[choice.kind] = 0
        elif outcome.unsent is not None and choice.kind is not None:  # its token says this much
            tracker = self.tracker(choice.kind)
            tracker.decay()
            tracker.record(1, int(outcome.unsent.first_kept))
        elif choice.idle:
            self.idle[choice.kind] = self.idle.get(choice.kind, 0) + 1
