"""Fit the calibrated policy's starting weights (``calibrated_policy.FITTED``) on the tuning
split: ``python -m engine.bench.calibrate --conversations FILE [FILE ...] [--drafter NAME]``.

Each conversation's answers are replayed (``tune.simulate``) with the drafter sending every
row it proposes, ``--draft-count`` tokens long, so each position is seen as far as the answer
keeps the draft; every first-row position reached is one observation (kept or not) with the
proposal's features (``calibrated_policy.FEATURES``). A logistic regression over them gives
the weights; the tokens tree passes' other rows added per first-row token give the tree
bonus. Feed it tuning files only (``python -m engine.bench.conversations --split tuning``):
the dev split judges the result.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import replace

import numpy as np

from ..drafters.base import Proposal
from ..errors import EngineError
from ..policy.calibrated_policy import (
    FEATURES,
    AcceptanceModel,
    position_features,
    proposal_features,
)
from ..policy.draft_policy import Choice, FixedDraftLength, PassOutcome
from ..settings import DraftSettings
from .conversations import read_conversations, replay_chats
from .tune import model_identity, simulate

RIDGE = 1e-3  # L2 penalty of the fit: keeps a feature no observation moves at 0
NEWTON_STEPS = 25  # the fit's change is below 1e-9 by then on the tuning samples


class _Recorder(FixedDraftLength):
    """A policy that sends everything (``FixedDraftLength``) and counts, per (features,
    position), [reached, kept]."""

    def __init__(self, curve, counts: dict, trees: list[float]):
        self.curve, self.counts, self.trees = curve, counts, trees
        self.model = AcceptanceModel()  # only its recent first tokens, as the policy's

    def choose(self, proposal: Proposal, limit: int) -> Choice:
        features = proposal_features(proposal, self.model.recent_logit())
        return replace(super().choose(proposal, limit), features=features)

    def record(self, choice: Choice, outcome: PassOutcome) -> None:
        if not outcome.depth or not choice.features:
            return
        depth, kept = outcome.depth, outcome.accepted
        if outcome.tree and outcome.first_row is not None:
            depth, kept = outcome.first_row
            self.trees[0] += outcome.accepted - kept
            self.trees[1] += depth
        self.model.observe_first(kept > 0)
        for i in range(min(kept + 1, depth)):
            seen = self.counts[(choice.features, i)]
            seen[0] += 1
            seen[1] += i < kept


class _RecordingMemory:
    """What ``tune.simulate`` asks of a memory: a policy per chat, and the curves."""

    def __init__(self):
        self.curves: dict = {}
        self.counts: dict = defaultdict(lambda: [0, 0])
        self.trees = [0.0, 0.0]  # tokens beyond trees' first rows, trees' first-row tokens

    def policy(self, model_key, drafter, curve=None, constrained=False):
        return _Recorder(curve, self.counts, self.trees)


def observe(chats: dict, key: str, eos: int, drafter: str, count: int) -> _RecordingMemory:
    """Every chat replayed with the recorder: the counts the fit reads."""
    memory = _RecordingMemory()
    flat = {1: 1.0, count + 1: 1.0}  # the recorder plans nothing: any curve does
    for chat in chats.values():
        simulate(chat["turns"], drafter, count, True, memory, key, flat, eos)
    return memory


def fit(counts: dict) -> np.ndarray:
    """Logistic regression weights (``FEATURES``' order) over [reached, kept] counts."""
    rows = [(position_features(seen, i), n, k) for (seen, i), (n, k) in counts.items()]
    x = np.array([r[0] for r in rows])
    n = np.array([r[1] for r in rows], dtype=float)
    kept = np.array([r[2] for r in rows], dtype=float)
    w = np.zeros(len(FEATURES))
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (kept - n * p) - RIDGE * w
        hessian = (x.T * (n * p * (1 - p))) @ x + RIDGE * np.eye(len(w))
        w += np.linalg.solve(hessian, gradient)
    return w


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.calibrate", description=__doc__)
    parser.add_argument("--conversations", nargs="+", required=True, metavar="FILE")
    parser.add_argument("--drafter", default="suffix")
    parser.add_argument("--draft-count", type=int, default=64)
    args = parser.parse_args(argv)
    from ..models import load_model

    total = _RecordingMemory()
    try:  # the inputs checked before the model loads
        DraftSettings(drafter=args.drafter, draft_count=args.draft_count).validated()
        conversations = [read_conversations(path) for path in args.conversations]
        loaded = load_model(None)
        key, eos = model_identity(loaded)
        for read in conversations:
            chats = replay_chats(read, loaded)
            memory = observe(chats, key, eos, args.drafter, args.draft_count)
            for seen, (n, k) in memory.counts.items():
                total.counts[seen][0] += n
                total.counts[seen][1] += k
            total.trees = [a + b for a, b in zip(total.trees, memory.trees)]
    except EngineError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    weights = fit(total.counts)
    observations = sum(n for n, _ in total.counts.values())
    bonus = total.trees[0] / total.trees[1] if total.trees[1] else 0.0
    print(f"{observations} positions observed; tree bonus {bonus:.3f} per first-row token")
    for name, w in zip(FEATURES, weights):
        print(f"  {name:45} {w:+.3f}")
    rounded = tuple(round(float(w), 3) for w in weights)
    print(f'FITTED["{args.drafter}"] = ({rounded}, {round(bonus, 3)})')
    return 0


if __name__ == "__main__":
    sys.exit(main())
