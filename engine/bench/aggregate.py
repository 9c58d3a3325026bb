"""Figures of a suite run: per drafter and task, the reference trio, the draft-count sweep.

Computed from the suite's runs (``suite.EngineRun``: tokens, wall times, every pass);
statistics are ``engine.stats.DecodeStats`` fed pass by pass (one definition). The result
goes into ``results.json`` as ``summary``; the report renders from that file alone.
"""

from __future__ import annotations

import statistics

from ..adaptive import CostCurve
from ..stats import DecodeStats
from .workloads import TASK_ORDER

ISSUE2_ROLES = ("code-edit", "summarise", "open-question")


def cost_ratio(curve: dict, n: float, key: str = "ratio") -> float:
    """c(n)/c(1) of a measured curve (``results.json``'s ``verify_cost``), interpolated as
    the engine does (``engine.adaptive.CostCurve``)."""
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


def _first_runs(runs, config: str) -> dict:
    out = {}
    for run in runs:
        if run.config == config and run.workload not in out:
            out[run.workload] = run
    return out


def _summarise(runs, baseline: dict[str, float], base_runs: dict,
               curve: dict | None, baseline_cpu: dict[str, float] | None = None) -> dict:
    """Figures for one config over a set of runs (one per workload)."""
    if not runs:
        return {}
    wall = sum(r.decode_wall_s for r in runs)
    base = sum(baseline[r.workload] for r in runs)
    tokens = sum(len(r.tokens) for r in runs)
    out = {"prompts": len(runs), "tokens": tokens, "decode_wall_s": round(wall, 3),
           "baseline_wall_s": round(base, 3), "tok_s": round(tokens / wall, 2) if wall else None,
           "speedup": round(base / wall, 3) if wall else None,
           "identical": all(r.identical for r in runs)}
    if baseline_cpu and all(r.cpu_s for r in runs):
        cpu = sum(r.cpu_s for r in runs)
        out["cpu_s"] = round(cpu, 3)
        out["speedup_cpu"] = round(sum(baseline_cpu[r.workload] for r in runs) / cpu, 3)
    if any(r.passes for r in runs):
        stats = stats_from_passes(runs)
        d = stats.to_dict()
        out.update({k: d[k] for k in ("passes", "drafted", "accepted", "emitted", "tokens_per_pass",
                                      "acceptance_rate", "per_position_acceptance",
                                      "accepted_length_counts", "drafter_counters")})
        out["position_drafted"] = list(stats.position_drafted)
        base_passes = sum(base_runs[r.workload].stats["passes"] for r in runs
                          if r.workload in base_runs)
        if curve:
            ideal = ideal_speedup(runs, base_passes, curve)
            out["ideal_speedup"] = round(ideal, 3) if ideal else None
    return out


def aggregate(suite) -> dict:
    runs = suite.runs
    tasks = [t for t in TASK_ORDER if any(r.task == t for r in runs)]
    configs = ["none"] + list(suite.drafters) + ["mlx-lm"]
    none_first = _first_runs(runs, "none")
    curve = suite.verify
    per = {}
    for config in configs:
        first = _first_runs(runs, config)
        per[config] = {"all": _summarise(list(first.values()), suite.baseline, none_first, curve,
                                          suite.baseline_cpu)}
        for task in tasks:
            subset = [r for r in first.values() if r.task == task]
            per[config][task] = _summarise(subset, suite.baseline, none_first, curve,
                                           suite.baseline_cpu)
    ranking = sorted((c for c in suite.drafters if per[c]["all"]),
                     key=lambda c: -(per[c]["all"].get("speedup") or 0))
    issue2 = []
    for role in ISSUE2_ROLES:
        workload = next((w for w in suite.workloads if w.role == role and w.id in suite.reference), None)
        if workload is None:
            continue
        rows = {}
        for config in suite.drafters:
            run = _first_runs(runs, config).get(workload.id)
            if run is not None:
                rows[config] = _summarise([run], suite.baseline, none_first, curve,
                                          suite.baseline_cpu)
        issue2.append({"role": role, "workload": workload.id, "task": workload.task,
                       "tokens": len(suite.reference[workload.id]), "drafters": rows})
    sweep = {}
    if suite.sweep_runs:
        nones: dict[str, list] = {}
        for r in suite.sweep_runs:
            if r.config == "none":
                nones.setdefault(r.workload, []).append(r)
        base_by_workload = {w: statistics.median(r.decode_wall_s for r in rs) for w, rs in nones.items()}
        base_cpu = {w: statistics.median(r.cpu_s for r in rs) for w, rs in nones.items()}
        none_sweep = {w: rs[0] for w, rs in nones.items()}
        for run in suite.sweep_runs:
            if run.config == "none":
                continue
            name, k = run.config.split("@")
            sweep.setdefault(name, {}).setdefault(k, []).append(run)
        sweep = {name: {k: _summarise(group, base_by_workload, none_sweep, curve, base_cpu)
                        for k, group in by_k.items()} for name, by_k in sweep.items()}
    return {"tasks": tasks, "configs": configs, "per": per, "ranking": ranking, "issue2": issue2,
            "sweep": sweep}
