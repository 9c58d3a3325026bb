"""The device table: predicted speed-ups of Draftless's default, the peers' strategies and
the oracle on every named verify-cost curve, replayed over the same greedy answers.

``python -m engine.bench.devices [--split check] [--cost-curve NAME|FILE ...]`` replays the
benchmark's plain answers (``tune.reference_answers``); no model is timed, only the
drafters' own time per pass (the least of three replays), charged as a host CPU pays it beside
the accelerator: predicted speed-up = plain passes x c(1) / (Σ c(tokens verified) + drafter time).

Strategies: ``default`` (the engine's defaults: drafter, draft-count cap, adaptive); the
peers, each drafting as its own code does with its default sizes: ``hf-prompt-lookup``,
``vllm-ngram`` and ``vllm-suffix`` (``peer_drafters.py``; vllm-suffix's host time is not
charged) and llama.cpp's ``ngram-simple`` and ``ngram-map-k`` (Draftless's drafters of those
names follow llama.cpp's rules); ``suffix`` drafting a fixed
16 with no policy; ``prompt-lookup`` with the curve deciding up to 32 tokens; and the
``oracle`` (the answer itself, up to 32 tokens a pass: the limit on that curve).
Draftless's strategies draft what a json-schema answer's schema forces, as the engine does;
the peers' code does not.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

from ..settings import DraftSettings
from ..verify_cost import curve_from_spec, named_curves
from .oracle import OracleDrafter
from .peer_drafters import PEER_DRAFTERS
from .tune import geomean, predict, reference_answers

COPY_HEAVY = ("code-edit", "edit-session", "edit-memory", "rag", "structured")
OPEN = ("open-question", "novel")
GOAL_PEER_RATIO, GOAL_FLOOR = 1.2, 0.97
REPLAYS = 3  # each chat's drafter time: the least of this many replays


def _plan(drafter: str, count: int, adaptive: bool = False, **more) -> dict:
    return {"drafter_name": drafter, "draft_count": count, "adaptive": adaptive, **more}


def strategies(eos: int) -> dict[str, dict]:
    """name -> ``tune.predict`` plan; ``peer``: counted as a peer for the goals."""
    default = DraftSettings().validated()
    plans = {"default": _plan(default.drafter, default.draft_count, default.adaptive)}
    for name, cls in PEER_DRAFTERS.items():
        charge = getattr(cls, "charge_host_time", True)
        make = lambda chat, run, cls=cls: cls.for_run(run)  # noqa: E731
        plans[name] = _plan(
            name, cls.draft_count, make=make, peer=True, charge=charge, grammar=False
        )
    for mode in ("ngram-simple", "ngram-map-k"):  # llama.cpp's --draft-max default: 16
        plans[f"llama.cpp {mode}"] = _plan(mode, 16, peer=True, grammar=False)
    plans["suffix fixed 16, no policy"] = _plan("suffix", 16)
    plans["prompt-lookup cap 32"] = _plan("prompt-lookup", 32, adaptive=True)

    def oracle(chat, run):
        return OracleDrafter([t["answer"] + [eos] * t.get("stop", True) for t in chat["turns"]])

    plans["oracle"] = _plan("oracle", 32, make=oracle, grammar=False)
    return plans


def device_table(chats: dict, key: str, eos: int, curves) -> list[str]:
    tasks, plans = sorted({c["task"] for c in chats.values()}), strategies(eos)
    lines = []
    for named in curves:
        tree = f" A tree pass costs {named.tree_extra_s * 1e3:.2f} ms more than c(its nodes)."
        lines += [f"\n### {named.name}\n", named.source + tree, ""]
        lines += ["| strategy | " + " | ".join(tasks) + " | copy-heavy | all |"]
        lines += ["|---" * (len(tasks) + 3) + "|"]
        rows, replay = {}, dict(charge_drafter=True, tree_extra=named.tree_extra_s, repeats=REPLAYS)
        for label, plan in plans.items():
            gc.collect()  # each strategy's drafter timed without the earlier ones' garbage
            gc.freeze()
            values = predict(chats, key, eos, named.seconds, plan, **replay)
            copy = geomean(values[t] for t in COPY_HEAVY if t in values)
            rows[label] = {**values, "copy-heavy": copy, "all": geomean(values.values())}
            cells = [f"{rows[label][t]:.2f}" for t in tasks + ["copy-heavy", "all"]]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
            print(lines[-1], file=sys.stderr, flush=True)
        lines += ["", *goal_lines(rows, tasks, plans)]
    return lines


def goal_lines(rows: dict[str, dict], tasks: list[str], plans: dict) -> list[str]:
    """The speed goals on one curve: the default against the best peer strategy."""
    peers = [label for label in rows if plans[label].get("peer")]
    default = rows["default"]
    best = max(peers, key=lambda p: rows[p]["copy-heavy"])
    ratio = default["copy-heavy"] / rows[best]["copy-heavy"]
    behind = [t for t in tasks if default[t] < max(rows[p][t] for p in peers) - 1e-9]
    low = [t for t in OPEN if t in default and default[t] < GOAL_FLOOR]
    met = "met" if ratio >= GOAL_PEER_RATIO else "not met"
    return [
        f"- default / best peer ({best}) on copy-heavy families: {ratio:.2f} "
        f"({met}: goal {GOAL_PEER_RATIO})",
        f"- families where a peer beats the default: {', '.join(behind) or 'none'}",
        f"- open questions and novel text at or above {GOAL_FLOOR}x: "
        f"{'yes' if not low else 'no: ' + ', '.join(low)}",
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.devices", description=__doc__)
    parser.add_argument("--split", default="check", choices=("tuning", "check"))
    parser.add_argument(
        "--cost-curve",
        action="append",
        metavar="NAME|FILE",
        help="a curve to predict on (repeatable; default: every shipped curve)",
    )
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--cached-only", action="store_true", help="decode nothing new")
    parser.add_argument("--out", help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    specs = args.cost_curve
    curves = [curve_from_spec(s) for s in specs] if specs else list(named_curves().values())
    chats, key, eos = reference_answers(args.split, args.max_tokens, cached_only=args.cached_only)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    started = time.perf_counter()
    command = " ".join(argv if argv is not None else sys.argv[1:])
    tokens = sum(len(t["answer"]) for c in chats.values() for t in c["turns"])
    header = [
        f"# Device table ({args.split} set: {len(chats)} chats, {tokens} answer tokens)",
        "",
        f"`python -m engine.bench.devices {command}`; load average at start "
        f"{', '.join(f'{x:.2f}' for x in load) if load else 'n/a'} (only the drafters' own "
        "time per pass depends on it). Predicted speed-up over plain decoding on each curve, "
        "geometric mean over a task's chats; copy-heavy = " + ", ".join(COPY_HEAVY) + ".",
    ]
    lines = header + device_table(chats, key, eos, curves)
    lines.append(f"\n(replayed in {time.perf_counter() - started:.0f} s)")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
