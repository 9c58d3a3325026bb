"""When each pass goes out: the schedule around the pass steps (``engine.policy.passes``), apart from
the model and from what a pass sends. The decode loop (``decode.speculative_decode``) drives it
with the model; the tuning replay (``bench.tune.simulate``) drives it against a known answer,
charging a curve's costs. Pure Python: no MLX.

- **Giving up**: where no draft can pay, the rest of the answer is plain decoding, pipelined
  (``pipelined_plain_decode``: the same passes, queuing and host work as ``--drafter
  none``). That is so on a curve that is still a guess (never measured for this model on
  this machine: 4-bit on this CPU, the guess planned drafts that lost 7%; the service
  measures the curve between answers, the command line after its answer), and where every
  pass of up to the draft count costs at least ``verify_cost.HOPELESS`` of what plain
  decoding pays for as many tokens, pipelined (a 4-bit model's on MLX's CPU backend).
- **Blind passes**: after a pass that sends nothing, the next one-token pass can be queued
  before that pass's token is read, as plain decoding pipelines: it then costs
  ``CostCurve.pipelined`` x c(1) but sends no draft. It is still planned once its input is
  known: a draft proposed for it stays unsent (the pass after it is planned, not blind), and
  the token the blind pass makes says whether that draft's first token would have been kept.
  Queuing blind gains 1 - pipelined of c(1) on a pass that would have sent nothing. On one
  that would have sent rows of L tokens in a pass of n tokens it gains c(n) - pipelined x c(1)
  where the draft's first token was wrong (the blind pass makes the same one token, cheaper),
  and that less c(L) where it was right (the next pass sends the rest of the row). That gain,
  in c(1)s, is summed over every pass after one that sent nothing, blind or not, over a
  model's and drafter's answers (``BlindGain``, kept by ``adaptive.AdaptiveMemory`` as the
  acceptance counts are), and the next pass goes blind while the sum is above 0. The sum
  does not fade: after a long run of passes that send nothing, a fading measure turns blind
  just before the run ends.
- **What a pass cost**: the schedule is the curve's one writer while an answer runs: each
  pass's time rescales it (``CostCurve.observe``), but a blind pass's (pipelined, not c(1)).

A fixed draft length (no curve) schedules nothing: never gives up, never blind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .draft_policy import Choice, PassOutcome
from .verify_cost import CostCurve, costs_its_length

if TYPE_CHECKING:
    from ..drafters.base import Drafter
    from .passes import DraftPlan


class BlindGain:
    """What queuing blind gains (the module's "Blind passes"), in c(1)s, summed over the
    passes after one that sent nothing (``PassSchedule.gain_of_blind``). Kept per model,
    drafter and constrained or not, as the acceptance counts are, so an answer starts from
    what the answers before it saw."""

    def __init__(self):
        self.total = 0.0
        self.passes = 0

    def record(self, gain: float) -> None:
        self.total += gain
        self.passes += 1

    @property
    def pays(self) -> bool:
        return self.total > 0.0


class PassSchedule:
    """One answer's schedule on ``curve`` (None: a fixed draft length, nothing scheduled).
    ``blind_gain``: the summed gain of queuing blind this answer reads and adds to (default:
    a fresh one); ``pipelines``: whether the loop can queue a one-token pass before the token
    of the one before is read (a cache that can be cut back, no logits processor or grammar
    that needs the history): only then does it give up or go blind."""

    def __init__(
        self,
        curve: CostCurve | None = None,
        blind_gain: BlindGain | None = None,
        *,
        pipelines: bool = True,
    ):
        self.curve = curve
        self.blind_gain = blind_gain if blind_gain is not None else BlindGain()
        self.pipelines = pipelines
        self.after_idle = False  # the last pass learned from sent nothing

    def for_loop(self, pipelines: bool) -> PassSchedule:
        """This schedule for a loop that can queue passes (``pipelines``) or cannot."""
        if pipelines or not self.pipelines:
            return self
        return PassSchedule(self.curve, self.blind_gain, pipelines=False)

    def gives_up(self, limit: int) -> bool:
        """Whether no draft of up to ``limit`` tokens can pay (the module's "Giving up"):
        decode plainly, pipelined, from here."""
        curve = self.curve
        if not self.pipelines or curve is None:
            return False
        lengths = range(2, max(limit, 1) + 2)
        return curve.guess or costs_its_length(curve, lengths, curve.pipelined)

    def queues_next_blind(self, plan: DraftPlan, drafter: Drafter) -> bool:
        """Asked once a pass was planned (``plan``), before it is learned from: whether the next
        pass goes out blind, queued before this pass's token is read. Only after a pass that
        sends nothing (``DraftPlan.may_queue_next``), on a curve that pipelines, while queuing
        blind has gained."""
        curve = self.curve
        return (
            self.pipelines
            and curve is not None
            and curve.pipelined is not None
            and plan.may_queue_next(drafter)
            and self.blind_gain.pays
        )

    def gain_of_blind(self, choice: Choice, outcome: PassOutcome) -> float:
        """What queuing this pass blind, after one that sent nothing, gains or would have
        gained, in c(1)s (the module's "Blind passes")."""
        curve = self.curve
        pipelined, one = curve.pipelined or 1.0, curve(1)
        if choice.length == 0:
            return 1.0 - pipelined
        unsent = outcome.unsent
        if unsent is not None:
            tokens, tree, kept = unsent.tokens, unsent.tree, unsent.kept
        else:
            tokens, tree, kept = outcome.verified, outcome.tree, outcome.accepted > 0
        sent = curve.tree_cost(1 + tokens) if tree else curve(1 + tokens)
        rest = curve(choice.length) if kept else 0.0
        return (sent - rest) / one - pipelined

    def learn(self, choice: Choice, outcome: PassOutcome) -> None:
        """After a pass (before the policy learns its acceptance): what queuing it blind
        gained where the one before sent nothing, and what it cost (a blind pass's time is
        pipelined, not c(1): not learned)."""
        curve = self.curve
        if curve is None:
            return
        if self.after_idle and curve.pipelined is not None:
            self.blind_gain.record(self.gain_of_blind(choice, outcome))
        self.after_idle = outcome.verified == 0
        if outcome.blind:
            return
        if outcome.tree:
            curve.observe_tree(outcome.verified + 1, outcome.seconds)
        else:
            curve.observe(outcome.verified + 1, outcome.seconds)
