"""Does the target's own confidence tell which drafts it will keep? Issue 59's first
question, asked before any policy reads it.

After a pass the target has computed its distribution at every position it verified; the
last of them chose the token the next draft follows. Its confidence there (the probability
of the token it chose, of its top token, the top-2 margin, the entropy; and the chosen
token's probability over the last 4 positions) is read here beside whether the next
proposal's first token was kept, at every proposal the default's policy judged in a replay
on a curve (``policy_gap.py``'s replay: the default's drafter, count and policy, one
process answering the chats in order). How well a feature separates kept first tokens from
rejected ones is its AUC: the chance that a kept one scores above a rejected one (ties
count half; 0.5 separates nothing; confident = high probability, high margin, low
entropy). Beside it: the AUC of the match class the policy learns by (each class scored by
its own keep rate over these records, so the class's best case), the feature's AUC within
each class (pairs of one class only: what it adds to the classes), and a logistic model of
class and all five features fitted on the same records.

The target's distribution along the answer is the embedded model's, teacher-forced (as
``recycling.py`` reads its top-k). On the embedded model's own greedy answers to a split of
the suite's prompts (``--split tuning`` or ``check``: decoded plainly once and cached, as
``python -m engine.bench.devices`` keeps them) that is exactly what the verify passes
compute; on public answers (``--conversations FILE``) it is a stand-in, since the embedded
model did not write them.

``python -m engine.bench.confidence (--conversations FILE ... | --split tuning) [--limit N]
[--cost-curve NAME ...]`` prints a Markdown table with the load average.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..drafters.base import Drafter
from ..errors import EngineError
from ..policy.adaptive import match_class
from ..policy.verify_cost import CostCurve, curve_from_spec
from .oracle import WatchedDrafter
from .policy_gap import default_replay
from .recycling import load, teacher_forced

# a steep curve (a 4-bit 7B on an M2 Pro) and a flat one (a 7B in bf16 on an H100): issue 59's
# two regimes
CURVES = ("apple-m2pro-7b-4bit-estimate", "h100-7b-bf16")
FEATURES = ("p(chosen)", "p(top)", "margin", "-entropy", "p(chosen), last 4")
RECENT = 4  # positions the last feature averages: a 4-token pass's worth


def confidence_rows(logits, chosen: Sequence[int]) -> np.ndarray:
    """Per position of ``logits`` ([n, vocab]): the probability of ``chosen`` (NaN where it is
    -1), of the top token, the top-2 margin and the negated entropy in nats, float32
    ``[n, 4]``."""
    import mlx.core as mx

    logits = logits[: len(chosen)]
    logp = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    p = mx.exp(logp)
    top2 = mx.topk(p, 2, axis=-1)  # ascending within the pair
    picked = mx.array([max(c, 0) for c in chosen])[:, None]
    chosen_p = mx.take_along_axis(p, picked, axis=-1)[:, 0]
    negentropy = mx.sum(p * logp, axis=-1)
    rows = mx.stack([chosen_p, top2[:, 1], top2[:, 1] - top2[:, 0], negentropy], axis=1)
    rows = np.array(rows, dtype=np.float32)
    rows[np.asarray(chosen) < 0, 0] = np.nan
    return rows


def teacher_confidence(loaded, turns: Sequence[dict]) -> list[np.ndarray]:
    """Per turn, ``confidence_rows`` at each answer position and after the last: row j the
    distribution that chose answer token j."""
    return teacher_forced(loaded, turns, confidence_rows)


@dataclass
class FirstToken:
    """One judged proposal: the target's confidence where it was made (``FEATURES``), its
    match class, and whether its first row's first token was kept, where and which."""

    features: tuple[float, ...]
    klass: int
    kept: bool
    at: int  # answer tokens made before it
    token: int  # its first token


class ConfidenceRecorder(WatchedDrafter):
    """``inner`` as the default runs it, noting at each proposal the target's confidence at
    the last token made (``confidence``: ``teacher_confidence``'s per turn, in the order the
    replay runs them) and whether the first token was kept."""

    def __init__(self, inner: Drafter, answers, curve: CostCurve, confidence: list[np.ndarray]):
        super().__init__(inner, answers, curve)
        self.confidence = confidence
        self.records: list[FirstToken] = []

    def propose(self, k: int):
        proposal = self.inner.propose(k)
        said, answer = len(self.truth.said), self.truth.answer
        if proposal.rows and proposal.rows[0] and 0 < said < len(answer):
            turn = len(self.confidence) - len(self.truth.queued) - 1  # the answers begun
            rows = self.confidence[turn][max(0, said - RECENT) : said]
            features = (*rows[-1], float(np.mean(rows[:, 0])))
            first = int(proposal.rows[0][0])
            klass = int(match_class(proposal.match_length, proposal.follows))
            self.records.append(FirstToken(features, klass, first == answer[said], said, first))
        return proposal


def first_tokens(chats: dict, key: str, eos: int, named, confidence: dict) -> list[FirstToken]:
    """Every proposal the default judged replaying ``chats`` on ``named``'s curve
    (``policy_gap.default_replay``), with the target's confidence (``confidence``:
    ``teacher_confidence`` per chat)."""

    def recorder(inner, answers, curve, name):
        return ConfidenceRecorder(inner, answers, curve, confidence[name])

    replayed = default_replay(chats, key, eos, named, recorder)
    return [record for drafter, _ in replayed for record in drafter.records]


def auc(scores, labels) -> float:
    """The chance that a positive label's score is above a negative one's, ties counted half
    (the Mann-Whitney U over the pairs); NaN without both labels. [0.1, 0.2, 0.2, 0.9] with
    [no, yes, no, yes]: of the 4 pairs, 3 are ordered and 1 tied, so 0.875."""
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    positives, negatives = int(labels.sum()), int((~labels).sum())
    if not positives or not negatives:
        return math.nan
    order = np.argsort(scores, kind="mergesort")
    ordered = scores[order]
    starts = np.r_[0, np.flatnonzero(np.diff(ordered)) + 1]
    ends = np.r_[starts[1:], len(ordered)]
    ranks = np.empty(len(scores))
    ranks[order] = np.repeat((starts + ends + 1) / 2, ends - starts)  # ties: their mean rank
    wins = ranks[labels].sum() - positives * (positives + 1) / 2
    return float(wins / (positives * negatives))


def within_classes(scores, labels, classes) -> float:
    """``auc`` over the pairs of one class only, the classes pooled by their pairs: what a
    score separates that the class does not."""
    scores, labels, classes = map(np.asarray, (scores, labels, classes))
    wins = pairs = 0.0
    for klass in np.unique(classes):
        inside = classes == klass
        n = int(labels[inside].sum()) * int((~labels[inside]).sum())
        if n:
            wins += auc(scores[inside], labels[inside]) * n
            pairs += n
    return wins / pairs if pairs else math.nan


def class_rates(labels, classes) -> np.ndarray:
    """Each record's class's keep rate over the records: the class's score at its best."""
    labels, classes = np.asarray(labels, dtype=float), np.asarray(classes)
    rates = np.empty(len(labels))
    for klass in np.unique(classes):
        inside = classes == klass
        rates[inside] = labels[inside].mean()
    return rates


def logistic_scores(columns: np.ndarray, labels, steps: int = 25, ridge: float = 1e-3):
    """A logistic model of ``labels`` on ``columns`` (standardized, with an intercept) by
    Newton's method with a small ridge, fitted and scored on the same records."""
    x = (columns - columns.mean(axis=0)) / (columns.std(axis=0) + 1e-9)
    x = np.c_[np.ones(len(x)), x]
    y, w = np.asarray(labels, dtype=float), np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(x @ w)))
        hessian = x.T @ (x * (p * (1 - p))[:, None]) + ridge * np.eye(len(w))
        w -= np.linalg.solve(hessian, x.T @ (p - y) + ridge * w)
    return x @ w


def separation(records: Sequence[FirstToken]) -> dict:
    """The AUCs of one set of records (see the module's doc)."""
    features = np.array([r.features for r in records], dtype=float)
    labels = np.array([r.kept for r in records])
    classes = np.array([r.klass for r in records])
    usable = ~np.isnan(features).any(axis=1)
    features, labels, classes = features[usable], labels[usable], classes[usable]
    onehot = (classes[:, None] == np.unique(classes)[None]).astype(float)
    return {
        "records": len(labels),
        "kept": float(labels.mean()) if len(labels) else math.nan,
        "class": auc(class_rates(labels, classes), labels),
        "features": {
            name: (auc(features[:, i], labels), within_classes(features[:, i], labels, classes))
            for i, name in enumerate(FEATURES)
        },
        "class and features": auc(logistic_scores(np.c_[onehot, features], labels), labels),
    }


def separation_lines(rows: dict) -> list[str]:
    """``{(source, curve): separation}`` as a Markdown table."""
    head = ["records", "kept", "class"] + [f"{f} (within class)" for f in FEATURES]
    lines = [
        "| answers, curve | " + " | ".join(head) + " | class and features |",
        "|---" * (len(head) + 2) + "|",
    ]
    for (source, curve), s in rows.items():
        cells = [str(s["records"]), f"{s['kept']:.1%}", f"{s['class']:.3f}"]
        cells += [f"{a:.3f} ({w:.3f})" for a, w in s["features"].values()]
        cells.append(f"{s['class and features']:.3f}")
        lines.append(f"| {source}, {curve} | " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.confidence", description=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--conversations", metavar="FILE", action="append", help="public answers")
    source.add_argument("--split", choices=("check", "tuning"), help="the model's own answers")
    parser.add_argument("--limit", type=int, help="only the first N chats of each source")
    parser.add_argument("--cost-curve", action="append", metavar="NAME", help="default: two")
    args = parser.parse_args(argv)
    from ..models import load_model
    from .conversations import read_conversations, replay_chats
    from .tune import model_identity, reference_answers

    print(f"at start: {load()}", file=sys.stderr)
    started = time.perf_counter()
    try:  # the inputs checked before the model loads
        curves = [curve_from_spec(name) for name in args.cost_curve or CURVES]
        read = [(path, read_conversations(path)) for path in args.conversations or ()]
        loaded = load_model(None)
        key, eos = model_identity(loaded)
        if args.split:
            chats, key, eos = reference_answers(args.split, 512)
            sources = {f"the model's own ({args.split})": chats}
        else:
            sources = {path: replay_chats(conversations, loaded) for path, conversations in read}
        rows = {}
        for label, chats in sources.items():
            chats = dict(list(chats.items())[: args.limit])
            confidence = {n: teacher_confidence(loaded, c["turns"]) for n, c in chats.items()}
            for named in curves:
                records = first_tokens(chats, key, eos, named, confidence)
                rows[(label, named.name)] = separation(records)
                print(f"{label}, {named.name}: {len(records)} ({load()})", file=sys.stderr)
    except (EngineError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"_{load()}; {time.perf_counter() - started:.0f} s_\n")
    print("\n".join(separation_lines(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
