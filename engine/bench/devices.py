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
names follow llama.cpp's rules); ``suffix, no table`` (the default without the static
n-gram table's row, with the default's policy: what the table adds); ``suffix``
drafting a fixed 16 with no policy; ``prompt-lookup`` with the curve deciding up to 32 tokens; and the
``hindsight`` (the default drafter's own rows, each pass cut knowing the answer to the row
and length that pay most on the curve, or nothing: what a better policy could make of them)
and the ``oracle`` (the answer itself, up to 32 tokens a pass: the limit on that curve).
Draftless's strategies draft what a json-schema answer's schema forces, as the engine does;
the peers' code does not. A strategy with no policy drafts the same on every curve: it is
replayed once and its passes costed on each.

``--conversations FILE`` replays real answers instead (``conversations.py``: the file's
format and the public sources): each assistant message, in order, on the prompt the embedded
model's chat template makes from the messages before it.

``--json`` prints the figures instead of Markdown (``--out`` still writes the Markdown):
``{"chats" or "conversations", "answer_tokens", "curves": {CURVE: {STRATEGY: {"peer", "all",
"categories": {CATEGORY: x}}}}}``, geometric means over all chats and over each category's (a
task's, in the device table, which adds "copy-heavy"). ``python -m engine bench --render``
plots the ``devices.json`` saved so beside ``results.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import time
from collections import Counter

from dataclasses import replace

from ..policy.calibrated_policy import POLICY_KINDS
from ..drafters import make_drafter, measurement_options
from ..errors import EngineError
from ..settings import DraftSettings
from ..policy.verify_cost import NamedCurve, curve_from_spec, named_curves
from .conversations import read_conversations, replay_chats
from .oracle import HindsightDrafter, OracleDrafter
from .peer_drafters import PEER_DRAFTERS
from .tune import geomean, model_identity, per_task, recost, reference_answers, replays

COPY_HEAVY = ("code-edit", "edit-session", "edit-memory", "rag", "structured")
OPEN = ("open-question", "novel")
GOAL_PEER_RATIO, GOAL_FLOOR = 1.2, 0.97
REPLAYS = 3  # each chat's drafter time: the least of this many replays


def _plan(drafter: str, count: int, adaptive: bool = False, **more) -> dict:
    return {"drafter_name": drafter, "draft_count": count, "adaptive": adaptive, **more}


def strategies(eos: int, named: NamedCurve) -> dict[str, dict]:
    """name -> ``tune.predict`` plan on the curve ``named``; ``peer``: counted as a peer for
    the goals; ``on_curve``: its drafts depend on the curve though it has no policy."""
    default = DraftSettings().validated()
    plans = {
        "default": _plan(
            default.drafter, default.draft_count, default.adaptive, policy=default.policy
        )
    }
    other = next(kind for kind in POLICY_KINDS if kind != default.policy)
    plans[f"{other} policy"] = _plan(default.drafter, default.draft_count, True, policy=other)
    for name, cls in PEER_DRAFTERS.items():
        charge = getattr(cls, "charge_host_time", True)
        make = lambda chat, run, cls=cls: cls.for_run(run)  # noqa: E731
        plans[name] = _plan(
            name, cls.draft_count, make=make, peer=True, charge=charge, grammar=False
        )
    for mode in ("ngram-simple", "ngram-map-k"):  # llama.cpp's --draft-max default: 16
        plans[f"llama.cpp {mode}"] = _plan(mode, 16, peer=True, grammar=False)
    plans["suffix, no table"] = _plan("suffix", default.draft_count, default.adaptive)
    # the default with the corpus index as its static row's source (``suffix-static``'s
    # ``index`` option; judged against ``default`` on dev: python -m engine.bench.devices
    # --conversations F --strategy default --strategy "default, corpus index")
    indexed = {**measurement_options(default.drafter), "index": True}
    plans["default, corpus index"] = _plan(
        default.drafter, default.draft_count, True, policy=default.policy, options=indexed
    )
    plans["suffix fixed 16, no policy"] = _plan("suffix", 16)
    plans["prompt-lookup cap 32"] = _plan("prompt-lookup", 32, adaptive=True)

    def answers(chat) -> list[list[int]]:
        return [t["answer"] + [eos] * t.get("stop", True) for t in chat["turns"]]

    def hindsight(chat, run):
        options = measurement_options(default.drafter)
        inner = make_drafter(replace(default, adaptive=False, options=options))
        return HindsightDrafter(inner, answers(chat), named.curve())

    plans["hindsight"] = _plan(default.drafter, default.draft_count, make=hindsight, on_curve=True)
    oracle = lambda chat, run: OracleDrafter(answers(chat))  # noqa: E731
    plans["oracle"] = _plan("oracle", 32, make=oracle, grammar=False)
    return plans


def device_figures(chats: dict, key: str, eos: int, curves) -> dict:
    """The device table as data (``--json``), in ``--conversations``' shape: per curve and
    strategy, ``peer``, the predicted speed-up per task (``categories``, a geometric mean over
    its chats) and the geometric means over the copy-heavy tasks and over all tasks."""
    figures: dict = {}
    for named, plans in zip(curves, strategy_figures(chats, key, eos, curves)):
        for label, (plan, values) in plans.items():
            figures.setdefault(named.name, {})[label] = {
                "peer": bool(plan.get("peer")),
                "all": geomean(values.values()),
                "copy-heavy": geomean(values[t] for t in COPY_HEAVY if t in values),
                "categories": dict(sorted(values.items())),
            }
    tokens = sum(len(turn["answer"]) for chat in chats.values() for turn in chat["turns"])
    return {"chats": len(chats), "answer_tokens": tokens, "curves": figures}


def device_table(figures: dict, curves) -> list[str]:
    """Markdown: per curve, every strategy's speed-up per task, then the goals."""
    lines = []
    for named in curves:
        strategies = figures["curves"][named.name]
        tasks = sorted({task for row in strategies.values() for task in row["categories"]})
        tree = f" A tree pass costs {named.tree_extra_s * 1e3:.2f} ms more than c(its nodes)."
        lines += [f"\n### {named.name}\n", named.source + tree, ""]
        lines += ["| strategy | " + " | ".join(tasks) + " | copy-heavy | all |"]
        lines += ["|---" * (len(tasks) + 3) + "|"]
        rows = {
            label: {**row["categories"], "copy-heavy": row["copy-heavy"], "all": row["all"]}
            for label, row in strategies.items()
        }
        for label, values in rows.items():
            cells = [f"{values[t]:.2f}" for t in tasks + ["copy-heavy", "all"]]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        peers = {label: {"peer": row["peer"]} for label, row in strategies.items()}
        lines += ["", *goal_lines(rows, tasks, peers)]
    return lines


def strategy_figures(chats: dict, key: str, eos: int, curves, only=()) -> list[dict]:
    """Per curve, {strategy: (plan, predicted speed-up per task)}, of the strategies named in
    ``only`` (none: all). A strategy whose drafts no curve changes (no policy) is replayed
    once, its passes costed on each curve."""
    figures, once = [], {}
    for named in curves:
        figures.append({})
        for label, plan in strategies(eos, named).items():
            if only and label not in only:
                continue
            charged = plan.get("charge", True)
            if plan["adaptive"] or plan.get("on_curve"):
                kept = _replays(chats, key, eos, named, plan, charged)
            else:
                if label not in once:
                    once[label] = _replays(chats, key, eos, named, plan, charged)
                kept = {name: recost(r, named.curve()) for name, r in once[label].items()}
            figures[-1][label] = (plan, per_task(chats, kept, charged))
            overall = geomean(figures[-1][label][1].values())
            print(f"{named.name}: {label} {overall:.2f}", file=sys.stderr, flush=True)
    return figures


def _replays(chats, key, eos, named: NamedCurve, plan: dict, charged: bool) -> dict:
    gc.collect()  # each strategy's drafter timed without the earlier ones' garbage
    gc.freeze()
    options = (False, False, charged, named.tree_extra_s, REPLAYS)
    return replays(
        chats, key, eos, named.seconds, plan, *options, named.pipelined_share, named.context_scale
    )


def conversation_figures(chats: dict, key: str, eos: int, curves, only=()) -> dict:
    """``--conversations``' JSON: per curve and strategy (those in ``only``; none: all), the
    geometric mean of the predicted speed-ups over all conversations and over each
    category's."""
    counts = Counter(chat["task"] for chat in chats.values())
    figures: dict = {}
    for named, plans in zip(curves, strategy_figures(chats, key, eos, curves, only)):
        for label, (plan, values) in plans.items():
            logs = sum(counts[category] * math.log(x) for category, x in values.items())
            overall = round(math.exp(logs / len(chats)), 4)
            categories = {category: round(x, 4) for category, x in sorted(values.items())}
            entry = {"peer": bool(plan.get("peer")), "all": overall, "categories": categories}
            figures.setdefault(named.name, {})[label] = entry
    tokens = sum(len(turn["answer"]) for chat in chats.values() for turn in chat["turns"])
    return {"conversations": len(chats), "answer_tokens": tokens, "curves": figures}


def conversation_lines(figures: dict, counts: Counter) -> list[str]:
    """Markdown: per curve, the default, the best peer, the hindsight bound and the oracle."""
    lines = ["", "| curve | default | best peer | hindsight | oracle | default / best peer |"]
    lines += ["|---|---|---|---|---|---|"]
    for curve, rows in figures["curves"].items():
        peer = max((p for p in rows if rows[p]["peer"]), key=lambda p: rows[p]["all"])
        cells = [rows["default"]["all"], rows[peer]["all"], rows["hindsight"]["all"]]
        cells = [f"{x:.2f}" for x in cells + [rows["oracle"]["all"]]]
        cells[1] += f" ({peer})"
        ratio = rows["default"]["all"] / rows[peer]["all"]
        lines.append(f"| {curve} | " + " | ".join(cells) + f" | {ratio:.2f} |")
    for curve, rows in figures["curves"].items():
        lines += [f"\n### {curve}\n", "| category (conversations) | default | best peer "]
        lines[-1] += "| hindsight | oracle |"
        lines.append("|---|---|---|---|---|")
        for category in sorted(counts):
            peer = max((p for p in rows if rows[p]["peer"]), key=lambda p: _at(rows[p], category))
            cells = [f"{_at(rows[s], category):.2f}" for s in ("default", peer, "hindsight")]
            cells[1] += f" ({peer})"
            cells.append(f"{_at(rows['oracle'], category):.2f}")
            lines.append(f"| {category} ({counts[category]}) | " + " | ".join(cells) + " |")
    return lines


def _at(row: dict, category: str) -> float:
    return row["categories"][category]


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
        "--conversations",
        metavar="FILE",
        help="replay these conversations' answers instead (engine/bench/conversations.py)",
    )
    parser.add_argument(
        "--cost-curve",
        action="append",
        metavar="NAME|FILE",
        help="a curve to predict on (repeatable; default: every shipped curve)",
    )
    parser.add_argument(
        "--max-tokens", type=int, help="answer cap (default: 512; conversations: whole answers)"
    )
    parser.add_argument("--cached-only", action="store_true", help="decode nothing new")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--out", help="also write the Markdown table to this file")
    only = "replay only this strategy (repeatable): each one's mean per curve"
    parser.add_argument("--strategy", action="append", metavar="NAME", help=only)
    args = parser.parse_args(argv)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    loads = ", ".join(f"{x:.2f}" for x in load) if load else "n/a"
    print(f"load average at start: {loads}", file=sys.stderr)
    command = " ".join(argv if argv is not None else sys.argv[1:])
    started = time.perf_counter()
    try:
        specs = args.cost_curve
        curves = [curve_from_spec(s) for s in specs] if specs else list(named_curves().values())
        if args.strategy and not args.conversations:
            raise EngineError("--strategy is for --conversations only")
        unknown = sorted(set(args.strategy or ()) - set(strategies(0, curves[0])))
        if unknown:
            known = ", ".join(strategies(0, curves[0]))
            raise EngineError(f"no strategy named {', '.join(unknown)}; known: {known}")
        run = f"{command}`; load average at start {loads}"
        main_of = conversations_main if args.conversations else device_main
        figures, lines = main_of(args, curves, run)
    except EngineError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    lines.append(f"\n(replayed in {time.perf_counter() - started:.0f} s)")
    text = "\n".join(lines) + "\n"
    print(json.dumps(figures) if args.json else text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text)
    return 0


def device_main(args, curves, run: str) -> tuple[dict, list[str]]:
    """The device table: its figures and its Markdown lines."""
    max_tokens = args.max_tokens or 512
    chats, key, eos = reference_answers(args.split, max_tokens, cached_only=args.cached_only)
    figures = device_figures(chats, key, eos, curves)
    header = [
        f"# Device table ({args.split} set: {figures['chats']} chats, "
        f"{figures['answer_tokens']} answer tokens)",
        "",
        f"`python -m engine.bench.devices {run} (only the drafters' own "
        "time per pass depends on it). Predicted speed-up over plain decoding on each curve, "
        "geometric mean over a task's chats; copy-heavy = " + ", ".join(COPY_HEAVY) + ".",
    ]
    return figures, header + device_table(figures, curves)


def conversations_main(args, curves, run: str) -> tuple[dict, list[str]]:
    """``--conversations``: the figures and the Markdown lines."""
    from ..models import load_model

    conversations = read_conversations(args.conversations)
    loaded = load_model(None)
    chats = replay_chats(conversations, loaded, args.max_tokens)
    only = sorted(set(args.strategy or ()))
    figures = conversation_figures(chats, *model_identity(loaded), curves, only)
    counts = Counter(chat["task"] for chat in chats.values())
    if only:  # some strategies only: their means, per curve
        lines = ["", "| curve | " + " | ".join(only) + " |", "|---" * (len(only) + 1) + "|"]
        for curve, rows in figures["curves"].items():
            lines.append(f"| {curve} | " + " | ".join(f"{rows[s]['all']:.3f}" for s in only) + " |")
        return figures, [
            f"# Real answers ({args.conversations})",
            "",
            f"`python -m engine.bench.devices {run}",
            *lines,
        ]
    return figures, [
        f"# Real answers ({args.conversations}: {figures['conversations']} conversations, "
        f"{figures['answer_tokens']} answer tokens)",
        "",
        f"`python -m engine.bench.devices {run}. Predicted speed-up over plain decoding, "
        "geometric mean over the conversations; best peer: the peer strategy highest there.",
        *conversation_lines(figures, counts),
    ]


if __name__ == "__main__":
    sys.exit(main())
