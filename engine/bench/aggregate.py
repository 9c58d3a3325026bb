"""Figures of a suite run: medians over interleaved rounds, noise, peers, the issue's goals.

Computed from the suite's runs (``suite.EngineRun``: tokens, wall times, every pass) and the
peers' rows; statistics are ``engine.stats.DecodeStats`` fed pass by pass (one
definition). The result goes into ``results.json`` as ``summary``; the report renders from
that file alone.

Speed-up of a config on a set of answers, per round r: Σ plain decode time in round r /
Σ its decode time in round r (interleaved rounds: the two ran moments apart). A figure is
the median over rounds with the min–max. The **noise** of the same set is the spread of the
plain runs themselves: max / min of the rounds' plain sums (none against none). A
speed-up counts as a gain only when even its slowest round beats the noise
(``lo > noise``), a loss only when even its fastest round is below ``1 / noise``;
otherwise the report prints "no change".
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from ..verify_cost import CostCurve
from ..stats import DecodeStats
from .workloads import NOTHING_TO_COPY, TASK_ORDER

FAMILIES = {
    "code editing": ("code-edit",),
    "structured output": ("structured",),
    "quoting": ("rag",),
    "editing sessions": ("edit-session", "edit-memory"),
}
GOAL_PEER_RATIO = 1.2
GOAL_FLOOR = 0.97
GOAL_GEOMEAN = 1.6


def cost_ratio(curve: dict, n: float, key: str = "ratio") -> float:
    """c(n)/c(1) of a measured curve (``results.json``'s ``verify_cost``), interpolated as
    the engine does (``engine.verify_cost.CostCurve``)."""
    return CostCurve({int(k): v for k, v in curve[key].items()}).base(n)


def stats_from_passes(runs) -> DecodeStats:
    """One DecodeStats over many runs, fed pass by pass (the engine's one definition)."""
    stats = DecodeStats(drafter=runs[0].config if runs else "none")
    for run in runs:
        for drafted, accepted, emitted, seconds in run.passes:
            stats.record_pass(drafted, accepted, emitted, seconds)
    return stats


def ideal_speedup(runs, baseline_passes: int, curve: dict) -> float | None:
    """Speed-up the c(n) curve predicts from the runs' pass shapes, drafting for free."""
    ratio = CostCurve({int(k): v for k, v in curve["ratio_min"].items()}).base
    cost = sum(ratio(drafted + 1) for run in runs for drafted, *_ in run.passes)
    return baseline_passes / cost if cost else None


def geomean(values) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


# ---------------------------------------------------------------- the noise rule


def noise_band(plain_sums: list[float]) -> float:
    """How far apart plain decoding's own rounds are: max / min (1.0 = no spread)."""
    plain_sums = [s for s in plain_sums if s > 0]
    return max(plain_sums) / min(plain_sums) if len(plain_sums) > 1 else 1.0


def verdict(lo: float | None, hi: float | None, noise: float) -> str:
    """ "gain" / "loss" only when every round is beyond the none-vs-none noise."""
    if lo is None or hi is None:
        return "no change"
    if lo > noise:
        return "gain"
    if hi < 1.0 / noise:
        return "loss"
    return "no change"


def paired_speedups(plain: dict[int, float], timed: dict[int, float]) -> dict:
    """Per-round plain / timed (rounds in both), their median, min, max, and the noise."""
    rounds = sorted(set(plain) & set(timed))
    ratios = [plain[r] / timed[r] for r in rounds if timed[r] > 0]
    if not ratios:
        return {
            "speedup": None,
            "lo": None,
            "hi": None,
            "rounds": 0,
            "noise": noise_band(list(plain.values())),
            "verdict": "no change",
        }
    noise = noise_band([plain[r] for r in rounds])
    lo, hi = min(ratios), max(ratios)
    return {
        "speedup": round(statistics.median(ratios), 4),
        "lo": round(lo, 4),
        "hi": round(hi, 4),
        "rounds": len(ratios),
        "noise": round(noise, 4),
        # one round has no noise estimate: nothing is claimed
        "verdict": verdict(lo, hi, noise) if len(ratios) > 1 else "one round",
    }


def _round_sums(runs) -> dict[int, float]:
    sums: dict[int, float] = defaultdict(float)
    for run in runs:
        sums[run.repeat] += run.decode_wall_s
    return dict(sums)


# ---------------------------------------------------------------- our configs


def summarise(runs, plain_runs, curve: dict | None) -> dict:
    """Figures of one config over a set of answers (all rounds), against plain runs of the
    same answers."""
    if not runs:
        return {}
    answers = {r.workload for r in runs}
    plain = [r for r in plain_runs if r.workload in answers]
    out = paired_speedups(_round_sums(plain), _round_sums(runs))
    rounds = max(out["rounds"], 1)
    tokens = sum(len(r.tokens) for r in runs)
    wall = sum(r.decode_wall_s for r in runs)
    out.update(
        {
            "answers": len(answers),
            "tokens": tokens // rounds if out["rounds"] else tokens,
            "tok_s": round(tokens / wall, 2) if wall else None,
            "identical": all(r.identical for r in runs),
            "loadavg_max": max((r.loadavg or 0.0) for r in runs),
        }
    )
    if any(r.passes for r in runs):
        stats = stats_from_passes(runs)
        d = stats.to_dict()
        out.update(
            {
                k: d[k]
                for k in (
                    "passes",
                    "drafted",
                    "accepted",
                    "emitted",
                    "tokens_per_pass",
                    "acceptance_rate",
                    "per_position_acceptance",
                )
            }
        )
        if curve:
            first_plain = {
                r.workload: r for r in plain if r.stats and r.repeat == min(x.repeat for x in plain)
            }
            base = sum(
                first_plain[r.workload].stats["passes"] for r in runs if r.workload in first_plain
            )
            ideal = ideal_speedup(runs, base, curve)
            out["predicted_speedup"] = round(ideal, 3) if ideal else None
    return out


def per_answer(runs, plain_runs) -> dict[str, float | None]:
    """Median speed-up of each answer (cell) over its rounds."""
    out = {}
    for answer in sorted({r.workload for r in runs}):
        mine = [r for r in runs if r.workload == answer]
        theirs = [r for r in plain_runs if r.workload == answer]
        out[answer] = paired_speedups(_round_sums(theirs), _round_sums(mine))["speedup"]
    return out


# ---------------------------------------------------------------- peers


def peer_rows(results_hf: dict, results_llama: dict) -> dict[str, list[dict]]:
    """Every peer's per-answer rounds as {"peer": [{"workload", "task", "plain": {r: s},
    "timed": {r: s}, "tokens", "passes", "identical"}]}."""
    peers: dict[str, list[dict]] = {}
    if results_hf.get("status") == "ran":
        rows = []
        for row in results_hf["rows"]:
            rows.append(
                {
                    "workload": row["workload"],
                    "task": row["task"],
                    "plain": dict(enumerate(row["plain_decode_s"])),
                    "timed": dict(enumerate(row["decode_s"])),
                    "tokens": max(row["new_tokens"] - 1, 0),
                    "passes": max(row["calls"] - 1, 1),
                    "identical": row["identical_to_own_plain"],
                }
            )
        peers["HF prompt lookup"] = rows
    if results_llama.get("status") == "ran":
        plain: dict[str, dict[int, float]] = defaultdict(dict)
        for row in results_llama["rows"]:
            if row["mode"] == "none":
                plain[row["id"]][row["repeat"]] = row["decode_s"]
        grouped: dict[tuple[str, str], dict] = {}
        for row in results_llama["rows"]:
            if row["mode"] == "none":
                continue
            item = grouped.setdefault(
                (row["mode"], row["id"]),
                {
                    "workload": row["id"],
                    "task": row["task"],
                    "plain": plain[row["id"]],
                    "timed": {},
                    "tokens": 0,
                    "passes": 0,
                    "identical": True,
                },
            )
            item["timed"][row["repeat"]] = row["decode_s"]
            item["tokens"] += row["predicted_n"]
            item["passes"] += row["passes"]
            item["identical"] &= row["identical_to_own_plain"]
        for (mode, _), item in grouped.items():
            peers.setdefault(f"llama.cpp {mode}", []).append(item)
    return peers


def summarise_peer(rows: list[dict]) -> dict:
    if not rows:
        return {}
    plain: dict[int, float] = defaultdict(float)
    timed: dict[int, float] = defaultdict(float)
    for row in rows:
        for r, s in row["plain"].items():
            if r in row["timed"]:
                plain[r] += s
                timed[r] += row["timed"][r]
    out = paired_speedups(dict(plain), dict(timed))
    passes = sum(row["passes"] for row in rows)
    out.update(
        {
            "answers": len(rows),
            "tokens_per_pass": round(sum(row["tokens"] for row in rows) / passes, 4)
            if passes
            else None,
            "identical": all(row["identical"] for row in rows),
        }
    )
    return out


def peer_answer_speedups(rows: list[dict]) -> dict[str, float | None]:
    return {row["workload"]: paired_speedups(row["plain"], row["timed"])["speedup"] for row in rows}


# ---------------------------------------------------------------- paired per-answer ratios

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def ratio_interval(
    ratios: list[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict | None:
    """Geometric mean of paired time ratios with a percentile bootstrap 95% interval
    (the (answer, round) pairs resampled with replacement, a fixed seed); None without any."""
    import numpy as np

    logs = np.log(np.asarray([r for r in ratios if r > 0], dtype=float))
    if logs.size == 0:
        return None
    rng = np.random.default_rng(seed)
    means = logs[rng.integers(0, logs.size, size=(resamples, logs.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {
        "ratio": math.exp(logs.mean()),
        "lo": math.exp(lo),
        "hi": math.exp(hi),
        "pairs": int(logs.size),
    }


def paired_ratios(results: dict) -> dict[str, dict[str, list[float]]]:
    """Each answer's time over the same answer's plain time in the same round, per config
    (and peer, against its own plain decoding) and task, from ``results.json``'s runs."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    plain = {
        (r["workload"], r["repeat"]): r["decode_wall_s"]
        for r in results["runs"]
        if r["config"] == "none"
    }
    for run in results["runs"]:
        base = plain.get((run["workload"], run["repeat"]))
        if run["config"] != "none" and base and run["decode_wall_s"] > 0:
            out[run["config"]][run["task"]].append(run["decode_wall_s"] / base)
    for name, rows in peer_rows(
        results.get("hf_prompt_lookup") or {}, results.get("llama_cpp") or {}
    ).items():
        for row in rows:
            for r, timed in row["timed"].items():
                base = row["plain"].get(r)
                if base and timed > 0:
                    out[name][row["task"]].append(timed / base)
    for by_task in out.values():
        by_task["all"] = [x for task, values in list(by_task.items()) for x in values]
    return out


# ---------------------------------------------------------------- the goals


def goals(
    per_answer_ours: dict[str, float | None],
    task_of: dict[str, str],
    per_task_ours: dict[str, dict],
    peer_answers: dict[str, dict[str, float | None]],
) -> list[dict]:
    """The three goals for the default drafter (Draftless with no flags), met or not."""
    out = []
    for family, tasks in FAMILIES.items():
        answers = [a for a, t in task_of.items() if t in tasks]
        if not answers:
            continue
        ours = geomean(per_answer_ours.get(a) for a in answers)
        best_name, best = None, None
        for name, values in peer_answers.items():
            value = geomean(values.get(a) for a in answers if a in values)
            if value is not None and (best is None or value > best):
                best_name, best = name, value
        met = None if ours is None or best is None else ours >= GOAL_PEER_RATIO * best
        out.append(
            {
                "goal": f"{family}: speed-up >= {GOAL_PEER_RATIO}x the best peer's "
                "(geometric mean over the family's answers)",
                "ours": ours and round(ours, 3),
                "best_peer": best_name,
                "peer": best and round(best, 3),
                "ratio": round(ours / best, 3) if ours and best else None,
                "met": met,
            }
        )
    for task in NOTHING_TO_COPY:
        figures = per_task_ours.get(task)
        if not figures or figures.get("speedup") is None:
            continue
        met = figures["speedup"] >= GOAL_FLOOR or figures["verdict"] == "no change"
        if figures["verdict"] == "one round":
            met = None  # not judged from one round
        out.append(
            {
                "goal": f"{task}: never below {GOAL_FLOOR}x of plain decoding "
                "(median; a range inside the noise counts as no change)",
                "ours": figures["speedup"],
                "lo": figures["lo"],
                "verdict": figures["verdict"],
                "met": met,
            }
        )
    task_values = [
        per_task_ours[t]["speedup"]
        for t in per_task_ours
        if t != "all" and per_task_ours[t].get("speedup")
    ]
    overall = geomean(task_values)
    if overall is not None:
        out.append(
            {
                "goal": f"all tasks: geometric-mean speed-up >= {GOAL_GEOMEAN}x",
                "ours": round(overall, 3),
                "met": overall >= GOAL_GEOMEAN,
            }
        )
    return out


# ---------------------------------------------------------------- everything


def aggregate(suite) -> dict:
    runs = suite.runs
    tasks = [t for t in TASK_ORDER if any(r.task == t for r in runs)]
    configs = list(getattr(suite, "configs", None) or ["none"] + list(suite.drafters) + ["mlx-lm"])
    plain = [r for r in runs if r.config == "none"]
    curve = suite.verify
    task_of = {r.workload: r.task for r in runs}
    per, answers = {}, {}
    for config in configs:
        mine = [r for r in runs if r.config == config]
        per[config] = {"all": summarise(mine, plain, curve)}
        for task in tasks:
            per[config][task] = summarise([r for r in mine if r.task == task], plain, curve)
        answers[config] = per_answer(mine, plain)
    drafters = [c for c in suite.drafters if per.get(c, {}).get("all")]
    ranking = sorted(drafters, key=lambda c: -(per[c]["all"].get("speedup") or 0))
    found = getattr(suite, "peer_results", {})
    peers = peer_rows(found.get("hf_prompt_lookup") or {}, found.get("llama_cpp") or {})
    peer_per = {
        name: {
            "all": summarise_peer(rows),
            **{t: summarise_peer([r for r in rows if r["task"] == t]) for t in tasks},
        }
        for name, rows in peers.items()
    }
    peer_answers = {name: peer_answer_speedups(rows) for name, rows in peers.items()}
    default = getattr(suite, "default_drafter", None)
    goal_rows = []
    if default in per:
        goal_rows = goals(
            answers[default], task_of, {t: per[default][t] for t in tasks}, peer_answers
        )
    sweep = {}
    if suite.sweep_runs:
        nones: dict[str, list] = {}
        for r in suite.sweep_runs:
            if r.config == "none":
                nones.setdefault(r.workload, []).append(r)
        for run in suite.sweep_runs:
            if run.config == "none":
                continue
            name, k = run.config.split("@")
            sweep.setdefault(name, {}).setdefault(k, []).append(run)
        sweep_plain = [r for rs in nones.values() for r in rs]
        sweep = {
            name: {k: summarise(group, sweep_plain, curve) for k, group in by_k.items()}
            for name, by_k in sweep.items()
        }
    return {
        "format": 2,
        "tasks": tasks,
        "configs": configs,
        "per": per,
        "answers": answers,
        "ranking": ranking,
        "default_drafter": default,
        "peers": peer_per,
        "peer_answers": peer_answers,
        "goals": goal_rows,
        "sweep": sweep,
    }
