"""Tuning the engine's defaults without a quiet machine: replay greedy answers.

A greedy answer is fixed, so whether a draft is accepted does not depend on timing: it is
accepted as far as it equals the answer. ``simulate`` runs the decode loop's logic
(``engine.decode.speculative_decode``: propose, the policy trims, verify, observe,
record) against a known answer with no model, and charges each pass the measured verify
cost c(drafted + 1). The predicted speed-up = plain passes x c(1) / Σ c(drafted + 1):
what the suite's ``predicted`` column shows, free of the machine's load. The adaptive
policy sees the same c(n) it would see on a quiet machine.

``python -m engine.bench.tune`` first decodes the tuning prompts plainly once (cached in
``<cache>/tuning/answers-<model>.json``), then prints the predicted speed-up of drafters x
draft-count caps x adaptive on/off, per task, both for one process answering the whole set
(acceptance memory carried) and for each answer alone (cold start: the app's first answer).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from .. import adaptive as adaptive_module
from ..adaptive import AdaptiveMemory, match_class
from ..verify_cost import CostCurve
from ..decode import _cut_at_eos
from ..drafters import make_drafter, measurement_options
from ..drafters.base import Proposal
from ..drafters.stores import DrafterStores
from ..replay import matched_length, tree_size
from .scratch import FolderStores, scratch_memory
from ..settings import DraftSettings

QUIET_CURVE = "resources/readme/benchmarks/results.json"  # a quiet machine's c(n), seconds
PRIOR_STRENGTH = 1.0  # pseudo-observations of a fitted prior, as the flat Beta(0.5, 0.5)


def simulate(
    chat: list[dict],
    drafter_name: str,
    draft_count: int,
    adaptive: bool,
    memory: AdaptiveMemory,
    model_key: str,
    seconds: dict[int, float],
    eos: int,
    options: dict | None = None,
    classes: dict | None = None,
    stores: DrafterStores | None = None,
    drafter=None,
) -> dict:
    """Replay one chat (``[{"prompt": tokens, "answer": tokens, "stop": bool}]``, turns in
    order, one drafter for the whole chat as ``ChatSession`` keeps it) and return
    ``{"plain_s", "spec_s", "passes", "emitted", "drafter_s"}``. ``drafter``: an instance
    to replay instead of the registered ``drafter_name`` (a peer's strategy)."""
    curve = CostCurve(seconds)
    if drafter is None:
        settings = DraftSettings(
            drafter=drafter_name,
            draft_count=draft_count,
            adaptive=adaptive,
            options=measurement_options(drafter_name) if options is None else options,
        ).validated()
        drafter = make_drafter(settings)
    drafter.attach_model(model_key, stores=stores if stores is not None else FolderStores())
    policy = memory.policy(model_key, drafter) if adaptive else None
    if policy is not None:
        memory.curves[model_key] = policy.curve = curve
    plain = spec = drafter_s = 0.0
    passes = emitted_total = 0
    history: list[int] = []
    for turn in chat:
        prompt, answer = list(turn["prompt"]), list(turn["answer"])
        if turn.get("stop", True):
            answer = answer + [eos]
        started = time.perf_counter()
        if history and prompt[: len(history)] == history:
            drafter.extend(prompt[len(history) :])
        else:
            drafter.reset(prompt)
        drafter_s += time.perf_counter() - started
        history = list(prompt)
        produced = 0
        plain += len(answer) * curve.base(1)
        while produced < len(answer):
            if passes and policy is not None and policy.gives_up(draft_count):
                spec += (len(answer) - produced) * curve.base(1)  # the loop decodes plainly
                passes += len(answer) - produced
                emitted_total += len(answer) - produced
                history.extend(answer[produced:])
                break
            started = time.perf_counter()
            limit = min(draft_count, len(answer) - produced - 1)
            proposal = drafter.propose(limit) if limit > 0 else Proposal()
            rows = proposal.rows
            rows = [r for r in (_cut_at_eos(list(r[:limit]), {eos}) for r in rows) if r]
            rows = rows if drafter.multi_row else rows[:1]
            if rows and policy is not None:
                length = policy.draft_length(max(len(r) for r in rows), proposal.match_length)
                rows = [r[:length] for r in rows[: policy.row_budget(length)]] if length else []
            drafter_s += time.perf_counter() - started
            matches = [matched_length(r, answer, produced) for r in rows]
            accepted = max(matches, default=0)
            row = matches.index(accepted) if rows else 0
            draft = rows[row] if rows else []
            sent = tree_size(rows) if len(rows) > 1 else len(draft)  # tokens verified
            emitted = answer[produced : produced + accepted + 1]
            cost = curve.base(sent + 1)
            spec += cost
            started = time.perf_counter()
            drafter.observe(emitted, accepted=accepted, drafted=len(draft), row=row)
            drafter_s += time.perf_counter() - started
            if policy is not None:
                policy.record(sent, accepted, cost, depth=max((len(r) for r in rows), default=0))
            if classes is not None and draft:  # per match class: [reached, accepted] per position
                counts = classes.setdefault(
                    match_class(proposal.match_length), [[0, 0] for _ in range(draft_count)]
                )
                for i in range(min(accepted + 1, len(draft))):
                    counts[i][0] += 1
                    counts[i][1] += i < accepted
            history.extend(emitted)
            produced += len(emitted)
            passes += 1
            emitted_total += len(emitted)
    drafter.flush()
    return {
        "plain_s": plain,
        "spec_s": spec,
        "passes": passes,
        "emitted": emitted_total,
        "drafter_s": drafter_s,
    }


def quiet_seconds(path: str | Path = QUIET_CURVE) -> dict[int, float]:
    data = json.loads(Path(path).read_text())
    return {int(n): s for n, s in data["verify_cost"]["median_s"].items()}


# ---------------------------------------------------------------- the tuning answers


def answers_path(model_key: str, split: str) -> Path:
    from ..paths import cache_dir

    return cache_dir() / "tuning" / f"answers-{model_key}-{split}.json"


def reference_answers(
    split: str, max_tokens: int, tasks=None, per_task: int = 2, cached_only: bool = False
) -> tuple[dict, str, int]:
    """Every chat of a split decoded plainly once (cached): ({chat: {"task", "turns"}}, model
    key, eos id)."""
    from ..model_ngrams import model_key as key_of
    from ..models import load_model
    from ..session import prompt_tokens
    from ..settings import GenerationRequest
    from .suite import BenchConfig, Suite
    from .workloads import TASK_ORDER, select_workloads

    loaded = load_model(None)
    key = key_of(loaded)
    eos = sorted(loaded.tokenizer.eos_token_ids)[0]
    path = answers_path(key, split)
    cached = json.loads(path.read_text()) if path.exists() else {}
    workloads, _ = select_workloads(list(tasks or TASK_ORDER), per_task, 2, split)
    suite = Suite(BenchConfig(out=Path("."), max_tokens=max_tokens))
    suite.loaded, suite.memory = loaded, scratch_memory()
    for workload in workloads:
        if workload.id in cached or cached_only:
            continue
        print(f"  decoding {workload.task}/{workload.id} plainly", file=sys.stderr, flush=True)
        runs = suite.reference_chat(workload)
        answers = [loaded.tokenizer.decode(r.tokens) for r in runs]
        turns = []
        for run, messages in zip(runs, suite.turn_messages(workload, answers)):
            turns.append(
                {
                    "prompt": prompt_tokens(loaded, GenerationRequest(messages=messages)),
                    "answer": run.tokens,
                    "stop": len(run.tokens) < max_tokens,
                }
            )
        cached[workload.id] = {"task": workload.task, "turns": turns, "after": workload.after}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cached))
    for w in workloads:  # answers cached before "after" was stored
        if w.id in cached:
            cached[w.id]["after"] = w.after
    return {w.id: cached[w.id] for w in workloads if w.id in cached}, key, eos


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def table(
    chats: dict,
    key: str,
    eos: int,
    seconds: dict,
    drafters,
    caps,
    adaptives,
    cold: bool,
    priors: dict[str, dict] | None = None,
):
    tasks = sorted({c["task"] for c in chats.values()})
    print(
        f"\n{'cold start: each chat alone' if cold else 'one process, memory carried'}; "
        "predicted speed-up per task (geomean over chats), then overall geomean over tasks"
    )
    print(f"{'config':28}" + "".join(f"{t[:12]:>13}" for t in tasks) + f"{'geomean':>10}")
    variants = [("", adaptive_module.CLASS_PRIORS)] + [
        (f" {label}", value) for label, value in (priors or {}).items()
    ]
    for name in drafters:
        for cap in caps:
            for adaptive in adaptives:
                for suffix, variant in variants if adaptive else variants[:1]:
                    values = predicted(chats, key, eos, seconds, name, cap, adaptive, cold, variant)
                    label = f"{name}@{cap}{'' if adaptive else ' fixed'}{suffix}"
                    print(
                        f"{label:28}"
                        + "".join(f"{values[t]:13.2f}" for t in tasks)
                        + f"{geomean(values.values()):10.2f}",
                        flush=True,
                    )


def predicted(
    chats: dict,
    key: str,
    eos: int,
    seconds: dict,
    name: str,
    cap: int,
    adaptive: bool,
    cold: bool,
    priors: dict,
) -> dict[str, float]:
    """Predicted speed-up per task (geomean over its chats) with ``priors`` as the policy's
    cold-start priors; ``cold``: a fresh acceptance memory for every chat."""
    saved = adaptive_module.CLASS_PRIORS
    adaptive_module.CLASS_PRIORS = priors
    try:
        memory = AdaptiveMemory()
        per_task: dict[str, list[float]] = {}
        for chat in chats.values():
            if cold:
                memory = AdaptiveMemory()
            result = simulate(
                chat["turns"],
                name,
                cap,
                adaptive,
                memory,
                key,
                seconds,
                eos,
                **cross_chat(chats, chat, name, cap, key, seconds, eos),
            )
            per_task.setdefault(chat["task"], []).append(result["plain_s"] / result["spec_s"])
    finally:
        adaptive_module.CLASS_PRIORS = saved
    return {t: geomean(v) for t, v in per_task.items()}


def cross_chat(
    chats: dict, chat: dict, name: str, cap: int, key: str, seconds: dict, eos: int
) -> dict:
    """For a chat that follows another (``edit-memory``) and a drafter with cross-chat
    memory: the app's options and a fresh store in a fresh folder that saw the earlier chat."""
    earlier = chats.get(chat.get("after") or "")
    if earlier is None or not measurement_options(name):
        return {}
    stores = FolderStores()
    simulate(
        earlier["turns"],
        name,
        cap,
        False,
        AdaptiveMemory(),
        key,
        seconds,
        eos,
        options={},
        stores=stores,
    )
    return {"options": {}, "stores": stores}


def class_acceptance(chats: dict, key: str, eos: int, seconds: dict, drafters, cap: int = 16):
    """Acceptance per match class and draft position with a fixed draft count: what the
    adaptive policy's cold-start priors are fitted to."""
    print(
        f"\nacceptance per match class, fixed draft count {cap}: passes, P(position i kept "
        "| earlier kept) for i = 0, 1, 2, 3, 7, 15"
    )
    fitted: dict[str, dict[int, tuple[float, float]]] = {}
    for name in drafters:
        classes: dict = {}
        for chat in chats.values():
            simulate(
                chat["turns"],
                name,
                cap,
                False,
                AdaptiveMemory(),
                key,
                seconds,
                eos,
                classes=classes,
            )
        for klass in sorted(classes):
            counts = classes[klass]
            rates = [f"{a / r:.2f}" if r else "  – " for r, a in counts]
            picks = [rates[i] for i in (0, 1, 2, 3, 7, 15) if i < len(rates)]
            print(f"  {name:14} class {klass}: {counts[0][0]:5} passes  " + " ".join(picks))
            p0 = counts[0][1] / counts[0][0]
            fitted.setdefault(name, {})[klass] = (
                round(PRIOR_STRENGTH * p0, 2),
                round(PRIOR_STRENGTH * (1 - p0), 2),
            )
    print(f"fitted priors (strength {PRIOR_STRENGTH}): {fitted}")
    return fitted


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.tune", description=__doc__)
    parser.add_argument(
        "--split",
        default="tuning",
        choices=("tuning", "check"),
        help="prompt set to replay (default: tuning)",
    )
    parser.add_argument(
        "--drafters", default="ngram-cache,prompt-lookup,suffix", help="comma-separated drafters"
    )
    parser.add_argument("--caps", default="4,8,16,32", help="draft-count caps to try")
    parser.add_argument("--max-tokens", type=int, default=512, help="answer cap (default 512)")
    parser.add_argument("--fixed", action="store_true", help="also try fixed draft counts")
    parser.add_argument(
        "--curve",
        default=QUIET_CURVE,
        help="a results.json whose verify_cost c(n) to use (default: the committed quiet run)",
    )
    parser.add_argument("--tasks", help="comma-separated tasks (default: all)")
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="replay only the answers already decoded; decode nothing",
    )
    args = parser.parse_args(argv)
    return _main(args, argv)


def _main(args, argv) -> int:
    chats, key, eos = reference_answers(
        args.split,
        args.max_tokens,
        args.tasks.split(",") if args.tasks else None,
        cached_only=args.cached_only,
    )
    seconds = quiet_seconds(args.curve)
    print(f"python -m engine.bench.tune {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(
        f"{args.split} set: {len(chats)} chats, "
        f"{sum(len(c['turns']) for c in chats.values())} answers, "
        f"{sum(len(t['answer']) for c in chats.values() for t in c['turns'])} tokens; c(n) "
        f"from {args.curve}: "
        + ", ".join(f"c({n})/c(1)={s / seconds[1]:.2f}" for n, s in sorted(seconds.items()))
    )
    drafters = args.drafters.split(",")
    caps = [int(c) for c in args.caps.split(",")]
    adaptives = [True, False] if args.fixed else [True]
    fitted = class_acceptance(chats, key, eos, seconds, drafters)
    # priors fitted here are only a candidate on the tuning set; on the check set the
    # engine's own (unlabelled rows) are compared with flat ones, nothing is fitted to it
    variants = {"fitted-priors": fitted} if args.split == "tuning" else {}
    for cold in (False, True):
        table(
            chats,
            key,
            eos,
            seconds,
            drafters,
            caps,
            adaptives,
            cold,
            {**variants, "flat-priors": {}},
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
