"""The report of results.json files written before format 2 (the committed 48-token run):
report.md and PNG plots, rendered from that file alone.

``render(results, out)`` needs nothing but that dictionary, so a committed run can be
rendered again without measuring: ``python -m engine bench --render results.json``.
"""

from __future__ import annotations

from pathlib import Path

from ..drafters import DRAFTERS
from ..settings import DraftSettings
from .aggregate import cost_ratio
from .report_parts import _f, _loadavg, _table, plot_sweep, plot_verify_cost

# ---------------------------------------------------------------- plots

def _plots(summary: dict, results: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    tasks, per = summary["tasks"], summary["per"]
    drafters = list(results["drafters"])
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

    curve = results["verify_cost"]
    files.append(plot_verify_cost(plt, curve, out, f"Verify cost after a {curve['prefix_tokens']}-token "
                                  f"prefix (median of {curve['repeats']}; "
                                  f"c(1) = {curve['median_s']['1'] * 1000:.0f} ms)"))

    if summary["sweep"]:
        files.append(plot_sweep(plt, summary["sweep"], out, "draft count k",
                                "Speed-up and tokens/pass against draft count (one prompt per task)"))
    return files


# ---------------------------------------------------------------- markdown

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


def render(results: dict, out: Path, plots: bool = True) -> list[str]:
    """Write report.md (and the plots unless ``plots`` is False) into ``out``; return the
    plot file names."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = results["settings"]
    summary = results["summary"]
    env = results["environment"]
    per = summary["per"]
    drafters = list(results["drafters"])
    failures = results["failures"]
    baseline = results["baseline_decode_wall_s"]
    files = _plots(summary, results, out) if plots else []

    m = env["machine"]
    v = env["versions"]
    lines = [f"# Draftless benchmark{' (quick)' if cfg['quick'] else ''}", ""]
    ok = not failures
    lines += ["**Identity check: " + ("every speculative run's greedy output equals plain greedy "
              "decoding, token for token.**" if ok else "FAILED — see *Failures* below.**"), ""]
    lines += [
        f"- Date: {env['date_utc']}; total run time {env.get('total_s', 0):.0f} s",
        f"- Command: `{results['command']}`",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; BLAS: {m['blas']}; "
        f"load average at start {_loadavg(m.get('loadavg_start'))}, at end {_loadavg(m.get('loadavg_end'))}",
        f"- Model: {env['model']['name']} ({env['model']['model_type']}, "
        f"{env['model']['parameters'] / 1e6:.0f}M parameters, {env['model']['dtype']}), "
        f"speculation {env['model']['speculation']}",
        "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
        f"- Code: git {env.get('git') or 'unknown'}",
        f"- Settings: greedy (temperature 0), up to {cfg['max_tokens']} new tokens per prompt, "
        f"draft_count {cfg['draft_count']}, ngram_order {cfg['ngram_order']}, ngram_min {cfg['ngram_min']}, "
        f"adaptive draft length {'on' if cfg['adaptive'] else 'off'}"
        f"{' (the engine default)' if cfg['adaptive'] == DraftSettings.adaptive else ''}; "
        f"drafters: {', '.join(drafters)}",
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
        f"of a prompt differed by {_spread(results['baseline_spread'])} (median over prompts, relative). Treat "
        "speed-ups within about that band of 1.0 as no change. Token counts are exact. "
        + ("With adaptive draft length on, the engine picks each pass's draft length from "
           "measured pass times, so tokens/pass and acceptance also move with load from run to "
           "run; the fixed draft counts of the sweep do not." if cfg['adaptive'] else
           "With a fixed draft count, tokens/pass and acceptance do not depend on load."),
        "",
        "## Results per drafter and task",
        "",
        "Cells: tokens per pass / speed-up. Sorted by overall speed-up.",
        "",
        main_table(summary, drafters),
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
    curve = results["verify_cost"]
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
    k = cfg["draft_count"]
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
        prompts = sorted({r["workload"] for r in results["sweep_runs"]})
        lines += [f"Prompts: {', '.join(prompts)} (one per task). Fixed draft counts draft every pass "
                  "the drafter has a guess (adaptive off); *adaptive* lets the engine choose the "
                  f"length up to {max(cfg['sweep_counts'])}. Each prompt's baseline is the median of "
                  "two `none` runs, before and after its sweep runs.", "",
                  _table(["drafter", "draft count", "tokens/pass", "acceptance", "speed-up",
                          "CPU-time speed-up", "ideal (c(n))", "identical"], rows), ""]
        if files:
            lines += ["![speed-up vs draft count](speedup_vs_draft_count.png)", ""]

    # peers
    lines += ["## Peers", "", "### Hugging Face transformers prompt lookup (torch CPU, same weights)", ""]
    hf = results["hf_prompt_lookup"]
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
        if "prompt-lookup" in per:
            lines += ["Our `prompt-lookup` on the same prompts: " + ", ".join(
                f"{r['workload']} {_run_cell(results, 'prompt-lookup', r['workload'])}"
                for r in hf["rows"]), ""]
    else:
        lines += [hf.get("status", "skipped"), ""]
    lines += ["### llama.cpp", "", results["llama_cpp"], ""]

    # provenance
    lines += ["## Workloads and provenance", ""]
    for p in results["provenance"]:
        lines.append(f"- **{p['task']}**: {p['source']}" + (f"; items: {', '.join(p['items'])}" if p["items"] else "")
                     + (f" — {p['note']}" if p["note"] else ""))
    lines += ["", _table(["prompt", "task", "turn", "plain tokens", "baseline decode s",
                          "none-run spread"],
                         [[w["id"], w["task"], str(w["turn"]), str(w["reference_tokens"]),
                           _f(baseline.get(w["id"]), "{:.2f}"),
                           _f(results["baseline_spread"].get(w["id"]), "{:.0%}")]
                          for w in results["workloads"]]), ""]
    skipped = list(results["skipped"])
    left_out = [n for n in DRAFTERS if n != "none" and n not in drafters
                and not any(f"`{n}`" in line for line in skipped)]
    if left_out:
        skipped.append("registered drafters not in this run (left out with --drafters): "
                       + ", ".join(f"`{n}`" for n in left_out))
    if skipped:
        lines += ["## Skipped", ""] + [f"- {s}" for s in skipped] + [""]
    if failures:
        lines += ["## Failures", ""] + [f"- **{s}**" for s in failures] + [""]
    lines += ["Every figure above is in `results.json` (per run: stats, timing, identity, load "
              "average).", ""]
    (out / "report.md").write_text("\n".join(lines))
    return files


def _run_cell(results: dict, config: str, workload: str) -> str:
    run = next((r for r in results["runs"] if r["config"] == config and r["workload"] == workload),
               None)
    if run is None or not run.get("stats"):
        return "–"
    return (f"{run['stats']['tokens_per_pass']:.2f} tok/pass, "
            f"{results['baseline_decode_wall_s'][workload] / run['decode_wall_s']:.2f}x")


def _spread(spread: dict) -> str:
    values = sorted(spread.values())
    if not values:
        return "unknown"
    median = values[len(values) // 2]
    return f"{median:.0%} (max {values[-1]:.0%})"
