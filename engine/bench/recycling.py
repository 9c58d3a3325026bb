"""Token Recycling replayed on verify-cost curves, with the target's top-k teacher-forced.

``token-recycling`` learns from the target's top-8 at every kept position, which a finished
answer does not record. Here the embedded model reads each turn's prompt and answer once
(teacher forcing) and its top-8 at every answer position is handed to the drafter's
``observe`` as the decode loop hands it after a pass (``TopkFeed``); everything else is the
device table's replay (``tune.replays``: the adaptive policy on the curve, the drafter's own
time charged, the least of three replays).

- On the benchmark's own answers (``--split check`` or ``tuning``: the embedded model's
  greedy answers, cached by ``python -m engine.bench.devices``) the figures are exact: the
  top-8 read along the answer is what the verify passes would compute there (up to the
  rounding of a pass's length, see method.md).
- On public answers (``--conversations FILE``) they are an estimate: the embedded model
  would not have written that answer, so its top-8 along it is not what it would verify.

The matrix is carried from one chat to the next within a replay (one process answering
them in order, as the service keeps it). Compared: the default (``suffix-static``),
``suffix, no table`` and ``ngrammys`` (policy on, 10 rows of up to 10; context rows only,
as the replay has no bigram table), the hindsight bound of the default's drafts and the oracle; then
``token-recycling`` (policy on), its whole tree every pass as the paper sends it, and
``suffix-recycling`` (the default with recycled rows added to its tree).

``python -m engine.bench.recycling [--split check] [--conversations FILE] [--limit N]
[--cost-curve NAME ...]`` prints a Markdown table, with the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

import numpy as np

from ..drafters import make_drafter, measurement_options
from ..drafters.base import Drafter
from ..drafters.stores import DrafterStores
from ..drafters.token_recycling import TOP_K
from ..errors import EngineError
from ..settings import DraftSettings
from ..policy.verify_cost import NamedCurve, curve_from_spec
from .devices import _plan, _replays, strategies
from .tune import per_task, geomean

CURVES = (
    "apple-m5max-70b-4bit",
    "h100-7b-bf16",
    "apple-m2pro-7b-4bit-estimate",
    "cpu-epyc-2core-135m-f32",
)
COMPARED = ("default", "suffix, no table", "hindsight", "oracle")
SHOWN = (
    "default",
    "suffix, no table",
    "token-recycling",
    "suffix-recycling, no table",
    "suffix-recycling",
)
FORWARD_CHUNK = 256  # answer tokens per teacher-forced pass: 256 x 49,152 float32 logits, 50 MB


def teacher_forced(loaded, turns: Sequence[dict], read) -> list[np.ndarray]:
    """Per turn, ``read(logits, chosen)`` of the model's logits at each answer position and
    after the answer's last token (``[len(answer) + 1, vocab]``, a chunk at a time: row j
    the distribution that chose answer token j; ``chosen``: those tokens, -1 after the
    last), its rows stacked. A turn whose prompt goes on from the turn before (a chat's next
    question) reads on from its cache."""
    from ..loop.decode import Target

    out, target, read_so_far = [], None, []
    for turn in turns:
        prompt, answer = list(turn["prompt"]), list(turn["answer"])
        if (
            target is None
            or len(prompt) <= len(read_so_far)
            or prompt[: len(read_so_far)] != read_so_far
        ):
            target, read_so_far = Target(loaded.model), []
        target.prefill(prompt[len(read_so_far) : -1])
        read_so_far = prompt + answer
        read_in, chosen = prompt[-1:] + answer, answer + [-1]
        rows = []
        for start in range(0, len(read_in), FORWARD_CHUNK):
            chunk = read_in[start : start + FORWARD_CHUNK]
            rows.append(read(target.forward(chunk), chosen[start : start + FORWARD_CHUNK]))
        out.append(np.concatenate(rows))
    return out


def teacher_topk(loaded, turns: Sequence[dict], k: int = TOP_K) -> list[np.ndarray]:
    """Per turn, the model's top-``k`` (best first) at each answer position and after the
    answer's last token: ``[len(answer) + 1, k]`` int32, row j the ranking that chose
    answer token j."""
    from ..loop.decode import top_k_tokens

    def read(logits, chosen):
        return np.asarray(top_k_tokens(logits, k, len(chosen)), dtype=np.int32)

    return teacher_forced(loaded, turns, read)


class TopkFeed(Drafter):
    """``inner`` replayed over known turns, its ``observe`` handed the target's top-k at the
    positions each pass emitted (``tops``: ``teacher_topk``'s per turn, in the order the
    replay runs them; one ``reset`` or ``extend`` starts each turn). ``stores``: the memory
    ``inner`` keeps across chats (the replay's own, not a fresh one per chat)."""

    name = "topk-feed"
    summary = "benchmark only: a drafter fed the target's teacher-forced top-k"

    def __init__(self, inner: Drafter, tops: list[np.ndarray], stores: DrafterStores):
        super().__init__(None)
        self.inner, self.tops, self.stores = inner, tops, stores
        self.name, self.multi_row = inner.name, inner.multi_row
        self.turn, self.at = -1, 0

    @property
    def rows_per_pass(self) -> int:
        return self.inner.rows_per_pass

    def attach_model(self, model_key: str, **data) -> None:
        super().attach_model(model_key, **data)
        self.inner.attach_model(model_key, **{**data, "stores": self.stores})

    def _next_turn(self) -> None:
        self.turn, self.at = self.turn + 1, 0

    def reset(self, prompt_tokens) -> None:
        self._next_turn()
        self.inner.reset(prompt_tokens)

    def extend(self, tokens) -> None:
        self._next_turn()
        self.inner.extend(tokens)

    def propose(self, k):
        return self.inner.propose(k)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None) -> None:
        top = self.tops[self.turn][self.at : self.at + len(emitted)]
        self.at += len(emitted)
        self.inner.observe(
            emitted, accepted=accepted, drafted=drafted, row=row, target_topk=top.tolist()
        )


def recycling_plans(tops: dict[str, list[np.ndarray]]) -> dict[str, dict]:
    """The token-recycling strategies: the policy on the curve choosing rows and depth (draft
    count 6, the template's depth); the paper's whole tree every pass (no policy); and
    ``suffix-recycling`` (the default's drafter, count and policy, recycled rows added)."""

    def fed(drafter: str, count: int, adaptive: bool, **options) -> dict:
        options = {**measurement_options(drafter), **options}
        settings = DraftSettings(
            drafter=drafter, draft_count=count, adaptive=adaptive, options=options
        )

        def make(chat, run):
            stores = run.setdefault("stores", DrafterStores())
            return TopkFeed(make_drafter(settings.validated()), tops[chat["id"]], stores)

        return _plan(drafter, count, adaptive, make=make)

    default = DraftSettings().validated()
    return {
        "token-recycling": fed("token-recycling", 6, True),
        "token-recycling, whole tree": fed("token-recycling", 6, False),
        "suffix-recycling": fed("suffix-recycling", default.draft_count, True),
        "suffix-recycling, no table": fed(
            "suffix-recycling", default.draft_count, True, table=False
        ),
    }


def figures(chats: dict, key: str, eos: int, curves: Sequence[NamedCurve], tops) -> dict:
    """{curve: {strategy: (geometric mean over chats, {category: geometric mean})}}."""
    result: dict = {}
    for named in curves:
        name = named.name
        base = strategies(eos, named)
        plans = {label: base[label] for label in COMPARED}
        plans["ngrammys"] = _plan("ngrammys", 10, True)
        plans.update(recycling_plans(tops))
        for label, plan in plans.items():
            charged = plan.get("charge", True)
            kept = _replays(chats, key, eos, named, plan, charged)
            spent = {
                n: r["plain_s"] / (r["spec_s"] + (r["drafter_s"] if charged else 0.0))
                for n, r in kept.items()
            }
            tpp = sum(r["emitted"] for r in kept.values()) / sum(r["passes"] for r in kept.values())
            categories = per_task(chats, kept, charged)
            result.setdefault(name, {})[label] = (geomean(spent.values()), categories, tpp)
            print(f"{name}: {label} {geomean(spent.values()):.3f} ({load()})", file=sys.stderr)
    return result


def load() -> str:
    return "load " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def table(result: dict) -> list[str]:
    labels = list(next(iter(result.values())))
    lines = ["| curve | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for curve, rows in result.items():
        lines.append(f"| {curve} | " + " | ".join(f"{rows[s][0]:.3f}" for s in labels) + " |")
    lines.append("| tokens per pass (last curve) | ")
    lines[-1] += " | ".join(f"{rows[s][2]:.2f}" for s in labels) + " |"
    categories = sorted({c for rows in result.values() for c in rows["default"][1]})
    lines += [
        "",
        "| curve | " + " | ".join(f"{c}: " + " / ".join(SHOWN) for c in categories) + " |",
    ]
    lines.append("|---" * (len(categories) + 1) + "|")
    for curve, rows in result.items():
        cells = [
            " / ".join(f"{rows[s][1].get(c, float('nan')):.2f}" for s in SHOWN) for c in categories
        ]
        lines.append(f"| {curve} | " + " | ".join(cells) + " |")
    return lines


def cached_topk(path: str | None, loaded, chats: dict) -> dict[str, list[np.ndarray]]:
    """``teacher_topk`` of every chat, read from ``path`` where an earlier run kept them for
    the same chats and answers (else computed, and kept there)."""
    answers = [t["answer"] for c in chats.values() for t in c["turns"]]
    fingerprint = np.asarray([len(a) for a in answers] + [sum(map(sum, answers))], np.int64)
    if path and os.path.exists(path):
        with np.load(path) as kept:
            if np.array_equal(kept["fingerprint"], fingerprint):
                return {
                    name: [kept[f"{name}/{i}"] for i in range(len(chat["turns"]))]
                    for name, chat in chats.items()
                }
    tops = {name: teacher_topk(loaded, chat["turns"]) for name, chat in chats.items()}
    if path:
        arrays = {f"{n}/{i}": top for n, turns in tops.items() for i, top in enumerate(turns)}
        np.savez(path, fingerprint=fingerprint, **arrays)
    return tops


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.recycling", description=__doc__)
    parser.add_argument("--split", default="check", choices=("tuning", "check"))
    parser.add_argument("--conversations", metavar="FILE", help="public answers (an estimate)")
    parser.add_argument("--limit", type=int, help="replay only the first N chats")
    parser.add_argument("--cost-curve", action="append", metavar="NAME", help="default: four")
    parser.add_argument("--topk-cache", metavar="FILE.npz", help="keep the top-k here, reuse it")
    args = parser.parse_args(argv)
    from ..models import load_model
    from .conversations import read_conversations, replay_chats
    from .tune import model_identity, reference_answers

    print(f"at start: {load()}", file=sys.stderr)
    started = time.perf_counter()
    try:  # the inputs checked before the model loads
        curves = [curve_from_spec(name) for name in args.cost_curve or CURVES]
        conversations = read_conversations(args.conversations) if args.conversations else None
        loaded = load_model(None)
        key, eos = model_identity(loaded)
        if conversations is not None:
            chats = replay_chats(conversations, loaded)
        else:
            chats, key, eos = reference_answers(args.split, 512, cached_only=True)
        chats = dict(list(chats.items())[: args.limit])
        for name, chat in chats.items():
            chat["id"] = name
        tops = cached_topk(args.topk_cache, loaded, chats)
        tokens = sum(len(t["answer"]) for c in chats.values() for t in c["turns"])
        print(
            f"teacher-forced top-{TOP_K} of {tokens} answer tokens in "
            f"{time.perf_counter() - started:.0f} s ({load()})",
            file=sys.stderr,
        )
        result = figures(chats, key, eos, curves, tops)
    except EngineError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    source = args.conversations or f"the {args.split} split's greedy answers (exact)"
    print(
        f"{len(chats)} chats, {tokens} answer tokens from {source}; {load()} at the end; "
        f"{time.perf_counter() - started:.0f} s\n"
    )
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
