"""Aggregate a suite run and write report.md, results.json and PNG plots.

Every number in the report is computed here from the runs of the suite that wrote it;
statistics are engine.stats.DecodeStats fed pass by pass (one definition).
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.settings import DraftSettings as _DS

from .suite import EngineRun, cost_ratio, ideal_speedup, stats_from_passes
from .workloads import TASK_ORDER

ISSUE2_ROLES = ("code-edit", "summarise", "open-question")


def _first_runs(runs: list[EngineRun], config: str) -> dict[str, EngineRun]:
    out = {}
    for run in runs:
        if run.config == config and run.workload not in out:
            out[run.workload] = run
    return out


def _summarise(runs: list[EngineRun], baseline: dict[str, float], base_runs: dict[str, EngineRun],
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
    curve = getattr(suite, "verify", None)
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
        import statistics

        nones: dict[str, list[EngineRun]] = {}
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


# ---------------------------------------------------------------- plots

def _plots(summary: dict, suite, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    tasks, per = summary["tasks"], summary["per"]
    drafters = list(suite.drafters)
    cmap = plt.get_cmap("tab20")

    def grouped(metric: str, title: str, ylabel: str, name: str, line: float | None):
        fig, ax = plt.subplots(figsize=(10, 4.8))
        groups = tasks + ["all"]
        width = 0.8 / max(len(drafters), 1)
        for i, d in enumerate(drafters):
            values = [per[d].get(t, {}).get(metric) or 0 for t in groups]
            ax.bar([g + (i - (len(drafters) - 1) / 2) * width for g in range(len(groups))], values,
                   width, label=d, color=cmap(i % 20))
        if line is not None:
            ax.axhline(line, color="black", lw=1, ls="--")
        ax.set_xticks(range(len(groups)), groups)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        files.append(name)

    grouped("tokens_per_pass", "Tokens per target pass (mean acceptance length) per task",
            "tokens / pass", "tokens_per_pass.png", 1.0)
    grouped("speedup", "Decode wall-clock speed-up over plain decoding (none), per task",
            "speed-up (x)", "speedup.png", 1.0)

    # per-position acceptance, one panel per task + all
    groups = tasks + ["all"]
    cols = 4
    rows = (len(groups) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(12, 3 * rows), squeeze=False, sharey=True)
    for index, group in enumerate(groups):
        ax = axes[index // cols][index % cols]
        for i, d in enumerate(drafters):
            curve = per[d].get(group, {}).get("per_position_acceptance") or []
            if curve:
                ax.plot(range(1, len(curve) + 1), curve, marker="o", ms=3, label=d, color=cmap(i % 20))
        ax.set_title(group, fontsize=10)
        ax.set_xlabel("draft position")
        ax.set_ylim(0, 1.02)
    for index in range(len(groups), rows * cols):
        axes[index // cols][index % cols].axis("off")
    axes[0][0].set_ylabel("accepted share")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower right", fontsize=8, ncol=2)
    fig.suptitle("Per-position acceptance: share of passes with a draft at position i where it was kept")
    fig.tight_layout()
    fig.savefig(out / "per_position_acceptance.png", dpi=80)
    plt.close(fig)
    files.append("per_position_acceptance.png")

    # verify cost
    curve = suite.verify
    ns = [int(n) for n in curve["ratio"]]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(ns, [curve["ratio"][str(n)] for n in ns], marker="o", label="median c(n)/c(1)")
    ax.plot(ns, [curve["ratio_min"][str(n)] for n in ns], marker="x", ls="--",
            label="fastest repeat c(n)/c(1)")
    ax.plot(ns, ns, ls=":", color="gray", label="linear (n)")
    ax.set_ylim(0, max(curve["ratio"].values()) * 1.3 + 0.5)
    ax.set_xlabel("tokens in one forward pass (n)")
    ax.set_ylabel("c(n) / c(1)")
    ax.set_title(f"Verify cost after a {curve['prefix_tokens']}-token prefix "
                 f"(median of {curve['repeats']}; c(1) = {curve['median_s']['1'] * 1000:.0f} ms)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "verify_cost.png", dpi=90)
    plt.close(fig)
    files.append("verify_cost.png")

    sweep = summary["sweep"]
    if sweep:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.3))
        for i, (name, by_k) in enumerate(sweep.items()):
            ks = sorted(int(k) for k in by_k if k.isdigit())
            a1.plot(ks, [by_k[str(k)]["speedup"] for k in ks], marker="o", label=name, color=cmap(i * 2))
            a2.plot(ks, [by_k[str(k)]["tokens_per_pass"] for k in ks], marker="o", label=name,
                    color=cmap(i * 2))
            if "adaptive" in by_k:
                a1.axhline(by_k["adaptive"]["speedup"], ls="--", color=cmap(i * 2),
                           label=f"{name} adaptive")
        for ax, label in ((a1, "speed-up (x)"), (a2, "tokens / pass")):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("draft count k")
            ax.set_ylabel(label)
            ax.axhline(1.0, color="black", lw=0.8)
            ax.legend(fontsize=8)
        fig.suptitle("Speed-up and tokens/pass against draft count (one prompt per task)")
        fig.tight_layout()
        fig.savefig(out / "speedup_vs_draft_count.png", dpi=90)
        plt.close(fig)
        files.append("speedup_vs_draft_count.png")
    return files


# ---------------------------------------------------------------- markdown

def _f(value, fmt="{:.2f}", missing="–"):
    return missing if value is None else fmt.format(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main_table(summary: dict, drafters: list[str]) -> str:
    tasks = summary["tasks"]
    per = summary["per"]
    header = ["drafter"] + [f"{t}" for t in tasks] + ["all: tok/pass", "accept", "speed-up",
                                                      "CPU-time speed-up", "ideal (c(n))",
                                                      "identical"]
    rows = []
    for d in summary["ranking"] + [d for d in drafters if d not in summary["ranking"]]:
        cells = [f"`{d}`"]
        for t in tasks:
            s = per[d].get(t) or {}
            cells.append(f"{_f(s.get('tokens_per_pass'))} / {_f(s.get('speedup'), '{:.2f}x')}")
        s = per[d]["all"]
        cells += [_f(s.get("tokens_per_pass")), _f(s.get("acceptance_rate"), "{:.0%}"),
                  f"**{_f(s.get('speedup'), '{:.2f}x')}**", _f(s.get("speedup_cpu"), "{:.2f}x"),
                  _f(s.get("ideal_speedup"), "{:.2f}x"),
                  "yes" if s.get("identical") else "**NO**"]
        rows.append(cells)
    return _table(header, rows)


def write_report(suite) -> dict:
    cfg = suite.cfg
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = aggregate(suite)
    env = suite.env
    per = summary["per"]
    files = _plots(summary, suite, out) if cfg.plots else []

    results = {
        "environment": env,
        "command": cfg.command,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(cfg).items()},
        "drafters": list(suite.drafters),
        "failures": suite.failures,
        "skipped": suite.skipped,
        "provenance": [vars(p) for p in suite.provenance],
        "workloads": [{"id": w.id, "task": w.task, "turn": w.turn, "role": w.role,
                       "source": w.source, "reference_tokens": len(suite.reference.get(w.id, []))}
                      for w in suite.workloads],
        "verify_cost": suite.verify,
        "baseline_decode_wall_s": {k: round(v, 4) for k, v in suite.baseline.items()},
        "baseline_spread": {k: round(v, 4) for k, v in suite.baseline_spread.items()},
        "summary": summary,
        "hf_prompt_lookup": suite.hf,
        "llama_cpp": suite.llama_cpp,
        "runs": [r.record() for r in suite.runs],
        "sweep_runs": [r.record() for r in suite.sweep_runs],
        "plots": files,
    }
    (out / "results.json").write_text(json.dumps(results, indent=1))

    m = env["machine"]
    v = env["versions"]
    lines = [f"# Draftless benchmark{' (quick)' if cfg.quick else ''}", ""]
    ok = not suite.failures
    lines += ["**Identity check: " + ("every speculative run's greedy output equals plain greedy "
              "decoding, token for token.**" if ok else "FAILED — see *Failures* below.**"), ""]
    lines += [
        f"- Date: {env['date_utc']}; total run time {env.get('total_s', 0):.0f} s",
        f"- Command: `{cfg.command}`",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; BLAS: {m['blas']}; "
        f"load average at start {_loadavg(m.get('loadavg_start'))}, at end {_loadavg(m.get('loadavg_end'))}",
        f"- Model: {env['model']['name']} ({env['model']['model_type']}, "
        f"{env['model']['parameters'] / 1e6:.0f}M parameters, {env['model']['dtype']}), "
        f"speculation {env['model']['speculation']}",
        "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
        f"- Code: git {env.get('git') or 'unknown'}",
        f"- Settings: greedy (temperature 0), up to {cfg.max_tokens} new tokens per prompt, "
        f"draft_count {cfg.draft_count}, ngram_order {cfg.ngram_order}, ngram_min {cfg.ngram_min}, "
        f"adaptive draft length {'on' if cfg.adaptive else 'off'}"
        f"{' (the engine default)' if cfg.adaptive == bool(getattr(_DS, 'adaptive', False)) else ''}; "
        f"drafters: {', '.join(suite.drafters)}",
        "",
        "## How it is measured",
        "",
        "All runs happen in one process. For each prompt one chat session prefills the prompt "
        "once; then `none` (plain decoding through our loop), every drafter (order rotated from "
        "prompt to prompt), mlx-lm's own `stream_generate`, and `none` again run in turn. The "
        "prompt's baseline time is the median of its two `none` runs. *Decode wall time* is the "
        "whole generate call minus its prefill, so it includes drafting, verifying, detokenizing "
        "and event overhead. A drafter's *speed-up* on a set of prompts is sum of baseline times / "
        "sum of its times (outputs are identical, so this is the ratio of throughputs). "
        "*tokens/pass*, *acceptance* and per-position acceptance are `engine.stats.DecodeStats`, "
        "fed with every pass of those runs. With adaptive draft length on, the engine keeps a "
        "per-drafter acceptance memory for the whole process (as the app does), so later prompts "
        "benefit from earlier ones. *ideal (c(n))* is the speed-up the measured verify-"
        "cost curve predicts from the same passes if drafting were free: plain passes / "
        "Σ c(drafted+1)/c(1) (using the fastest-repeat curve). *CPU-time speed-up* is the same "
        "ratio computed from this process's CPU time (all threads) instead of wall time: "
        "less sensitive to other programs taking the cores, though not immune (OpenBLAS "
        "threads spin while they wait). Each prompt is first prefilled and decoded once by an "
        "untimed `none` run, so every timed run reuses the cached prompt and warm buffers.",
        "",
        "The CPU is shared with other work, so wall-clock figures are noisy: the two `none` runs "
        f"of a prompt differed by {_spread(suite)} (median over prompts, relative). Treat "
        "speed-ups within about that band of 1.0 as no change. Token counts are exact. "
        + ("With adaptive draft length on, the engine picks each pass's draft length from "
           "measured pass times, so tokens/pass and acceptance also move with load from run to "
           "run; the fixed draft counts of the sweep do not." if cfg.adaptive else
           "With a fixed draft count, tokens/pass and acceptance do not depend on load."),
        "",
        "## Results per drafter and task",
        "",
        "Cells: tokens per pass / speed-up. Sorted by overall speed-up.",
        "",
        main_table(summary, list(suite.drafters)),
        "",
    ]
    if files:
        lines += ["![tokens per pass](tokens_per_pass.png)", "", "![speed-up](speedup.png)", ""]

    # issue 2 trio
    if summary["issue2"]:
        lines += ["## The three reference prompts (code editing, summarising a given text, an open "
                  "question)", ""]
        for item in summary["issue2"]:
            lines += [f"**{item['role']}** — `{item['task']}/{item['workload']}`, "
                      f"{item['tokens']} tokens:", ""]
            rows = [[f"`{d}`", _f(s.get("tokens_per_pass")), _f(s.get("acceptance_rate"), "{:.0%}"),
                     _f(s.get("speedup"), "{:.2f}x"), _f(s.get("speedup_cpu"), "{:.2f}x"),
                     _f(s.get("ideal_speedup"), "{:.2f}x"), "yes" if s.get("identical") else "**NO**"]
                    for d, s in sorted(item["drafters"].items(),
                                       key=lambda kv: -(kv[1].get("speedup") or 0))]
            lines += [_table(["drafter", "tokens/pass", "acceptance", "speed-up vs none",
                              "CPU-time speed-up", "ideal (c(n))", "identical"], rows), ""]

    # baselines
    lines += ["## Baselines: our loop (`none`) against mlx-lm `stream_generate`", ""]
    rows = []
    for t in summary["tasks"] + ["all"]:
        a, b = per["none"].get(t) or {}, per["mlx-lm"].get(t) or {}
        if not a or not b:
            continue
        base_tok_s = a["tokens"] / a["baseline_wall_s"] if a.get("baseline_wall_s") else None
        rows.append([t, str(a["tokens"]), _f(base_tok_s, "{:.1f}"), _f(b.get("tok_s"), "{:.1f}"),
                     _f(b["decode_wall_s"] / a["baseline_wall_s"] if a.get("baseline_wall_s") else None,
                        "{:.2f}"), "yes" if b.get("identical") else "**NO**"])
    lines += [_table(["task", "tokens", "none tok/s", "mlx-lm tok/s", "mlx-lm time / none time",
                      "mlx-lm output = ours"], rows), "",
              "A ratio below 1 means mlx-lm's plain loop is faster than ours (our per-pass "
              "overhead); the speed-ups above are against our own `none`.", ""]

    # verify cost
    curve = suite.verify
    lines += ["## Verify cost c(n)/c(1) on this machine", "",
              f"One forward pass of n tokens then argmax of each row, after a "
              f"{curve['prefix_tokens']}-token prefix; median of {curve['repeats']} interleaved repeats.",
              "", _table(["n"] + list(curve["ratio"]),
                         [["c(n) ms"] + [f"{curve['median_s'][n] * 1000:.0f}" for n in curve["ratio"]],
                          ["c(n)/c(1)"] + [f"{r:.2f}" for r in curve["ratio"].values()],
                          ["min c(n) / min c(1)"] + [f"{r:.2f}" for r in curve["ratio_min"].values()]]),
              "", "The last row uses the fastest repeat of each n: less affected by other work on "
              "the machine.", ""]
    if files:
        lines += ["![verify cost](verify_cost.png)", ""]
    k = cfg.draft_count
    lines += [f"With draft count {k} a full pass costs c({k + 1})/c(1) = "
              f"{cost_ratio(curve, k + 1):.2f} plain steps, so a drafter needs more than that many "
              "tokens per pass to win when it drafts every pass.", ""]

    # per-position
    if files:
        lines += ["## Per-position acceptance", "", "![per-position acceptance](per_position_acceptance.png)", ""]
    rows = []
    for d in summary["ranking"]:
        curve_all = per[d]["all"].get("per_position_acceptance") or []
        rows.append([f"`{d}`"] + [f"{x:.2f}" for x in curve_all])
    width = max((len(r) for r in rows), default=1)
    if rows:
        lines += [_table(["drafter"] + [f"pos {i}" for i in range(1, width)],
                         [r + [""] * (width - len(r)) for r in rows]), ""]

    # sweep
    if summary["sweep"]:
        lines += ["## Speed-up against draft count (best drafters)", ""]
        rows = []
        for name, by_k in summary["sweep"].items():
            for key in sorted(by_k, key=lambda x: (not x.isdigit(), int(x) if x.isdigit() else 0)):
                s = by_k[key]
                rows.append([f"`{name}`", key, _f(s.get("tokens_per_pass")),
                             _f(s.get("acceptance_rate"), "{:.0%}"), _f(s.get("speedup"), "{:.2f}x"),
                             _f(s.get("speedup_cpu"), "{:.2f}x"), _f(s.get("ideal_speedup"), "{:.2f}x"),
                             "yes" if s.get("identical") else "**NO**"])
        prompts = sorted({r.workload for r in suite.sweep_runs})
        lines += [f"Prompts: {', '.join(prompts)} (one per task). Fixed draft counts draft every pass "
                  "the drafter has a guess (adaptive off); *adaptive* lets the engine choose the "
                  f"length up to {max(cfg.sweep_counts)}. Each prompt's baseline is the median of "
                  "two `none` runs, before and after its sweep runs.", "",
                  _table(["drafter", "draft count", "tokens/pass", "acceptance", "speed-up",
                          "CPU-time speed-up", "ideal (c(n))", "identical"], rows), ""]
        if files:
            lines += ["![speed-up vs draft count](speedup_vs_draft_count.png)", ""]

    # peers
    lines += ["## Peers", "", "### Hugging Face transformers prompt lookup (torch CPU, same weights)", ""]
    hf = suite.hf
    if hf.get("status") == "ran":
        hv = hf["versions"]
        lines += [f"transformers {hv['transformers']}, torch {hv['torch']} ({hv['torch_threads']} "
                  f"thread, in a child process: next to MLX's OpenBLAS threads, or with 2 threads on "
                  f"this loaded machine, torch ran many times slower), `prompt_lookup_num_tokens={hf['prompt_lookup_num_tokens']}`, "
                  f"`max_matching_ngram_size={hf['max_matching_ngram_size']}`, greedy. Speed-up is "
                  "against transformers' own plain greedy `generate` on the same prompt (median of "
                  "two plain runs around the lookup run), decode time = generate time minus its "
                  "first forward call (prefill + first token). tokens/call excludes that first call.",
                  ""]
        rows = [[f"{r['task']}/{r['workload']}", str(r["new_tokens"]), _f(r["tokens_per_call"]),
                 _f(r["speedup"], "{:.2f}x"), _f(r["plain_tok_s"], "{:.1f}"),
                 "yes" if r["identical_to_hf_plain"] else "**NO**",
                 "yes" if r["hf_plain_equals_our_plain"] else "no"] for r in hf["rows"]]
        lines += [_table(["prompt", "tokens", "tokens/call", "speed-up vs HF plain",
                          "HF plain tok/s", "= HF plain", "HF plain = our plain"], rows), ""]
        ours = summary["ranking"]
        if "prompt-lookup" in per:
            lines += ["Our `prompt-lookup` on the same prompts: " + ", ".join(
                f"{r['workload']} {_run_cell(suite, 'prompt-lookup', r['workload'])}"
                for r in hf["rows"]), ""]
        del ours
    else:
        lines += [hf.get("status", "skipped"), ""]
    lines += ["### llama.cpp", "", suite.llama_cpp, ""]

    # provenance
    lines += ["## Workloads and provenance", ""]
    for p in suite.provenance:
        lines.append(f"- **{p.task}**: {p.source}" + (f"; items: {', '.join(p.items)}" if p.items else "")
                     + (f" — {p.note}" if p.note else ""))
    lines += ["", _table(["prompt", "task", "turn", "plain tokens", "baseline decode s",
                          "none-run spread"],
                         [[w.id, w.task, str(w.turn), str(len(suite.reference.get(w.id, []))),
                           _f(suite.baseline.get(w.id), "{:.2f}"),
                           _f(suite.baseline_spread.get(w.id), "{:.0%}")] for w in suite.workloads]), ""]
    skipped = list(suite.skipped)
    try:
        from engine.drafters import DRAFTERS

        left_out = [n for n in DRAFTERS if n != "none" and n not in suite.drafters
                    and not any(f"`{n}`" in line for line in skipped)]
    except ImportError:
        left_out = []
    if left_out:
        skipped.append("registered drafters not in this run (left out with --drafters): "
                       + ", ".join(f"`{n}`" for n in left_out))
    if skipped:
        lines += ["## Skipped", ""] + [f"- {s}" for s in skipped] + [""]
    if suite.failures:
        lines += ["## Failures", ""] + [f"- **{s}**" for s in suite.failures] + [""]
    lines += ["Every figure above is in `results.json` (per run: stats, timing, identity, load "
              "average).", ""]
    (out / "report.md").write_text("\n".join(lines))
    return {"report": str(out / "report.md"), "results": str(out / "results.json"), "plots": files}


def _run_cell(suite, config: str, workload: str) -> str:
    run = next((r for r in suite.runs if r.config == config and r.workload == workload), None)
    if run is None or not run.stats:
        return "–"
    return (f"{run.stats['tokens_per_pass']:.2f} tok/pass, "
            f"{suite.baseline[workload] / run.decode_wall_s:.2f}x")


def _loadavg(values) -> str:
    return "/".join(f"{x:.1f}" for x in values) if values else "unknown"


def _spread(suite) -> str:
    values = sorted(suite.baseline_spread.values())
    if not values:
        return "unknown"
    median = values[len(values) // 2]
    return f"{median:.0%} (max {values[-1]:.0%})"
