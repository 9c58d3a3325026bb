"""Where the default policy loses to the hindsight bound: each pass of the default's replay
sorted by what it sent against the best cut of the same proposal (``oracle.BestCut``: the
row and length that pay most on the curve, knowing the answer), with the time it lost.

``python -m engine.bench.policy_gap --conversations FILE [--cost-curve NAME ...]`` replays the
conversations as the device table does (``devices.py``: the default's drafter, draft count
and policy on each curve, priced as it prices them; the drafters' own time is not charged)
and prints, per curve, for each kind of pass: how many, their share of the default's verify time, the tokens they made
per c(1) of time, the tokens per c(1) the best cut makes from the same states, and the time
lost: their time less the time the best cut's rate needs for the tokens they made, as a
share of the whole. The kinds:

- ``nothing pays``: sent nothing, and no cut of the proposal would have paid;
- ``held back``: sent nothing, where a cut would have paid (the policy judged it would not);
- ``sent, none kept``: the pass verified drafts and kept none (``, a cut paid``: another
  row or a shorter draft would have kept some and paid);
- ``kept less than the best cut``: kept some, fewer than the best cut would have;
- ``sent more than kept``: kept as many as the best cut, verifying more tokens than that;
- ``the best cut``: sent exactly it;
- ``plain, given up``: the loop decoded the rest plainly (the curve cannot pay).

The states are the default's own (each pass starts where the default's previous one ended),
so the best-cut column says what each pass could have made, not what a whole better replay
makes (that is the device table's ``hindsight``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from ..drafters import make_drafter, measurement_options
from ..drafters.base import Drafter
from ..errors import EngineError
from ..policy.verify_cost import CostCurve, curve_from_spec, named_curves
from ..settings import DraftSettings
from .conversations import read_conversations, replay_chats
from .oracle import WatchedDrafter
from .tune import model_identity, simulate

KINDS = (
    "nothing pays",
    "held back",
    "sent, none kept",
    "sent, none kept, a cut paid",
    "kept less than the best cut",
    "sent more than kept",
    "the best cut",
    "plain, given up",
)


@dataclass
class PassRecord:
    """One pass of the default: ``sent`` draft tokens of the row it kept from (0: none),
    ``kept`` of them; the best cut's length (0: send nothing); ``emitted``: the tokens the
    pass made (the kept ones and the target's own, unless an end-of-sequence ended it)."""

    sent: int
    kept: int
    best: int
    emitted: int = 0


class RecordingDrafter(WatchedDrafter):
    """``inner`` as the default runs it, noting each pass's best cut (``BestCut``) and what
    the pass sent and kept."""

    def __init__(self, inner: Drafter, answers: Sequence[Sequence[int]], curve: CostCurve):
        super().__init__(inner, answers, curve)
        self.passes: list[PassRecord] = []
        self.cut = 0  # the best cut of the proposal being judged

    def propose(self, k: int):
        proposal = self.inner.propose(k)
        self.cut = self.best.of_rows(proposal.rows, k, self.truth)[1]
        return proposal

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None) -> None:
        self.passes.append(PassRecord(drafted, accepted, self.cut, len(emitted)))
        self.cut = 0
        super().observe(emitted, accepted=accepted, drafted=drafted, row=row)


def kind_of(record: PassRecord) -> str:
    """Which of ``KINDS`` a pass is (all but ``plain, given up``)."""
    if not record.sent:
        return "held back" if record.best else "nothing pays"
    if not record.kept:
        return "sent, none kept, a cut paid" if record.best else "sent, none kept"
    if record.kept < record.best:
        return "kept less than the best cut"
    return "the best cut" if record.sent == record.best else "sent more than kept"


@dataclass
class KindTotals:
    passes: int = 0
    seconds: float = 0.0  # the default's verify time
    tokens: int = 0  # the default's emitted tokens
    best_seconds: float = 0.0  # the best cut's, on the same states
    best_tokens: int = 0


@dataclass
class Gap:
    """One curve's passes by kind."""

    base: float  # c(1), seconds
    plain: float | None = None  # plain decoding's token (queued), seconds; None: c(1)
    kinds: dict[str, KindTotals] = field(default_factory=lambda: {k: KindTotals() for k in KINDS})

    def add(self, kind: str, seconds: float, tokens: int, best_length: int, curve) -> None:
        totals = self.kinds[kind]
        totals.passes += 1
        totals.seconds += seconds
        totals.tokens += tokens
        # sending nothing is a queued pass, as the replay charges it (``oracle.BestCut``)
        totals.best_seconds += curve.base(best_length + 1) if best_length else curve.queued_base()
        totals.best_tokens += best_length + 1

    def rows(self) -> list[tuple[str, int, float, float, float, float]]:
        """Per kind: (kind, passes, share of time, tokens per c(1), the best cut's, time lost
        as a share of the whole)."""
        whole = sum(t.seconds for t in self.kinds.values()) or 1.0
        out = []
        for kind, t in self.kinds.items():
            if not t.passes:
                continue
            rate = t.tokens * self.base / t.seconds
            best = t.best_tokens * self.base / t.best_seconds
            lost = (t.seconds - t.tokens * t.best_seconds / t.best_tokens) / whole
            out.append((kind, t.passes, t.seconds / whole, rate, best, lost))
        return out

    def speedup(self) -> float:
        """The default's pooled speed-up over plain decoding on these passes."""
        tokens = sum(t.tokens for t in self.kinds.values())
        return tokens * (self.plain or self.base) / sum(t.seconds for t in self.kinds.values())


def default_replay(chats: dict, key: str, eos: int, named, recorder) -> Iterator[tuple]:
    """Replay ``chats`` as the device table does, with the default on ``named``'s curve, one
    process answering them in order; each chat's drafter is ``recorder(inner, answers, curve,
    chat's name)`` around the default's. Yields each chat's (that drafter, ``simulate``'s
    result)."""
    from ..policy.calibrated_policy import PolicyMemory

    curve = named.curve()
    default = DraftSettings().validated()
    default = replace(default, options=measurement_options(default.drafter))  # as devices.py
    memory = PolicyMemory(policy_kind=default.policy)
    for name, chat in chats.items():
        answers = [t["answer"] + [eos] * t.get("stop", True) for t in chat["turns"]]
        drafter = recorder(make_drafter(default), answers, curve, name)
        result = simulate(
            chat["turns"],
            default.drafter,
            default.draft_count,
            default.adaptive,
            memory,
            key,
            named.seconds,
            eos,
            drafter=drafter,
            tree_extra=named.tree_extra_s,
            pipelined=named.pipelined_share,
        )
        yield drafter, result


def policy_gap(chats: dict, key: str, eos: int, named) -> Gap:
    """Replay ``chats`` with the default on ``named``'s curve (``default_replay``) and sort
    its passes (``kind_of``)."""
    curve = named.curve()
    gap = Gap(curve.base(1), curve.queued_base())

    def recorder(inner, answers, curve, name):
        return RecordingDrafter(inner, answers, curve)

    for drafter, result in default_replay(chats, key, eos, named, recorder):
        costs = result["costs"]  # each pass as the replay charged it
        for record, seconds in zip(drafter.passes, costs):
            gap.add(kind_of(record), seconds, record.emitted, record.best, curve)
        for seconds in costs[len(drafter.passes) :]:  # the rest of an answer, decoded plainly
            gap.add("plain, given up", seconds, 1, 0, curve)
    return gap


def gap_lines(name: str, gap: Gap) -> list[str]:
    lines = [
        f"\n### {name}: the default {gap.speedup():.3f}x plain (pooled)\n",
        "| pass | passes | share of time | tokens per c(1) | best cut's | time lost |",
        "|---|---|---|---|---|---|",
    ]
    for kind, passes, share, rate, best, lost in gap.rows():
        lines.append(f"| {kind} | {passes} | {share:.1%} | {rate:.2f} | {best:.2f} | {lost:.1%} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.policy_gap", description=__doc__)
    parser.add_argument("--conversations", metavar="FILE", required=True)
    parser.add_argument("--cost-curve", action="append", metavar="NAME|FILE")
    parser.add_argument("--max-tokens", type=int, help="answer cap (default: whole answers)")
    args = parser.parse_args(argv)
    from ..models import load_model

    try:
        specs = args.cost_curve
        curves = [curve_from_spec(s) for s in specs] if specs else list(named_curves().values())
        conversations = read_conversations(args.conversations)  # checked before the model loads
        loaded = load_model(None)
        chats = replay_chats(conversations, loaded, args.max_tokens)
        key, eos = model_identity(loaded)
    except EngineError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    tokens = sum(len(t["answer"]) for chat in chats.values() for t in chat["turns"])
    print(f"# Policy gap: {args.conversations}, {len(chats)} conversations, {tokens} answer tokens")
    print(f"\nload average at start: {load} (the figures are replays: load does not move them)")
    for named in curves:
        print("\n".join(gap_lines(named.name, policy_gap(chats, key, eos, named))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
