"""Figures of a suite run (``results.json``'s ``summary``): medians over interleaved rounds,
noise, paired ratios; pass statistics are ``engine.stats.DecodeStats`` fed pass by pass.

Speed-up of a config on a set of answers, per round r: Σ plain decode time in round r /
Σ its decode time in round r (interleaved rounds: the two ran moments apart). A figure is
the median over rounds with the min–max. The **noise** of the same set is the spread of the
plain runs themselves: max / min of the rounds' plain sums. A speed-up counts as a gain
only when even its slowest round beats the noise (``lo > noise``), a loss only when even its
fastest round is below ``1 / noise``; otherwise the report prints "no change".
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from ..stats import DecodeStats
from .workloads import TASK_ORDER

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
STATS_FIELDS = ("passes", "drafted", "accepted", "emitted", "tokens_per_pass")
STATS_FIELDS += ("acceptance_rate", "per_position_acceptance")


def paired_speedups(plain: dict[int, float], timed: dict[int, float]) -> dict:
    """Per-round plain / timed (rounds in both), their median, min, max, and the noise."""
    rounds = sorted(set(plain) & set(timed))
    ratios = [plain[r] / timed[r] for r in rounds if timed[r] > 0]
    sums = [s for s in ([plain[r] for r in rounds] if ratios else plain.values()) if s > 0]
    noise = max(sums) / min(sums) if len(sums) > 1 else 1.0
    if not ratios:
        out = {"speedup": None, "lo": None, "hi": None, "rounds": 0}
        return {**out, "noise": noise, "verdict": "no change"}
    lo, hi = min(ratios), max(ratios)
    if len(ratios) == 1:
        verdict = "one round"  # no noise estimate: nothing is claimed
    else:  # "gain" / "loss" only when every round is beyond the none-vs-none noise
        verdict = "gain" if lo > noise else "loss" if hi < 1.0 / noise else "no change"
    return {
        "speedup": round(statistics.median(ratios), 4),
        "lo": round(lo, 4),
        "hi": round(hi, 4),
        "rounds": len(ratios),
        "noise": round(noise, 4),
        "verdict": verdict,
    }


def _round_sums(runs) -> dict[int, float]:
    sums: dict[int, float] = defaultdict(float)
    for run in runs:
        sums[run.repeat] += run.decode_wall_s
    return dict(sums)


def summarise(runs, plain_runs) -> dict:
    """Figures of one config over a set of answers (all rounds) against plain runs of them."""
    if not runs:
        return {}
    answers = {r.workload for r in runs}
    plain = [r for r in plain_runs if r.workload in answers]
    out = paired_speedups(_round_sums(plain), _round_sums(runs))
    tokens, wall = sum(len(r.tokens) for r in runs), sum(r.decode_wall_s for r in runs)
    out.update(
        answers=len(answers),
        tokens=tokens // out["rounds"] if out["rounds"] else tokens,
        tok_s=round(tokens / wall, 2) if wall else None,
        identical=all(r.identical for r in runs),
        loadavg_max=max((r.loadavg or 0.0) for r in runs),
    )
    if any(r.passes for r in runs):
        stats = DecodeStats(drafter=runs[0].config)
        for drafted, accepted, emitted, seconds in (p for run in runs for p in run.passes):
            stats.record_pass(drafted, accepted, emitted, seconds)
        figures = stats.to_dict()
        out.update({k: figures[k] for k in STATS_FIELDS})
    return out


def ratio_interval(ratios: list[float]) -> dict | None:
    """Geometric mean of paired time ratios with a percentile bootstrap 95% interval
    (the (answer, round) pairs resampled with replacement, a fixed seed); None without any."""
    import numpy as np

    logs = np.log(np.asarray([r for r in ratios if r > 0], dtype=float))
    if logs.size == 0:
        return None
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, logs.size, size=(BOOTSTRAP_RESAMPLES, logs.size))
    lo, hi = np.percentile(logs[picks].mean(axis=1), [2.5, 97.5])
    ratio = math.exp(logs.mean())
    return {"ratio": ratio, "lo": math.exp(lo), "hi": math.exp(hi), "pairs": int(logs.size)}


def paired_ratios(results: dict) -> dict[str, dict[str, list[float]]]:
    """Each answer's time over its plain time in the same round, per config and task."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    runs = results["runs"]
    plain = {
        (r["workload"], r["repeat"]): r["decode_wall_s"] for r in runs if r["config"] == "none"
    }
    for run in runs:
        base = plain.get((run["workload"], run["repeat"]))
        if run["config"] != "none" and base and run["decode_wall_s"] > 0:
            out[run["config"]][run["task"]].append(run["decode_wall_s"] / base)
    for by_task in out.values():
        by_task["all"] = [x for values in list(by_task.values()) for x in values]
    return out


def aggregate(suite) -> dict:
    runs = suite.runs
    found = list(dict.fromkeys(r.task for r in runs))  # a conversations file's categories too
    tasks = [t for t in TASK_ORDER if t in found] + [t for t in found if t not in TASK_ORDER]
    plain = [r for r in runs if r.config == "none"]
    per = {}
    for config in suite.configs:
        mine = [r for r in runs if r.config == config]
        per[config] = {"all": summarise(mine, plain)}
        per[config].update({t: summarise([r for r in mine if r.task == t], plain) for t in tasks})
    drafters = [c for c in suite.drafters if per.get(c, {}).get("all")]
    ranking = sorted(drafters, key=lambda c: -(per[c]["all"].get("speedup") or 0))
    return {
        "format": 2,
        "tasks": tasks,
        "configs": suite.configs,
        "per": per,
        "ranking": ranking,
        "default_drafter": suite.default_drafter,
    }


def columns(summary: dict) -> list[tuple[str, dict]]:
    """(config, figures) of the configs that ran, in the report's order: the default drafter,
    the other drafters, the oracle, mlx-lm."""
    per = {c: f for c, f in summary["per"].items() if f.get("all")}  # configs that ran
    default = summary.get("default_drafter")
    order = [default] + [c for c in summary["ranking"] if c != default] + ["oracle", "mlx-lm"]
    return [(key, per[key]) for key in order if key in per]


def column_name(key: str, summary: dict, quote: str = "`") -> str:
    """A config's name in the report: Draftless (`suffix`), `prompt-lookup`, oracle (limit)."""
    if key == summary.get("default_drafter"):
        return f"Draftless ({quote}{key}{quote})"
    names = {"oracle": "oracle (limit)", "mlx-lm": "mlx-lm plain"}
    return names.get(key, f"{quote}{key}{quote}")
