"""The device table: predicted speed-ups of Draftless's default, the peers' strategies and
the oracle on every named verify-cost curve, replayed over the same greedy answers.

``python -m engine.bench.devices [--split check] [--cost-curve NAME|FILE ...]``. The answers
are the benchmark's plainly decoded ones (``engine.bench.tune`` decodes and caches them
once); nothing here times the model, so the figures do not depend on this machine's load
except for the drafters' own time per pass, which is measured here and charged in every
prediction (as a host CPU would pay it beside the accelerator): predicted speed-up = plain
passes x c(1) / (sum of c(tokens verified) over the passes + drafter time).

Strategies: ``default`` (the engine's defaults: drafter, draft-count cap, adaptive),
``hf-prompt-lookup`` and ``vllm-ngram`` (the peers' rules, ``peer_drafters``), llama.cpp's
``ngram-simple`` and ``ngram-map-k`` modes (Draftless's own files follow llama.cpp's rules)
(the peers); ``suffix`` drafting a fixed 16 with no policy, ``prompt-lookup`` with the curve
deciding up to 32 tokens, and the ``oracle`` (the answer itself, up to 32 tokens a pass: the
limit of n-gram speculation on that curve).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..adaptive import AdaptiveMemory
from ..drafters.base import Drafter, Proposal
from .scratch import FolderStores
from ..settings import DraftSettings
from ..verify_cost import curve_from_spec, named_curves
from .peer_drafters import PEER_DRAFTERS
from .tune import geomean, reference_answers, simulate

COPY_HEAVY = ("code-edit", "edit-session", "edit-memory", "rag", "structured")
OPEN = ("open-question", "novel")
ORACLE_CAP = 32


class AnswerOracle(Drafter):
    """Drafts the known answer of each turn (benchmark only)."""

    name = "oracle"
    summary = "the answer itself"

    def __init__(self, answers: list[list[int]]):
        super().__init__(None)
        self.answers, self.turn, self.position = answers, -1, 0

    def reset(self, prompt_tokens) -> None:
        self.turn, self.position = self.turn + 1, 0

    def extend(self, tokens) -> None:
        self.reset(tokens)

    def propose(self, k: int) -> Proposal:
        row = self.answers[self.turn][self.position : self.position + k]
        return Proposal([row] if row else [])

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None) -> None:
        self.position += len(emitted)


def strategies() -> dict[str, dict]:
    """name -> simulate() arguments (besides the chat, curve and memory)."""
    default = DraftSettings().validated()
    plans = {
        "default": {
            "drafter_name": default.drafter,
            "draft_count": default.draft_count,
            "adaptive": default.adaptive,
        }
    }
    for name, cls in PEER_DRAFTERS.items():
        plans[name] = {
            "drafter_name": name,
            "draft_count": cls.draft_count,
            "adaptive": False,
            "make": cls,
            "peer": True,
        }
    for mode in ("ngram-simple", "ngram-map-k"):  # llama.cpp's --draft-max default: 16
        plans[f"llama.cpp {mode}"] = {
            "drafter_name": mode,
            "draft_count": 16,
            "adaptive": False,
            "peer": True,
        }
    plans["suffix fixed 16, no policy"] = {
        "drafter_name": "suffix",
        "draft_count": 16,
        "adaptive": False,
    }
    plans["prompt-lookup cap 32"] = {
        "drafter_name": "prompt-lookup",
        "draft_count": 32,
        "adaptive": True,
    }
    plans["oracle"] = {
        "drafter_name": "oracle",
        "draft_count": ORACLE_CAP,
        "adaptive": False,
        "oracle": True,
    }
    return plans


def predict(
    chats: dict, key: str, eos: int, seconds: dict[int, float], plan: dict
) -> dict[str, float]:
    """Predicted speed-up per task (geomean over its chats), one process: acceptance memory
    carried from chat to chat as in a running app."""
    memory = AdaptiveMemory()
    per_task: dict[str, list[float]] = {}
    for chat in chats.values():
        drafter = None
        if plan.get("oracle"):
            drafter = AnswerOracle(
                [list(t["answer"]) + ([eos] if t.get("stop", True) else []) for t in chat["turns"]]
            )
        elif "make" in plan:
            drafter = plan["make"]()
        if drafter is not None:
            drafter.attach_model(key, stores=FolderStores())
        result = simulate(
            chat["turns"],
            plan["drafter_name"],
            plan["draft_count"],
            plan["adaptive"],
            memory,
            key,
            seconds,
            eos,
            drafter=drafter,
        )
        spent = result["spec_s"] + result["drafter_s"]
        per_task.setdefault(chat["task"], []).append(result["plain_s"] / spent)
    return {task: geomean(values) for task, values in per_task.items()}


def family_means(values: dict[str, float]) -> dict[str, float]:
    copy = [values[t] for t in COPY_HEAVY if t in values]
    return {"copy-heavy": geomean(copy), "all": geomean(values.values())}


def device_table(chats: dict, key: str, eos: int, curves) -> list[str]:
    tasks = sorted({c["task"] for c in chats.values()})
    lines = []
    for named in curves:
        seconds = named.seconds
        lines += [
            "",
            f"### {named.name}",
            "",
            named.source,
            "",
            "| strategy | " + " | ".join(tasks) + " | copy-heavy | all |",
            "|---" * (len(tasks) + 3) + "|",
        ]
        rows = {}
        for label, plan in strategies().items():
            values = predict(chats, key, eos, seconds, plan)
            rows[label] = {**values, **family_means(values)}
            cells = [f"{values[t]:.2f}" for t in tasks] + [
                f"{rows[label]['copy-heavy']:.2f}",
                f"{rows[label]['all']:.2f}",
            ]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
            print(lines[-1], file=sys.stderr, flush=True)
        lines += ["", *goal_lines(rows, tasks)]
    return lines


def goal_lines(rows: dict[str, dict], tasks: list[str]) -> list[str]:
    """The speed issue's goals on one curve: default against the best peer strategy."""
    plans = strategies()
    peers = [label for label in rows if plans[label].get("peer")]
    default = rows["default"]
    best_copy = max(peers, key=lambda p: rows[p]["copy-heavy"])
    ratio = default["copy-heavy"] / rows[best_copy]["copy-heavy"]
    behind = [t for t in tasks if default[t] < max(rows[p][t] for p in peers) - 1e-9]
    open_low = [t for t in OPEN if t in default and default[t] < 0.97]
    return [
        f"- default / best peer ({best_copy}) on copy-heavy families: {ratio:.2f} "
        f"({'met' if ratio >= 1.2 else 'not met'}: goal 1.2)",
        f"- families where a peer beats the default: {', '.join(behind) or 'none'}",
        f"- open questions and novel text at or above 0.97x: "
        f"{'yes' if not open_low else 'no: ' + ', '.join(open_low)}",
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
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="replay only the answers already decoded; decode nothing",
    )
    parser.add_argument("--out", help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    curves = (
        [curve_from_spec(spec) for spec in args.cost_curve]
        if args.cost_curve
        else list(named_curves().values())
    )
    chats, key, eos = reference_answers(args.split, args.max_tokens, cached_only=args.cached_only)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    started = time.perf_counter()
    header = [
        f"# Device table ({args.split} set: {len(chats)} chats, "
        f"{sum(len(t['answer']) for c in chats.values() for t in c['turns'])} answer tokens)",
        "",
        f"`python -m engine.bench.devices {' '.join(argv if argv is not None else sys.argv[1:])}`; "
        f"load average at start {', '.join(f'{x:.2f}' for x in load) if load else 'n/a'} "
        "(only the drafters' own time per pass depends on it). Predicted speed-up over plain "
        "decoding on each curve, geometric mean over a task's chats; copy-heavy = "
        + ", ".join(COPY_HEAVY)
        + ".",
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
