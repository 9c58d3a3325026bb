"""Speed-up against draft count: the best drafters at fixed counts and adaptive, on the
first one-turn chat of each sweep task, in one session per prompt (primed with a plain run),
between two plain runs (the second one the noise check; speed-ups pair with the first)."""

from __future__ import annotations

from ..session import ChatSession
from .runner import EngineRun, compare, draft_settings, log, run_engine


def draft_count_sweep(suite, ranking: list[str]) -> list[EngineRun]:
    """The sweep's runs; a crash or a mismatch goes into ``suite.failures``."""
    cfg = suite.cfg
    best = ranking[: cfg.sweep_drafters]
    if not best:
        return []
    seen, chosen = set(), []
    for workload in suite.workloads:
        if (
            workload.task not in seen
            and workload.id in suite.reference
            and not workload.turns
            and workload.task in cfg.sweep_tasks
        ):
            seen.add(workload.task)
            chosen.append(workload)
    log(
        f"[{suite.elapsed()}] draft-count sweep: {', '.join(best)} x k = {cfg.sweep_counts}"
        f" + adaptive on {len(chosen)} prompts"
    )
    runs = []
    for index, workload in enumerate(chosen, 1):
        session = ChatSession(suite.loaded, suite.memory)
        reference = suite.reference[workload.id]

        def plain(label: str, repeat: int = 0) -> EngineRun:
            run = run_engine(
                session,
                workload,
                workload.messages,
                draft_settings("none", cfg),
                cfg.max_tokens,
                label,
            )
            run.repeat = repeat
            compare(run, reference)
            return run

        plain("prime")
        runs.append(plain("none"))
        configs = [(name, k, False) for name in best for k in cfg.sweep_counts]
        configs += [(name, max(cfg.sweep_counts), True) for name in best]
        shift = index % len(configs)
        for name, k, adaptive in configs[shift:] + configs[:shift]:
            label = f"{name}@{'adaptive' if adaptive else k}"
            try:
                run = run_engine(
                    session,
                    workload,
                    workload.messages,
                    draft_settings(name, cfg, k, adaptive),
                    cfg.max_tokens,
                    label,
                )
            except Exception as error:
                suite.failures.append(
                    f"sweep {workload.id} {label}: {type(error).__name__}: {error}"
                )
                continue
            compare(run, reference)
            if not run.identical:
                suite.failures.append(
                    f"sweep {workload.id} {label}: output differs from plain "
                    f"greedy at token {run.first_mismatch}"
                )
            runs.append(run)
        runs.append(plain("none", repeat=1))  # the second baseline, after all the others
        log(f"  ({index}/{len(chosen)}) {workload.task}/{workload.id} done [{suite.elapsed()}]")
    return runs
