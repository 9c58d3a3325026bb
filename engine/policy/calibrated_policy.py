"""A calibrated draft policy: the acceptance of each draft token from a small logistic model
per source (drafter), learned online as the chat runs, instead of hand-set match classes
and prior tables.

- **Inputs**: what the drafter already says of its proposal: the match length it rests on
  (0: not said), how its first token follows the match (``Proposal.follows``: ``USUAL``, the
  continuation that followed most of two or more earlier occurrences; ``ONCE``, the one
  that followed the only earlier occurrence), whether it offers several rows (its earlier
  occurrences disagree), where its first row comes from (``Proposal.source``: at the copy
  cursor or not), and per draft token (``Proposal.continuation``) the share of the
  earlier occurrences of its context that it followed and how many occurrences that share
  rests on; besides them the draft position i and how often the source's first draft
  tokens were kept lately.
- **Model**: P(token i kept | tokens before it were) = σ(w · x(i)), ``x`` as
  ``FEATURES`` names them. ``w`` starts from weights fitted on the tuning split
  (``FITTED``, ``python -m engine.bench.calibrate``); each pass that judged the drafter's
  tokens takes one stochastic-gradient step per position it reached (``LEARNING_RATE``),
  pulled back toward the fitted weights (``PULL``), so the model follows a chat that copies
  more (or less) than the tuning chats did and forgets a regime that has ended.
- **Trees**: the tokens a tree's other rows add per first-row token, as the adaptive
  policy learns them (``adaptive.AcceptanceTracker.tree_bonus``), one rate per source from a
  fitted prior.
- **Choice**: the adaptive policy's own (``adaptive.AdaptivePolicy.choose``): the length and
  rows that maximise expected tokens per unit of verify cost on the curve, probing and giving
  up as it does; only the acceptance estimate differs.

Select it with ``DraftSettings(policy="calibrated")`` (``--policy calibrated``); pure Python,
no MLX.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..drafters.base import AT_CURSOR, ONCE, USUAL, Proposal
from ..settings import POLICY_KINDS  # noqa: F401  (its home is the settings; bench imports it here)
from .adaptive import (
    ALTERNATIVES_PRIORS,
    DECAY,
    AcceptanceTracker,
    AdaptiveMemory,
    AdaptivePolicy,
    expected_tokens,
    match_class,
)
from .draft_policy import Choice, MatchClass, PassOutcome
from .verify_cost import CostCurve

FEATURES = (
    "bias",
    "log2(1 + match length)",
    "match length not said",
    "usual continuation",
    "seen once before",
    "several rows",
    "recent first tokens kept (logit)",
    "first row at the copy cursor",
    "log2(1 + position)",
    "first position",
    "log2(1 + match length) x log2(1 + position)",
    "share of the earlier occurrences the token followed",
    "log2(1 + the occurrences that share rests on)",
    "token past what the drafter counted",
)
# Fitted on the tuning split (python -m engine.bench.calibrate on the ShareGPT, MT-bench and
# HumanEval tuning samples; see that module): per drafter, the weights in ``FEATURES``' order
# and the tree bonus (tokens a tree's other rows added per first-row token).
# Tuning samples: ShareGPT 40 conversations, MT-bench 24, HumanEval 30 (--limit 40/30/30),
# draft count 64; suffix: 31,876 first-row positions. A weight of 0 is a feature the drafter
# does not say.
FITTED: dict[str, tuple[tuple[float, ...], float]] = {
    "suffix": (
        (
            -5.12,
            0.658,
            0.0,
            -0.109,
            -0.418,
            0.095,
            0.301,
            0.346,
            0.696,
            0.145,
            -0.076,
            3.755,
            0.444,
            2.121,
        ),
        0.025,
    ),
    "prompt-lookup": (
        (-0.93, 0.955, 0.0, 0.0, 0.0, 0.0, 0.295, 0.0, 0.966, -0.093, -0.18, 0.0, 0.0, -0.93),
        0.0,
    ),
}
# suffix-static and suffix-recycling send suffix's rows first: their first rows are suffix's
FITTED["suffix-static"] = FITTED["suffix-recycling"] = FITTED["suffix"]
# A drafter not fitted: every token even odds (Beta(0.5, 0.5)'s mean, the adaptive policy's
# flat prior), learned from its first pass on.
UNFITTED = ((0.0,) * len(FEATURES), 0.0)
# Per reached position and pass, and the share of the way back to the fitted weights per
# step: on the tuning samples (4 curves x 3 sources, tokens per pass only: the devices
# replay's "calibrated policy" over the *-tuning files; no document keeps it) 0.01 and 0.01 gave
# 1.009x the adaptive policy (geometric mean). Without the copy-cursor input: 0.01 gave 1.008x,
# 0.003 1.006x and the fitted weights alone (0) 1.001x; with the first token's counts alone as
# inputs, 0.02 gave 1.004x, 0.05 0.999x and 0.2 0.968x, and a pull of 0 or 0.1 did no better.
LEARNING_RATE = 0.01
PULL = 0.01
BASE_END = 8  # ``FEATURES`` 1 to 7 are the proposal's, the same at every position
FIRST_PRIOR = 0.5  # pseudo-counts of recent first tokens, kept and not: Beta(0.5, 0.5)
MAX_LOGIT = 30.0  # σ of this is 1 to float precision: exp() never overflows


def proposal_features(proposal: Proposal, recent: float) -> tuple:
    """What the model reads of a proposal: (``FEATURES`` 1-7, the same at every position,
    ``recent`` the source's ``AcceptanceModel.recent_logit``; the first row's
    ``Proposal.continuation``)."""
    length = proposal.match_length
    base = (
        math.log2(1 + length),
        float(length == 0),
        float(proposal.follows == USUAL),
        float(proposal.follows == ONCE),
        float(len(proposal.rows) > 1),
        recent,
        float(proposal.source == AT_CURSOR),
    )
    return base, proposal.continuation


def position_features(features: tuple, i: int) -> list[float]:
    """``x(i)``: the proposal's inputs with position ``i``'s."""
    base, continuation = features
    where = math.log2(1 + i)
    counted = [*continuation[i], 0.0] if i < len(continuation) else [0.0, 0, 1.0]
    share, occurrences, past = counted
    return [
        1.0,
        *base,
        where,
        float(i == 0),
        base[0] * where,
        share,
        math.log2(1 + occurrences),
        past,
    ]


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-MAX_LOGIT, min(MAX_LOGIT, z))))


class AcceptanceModel:
    """One source's online logistic model of per-position acceptance, and its tree bonus."""

    def __init__(self, weights=UNFITTED[0], bonus: float = UNFITTED[1], alternatives: float = 0.0):
        if len(weights) != len(FEATURES):
            raise ValueError(f"{len(FEATURES)} weights expected, got {len(weights)}")
        self.fitted = tuple(weights)
        self.weights = list(weights)
        self.rows = AcceptanceTracker(prior_bonus=bonus, prior_alternatives=alternatives)
        self.recent = [0.0, 0.0]  # decayed [first tokens kept, first tokens sent]

    def recent_logit(self) -> float:
        """The log-odds of the first draft token kept lately (``FIRST_PRIOR`` pseudo-counts
        at even odds; 0 before any pass)."""
        kept, sent = self.recent
        return math.log((kept + FIRST_PRIOR) / (sent - kept + FIRST_PRIOR))

    def observe_first(self, kept: bool) -> None:
        """A pass sent a first draft token: ``kept`` or not (fading as the adaptive's counts)."""
        self.recent = [self.recent[0] * DECAY + kept, self.recent[1] * DECAY + 1.0]

    def probabilities(self, features: tuple, length: int) -> list[float]:
        """P(draft token i kept | tokens before it were) for i < ``length`` (``x(i)`` of
        ``position_features``, its parts summed apart: this runs every pass)."""
        w, (base, continuation) = self.weights, features
        fixed = w[0] + sum(wk * xk for wk, xk in zip(w[1:BASE_END], base))
        slope = w[BASE_END] + w[BASE_END + 2] * base[0]
        share, occurrences, past = w[BASE_END + 3 :]
        values = []
        for i in range(length):
            z = fixed + slope * math.log2(1 + i) + (w[BASE_END + 1] if i == 0 else 0.0)
            if i < len(continuation):
                z += share * continuation[i][0] + occurrences * math.log2(1 + continuation[i][1])
            else:
                z += past
            values.append(sigmoid(z))
        return values

    def learn(self, features: tuple, depth: int, accepted: int) -> None:
        """One step per position the pass reached: ``accepted`` kept of ``depth`` sent."""
        w, fitted = self.weights, self.fitted
        if depth:
            self.observe_first(accepted > 0)
        for i in range(min(accepted + 1, depth)):
            x = position_features(features, i)
            error = float(i < accepted) - sigmoid(sum(wk * xk for wk, xk in zip(w, x)))
            for k, xk in enumerate(x):
                w[k] += LEARNING_RATE * error * xk - PULL * (w[k] - fitted[k])


@dataclass(frozen=True)
class Estimate:
    """What the choice reads of one proposal (as ``adaptive.AcceptanceTracker`` offers it)."""

    model: AcceptanceModel
    features: tuple

    def expected_tokens(self, length: int) -> list[float]:
        """[E[emitted tokens | draft length L] for L = 0..length]."""
        return expected_tokens(self.model.probabilities(self.features, length))

    def tree_bonus(self, length: int) -> float:
        return self.model.rows.tree_bonus(length)

    def alternatives_gain(self, tokens: int) -> float:
        return self.model.rows.alternatives_gain(tokens)


class CalibratedPolicy(AdaptivePolicy):
    """The adaptive policy's choice on the calibrated model's acceptance (a
    ``draft_policy.DraftPolicy``); ``model`` is shared by the policies of one source."""

    def __init__(self, curve: CostCurve, model: AcceptanceModel, rows: int = 1):
        super().__init__(curve, rows=rows)
        self.model = model

    def judge(self, proposal: Proposal) -> tuple[MatchClass, Estimate]:
        """The proposal's match class (probes are per class) and the model's estimate, which
        carries the features it was judged by: the choice hands them back with the outcome."""
        kind = match_class(proposal.match_length, proposal.follows)
        return kind, Estimate(self.model, proposal_features(proposal, self.model.recent_logit()))

    def learn(self, choice: Choice, outcome: PassOutcome) -> None:
        if not choice.features:
            return
        if outcome.tree and outcome.first_row is not None:
            self.model.learn(choice.features, *outcome.first_row)
            self.model.rows.record_rows(outcome)
        else:
            self.model.learn(choice.features, outcome.depth, outcome.accepted)


def fitted_model(drafter_name: str) -> AcceptanceModel:
    """A fresh model for ``drafter_name`` from its fitted weights (``UNFITTED`` if none)."""
    alternatives = ALTERNATIVES_PRIORS.get(drafter_name, 0.0)
    return AcceptanceModel(*FITTED.get(drafter_name, UNFITTED), alternatives)


class PolicyMemory(AdaptiveMemory):
    """The adaptive memory (curves, match-class counts) with the calibrated policies' models
    beside it, per (model, drafter, constrained or not); ``policy_kind``: the kind ``policy``
    makes unless told (``POLICY_KINDS``)."""

    def __init__(self, *args, policy_kind: str = "adaptive", **kwargs):
        super().__init__(*args, **kwargs)
        self.policy_kind = policy_kind
        self.models: dict[tuple[str, str, bool], AcceptanceModel] = {}

    def forget_acceptance(self) -> None:
        super().forget_acceptance()
        self.models.clear()

    def policy(
        self,
        model_key: str,
        drafter,
        curve: CostCurve | None = None,
        constrained: bool = False,
        kind: str | None = None,
    ) -> AdaptivePolicy:
        """``AdaptiveMemory.policy``, or with ``kind`` (default ``policy_kind``)
        ``calibrated`` a ``CalibratedPolicy`` on the source's shared model."""
        if (kind or self.policy_kind) != "calibrated":
            return super().policy(model_key, drafter, curve, constrained)
        key = (model_key, drafter.name, constrained)
        model = self.models.get(key) or self.models.setdefault(key, fitted_model(drafter.name))
        return CalibratedPolicy(curve or self.curve(model_key), model, drafter.rows_per_pass)
