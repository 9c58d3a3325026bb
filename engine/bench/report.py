"""report.md and PNG plots, rendered from a suite's ``results.json`` alone.

``render(results, out)`` needs nothing but that dictionary, so a committed run can be
rendered again without measuring: ``python -m engine bench --render results.json``.
Results files written before format 2 are refused.
"""

from __future__ import annotations

from pathlib import Path

from .aggregate import (
    BOOTSTRAP_RESAMPLES,
    GOAL_FLOOR,
    GOAL_GEOMEAN,
    GOAL_PEER_RATIO,
    paired_ratios,
    ratio_interval,
)

NO_CHANGE = "no change"
NOT_IN_RUN = "not in this run"


def _f(value, fmt="{:.2f}", missing="–"):
    return missing if value is None else fmt.format(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _loadavg(values) -> str:
    return "/".join(f"{v:.1f}" for v in values) if values else "unknown"


def plot_verify_cost(plt, curve: dict, out: Path, title: str) -> str:
    ns = [int(n) for n in curve["ratio"]]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(ns, [curve["ratio"][str(n)] for n in ns], marker="o", label="median c(n)/c(1)")
    ax.plot(
        ns,
        [curve["ratio_min"][str(n)] for n in ns],
        marker="x",
        ls="--",
        label="fastest repeat c(n)/c(1)",
    )
    ax.plot(ns, ns, ls=":", color="gray", label="linear (n)")
    ax.set_ylim(0, max(curve["ratio"].values()) * 1.3 + 0.5)
    ax.set_xlabel("tokens in one forward pass (n)")
    ax.set_ylabel("c(n) / c(1)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "verify_cost.png", dpi=90)
    plt.close(fig)
    return "verify_cost.png"


def plot_sweep(plt, sweep: dict, out: Path, xlabel: str, title: str) -> str:
    cmap = plt.get_cmap("tab20")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.3))
    for i, (name, by_k) in enumerate(sweep.items()):
        ks = sorted(int(k) for k in by_k if k.isdigit())
        a1.plot(
            ks,
            [by_k[str(k)].get("speedup") or 0 for k in ks],
            marker="o",
            label=name,
            color=cmap(i * 2),
        )
        a2.plot(
            ks,
            [by_k[str(k)].get("tokens_per_pass") or 0 for k in ks],
            marker="o",
            label=name,
            color=cmap(i * 2),
        )
        if "adaptive" in by_k and by_k["adaptive"].get("speedup"):
            a1.axhline(
                by_k["adaptive"]["speedup"], ls="--", color=cmap(i * 2), label=f"{name} adaptive"
            )
    for ax, label in ((a1, "speed-up (x)"), (a2, "tokens / pass")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out / "speedup_vs_draft_count.png", dpi=90)
    plt.close(fig)
    return "speedup_vs_draft_count.png"


def row_gemv_note(machine: dict) -> str:
    """Whether the opt-in one-row library was on (reports before it was opt-in had it on)."""
    on = machine.get("row_gemv")
    return "" if on is None else f" (one-row sgemv library {'on' if on else 'off'})"


def speedup_cell(figures: dict | None) -> str:
    """ "1.52x (1.48–1.60)", or "no change (0.97–1.05)" when the range is inside the noise."""
    if not figures or figures.get("speedup") is None:
        return "–"
    if figures.get("verdict") == "one round":
        return f"{figures['speedup']:.2f}x? (one round: no noise estimate)"
    span = f"({figures['lo']:.2f}–{figures['hi']:.2f})"
    if figures.get("verdict") == "gain":
        return f"{figures['speedup']:.2f}x {span}"
    if figures.get("verdict") == "loss":
        return f"**{figures['speedup']:.2f}x** {span}"
    return f"{NO_CHANGE} {span}"


# ---------------------------------------------------------------- plots


def _plots(results: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = results["summary"]
    tasks, per, peers = summary["tasks"], summary["per"], summary["peers"]
    rows = [(c, per[c]) for c in summary["configs"] if c != "none"] + list(peers.items())
    cmap = plt.get_cmap("tab20")
    files = []

    def grouped(metric: str, title: str, ylabel: str, name: str):
        fig, ax = plt.subplots(figsize=(12, 5))
        groups = tasks + ["all"]
        width = 0.85 / max(len(rows), 1)
        for i, (label, figures) in enumerate(rows):
            values = [(figures.get(t) or {}).get(metric) or 0 for t in groups]
            xs = [g + (i - (len(rows) - 1) / 2) * width for g in range(len(groups))]
            ax.bar(xs, values, width, label=label, color=cmap(i % 20))
            if metric == "speedup":
                lows = [(figures.get(t) or {}).get("lo") for t in groups]
                highs = [(figures.get(t) or {}).get("hi") for t in groups]
                err = [
                    [max(v - (lo or v), 0) for v, lo in zip(values, lows)],
                    [max((hi or v) - v, 0) for v, hi in zip(values, highs)],
                ]
                ax.errorbar(xs, values, yerr=err, fmt="none", ecolor="black", lw=0.6)
        ax.axhline(1.0, color="black", lw=1, ls="--")
        ax.set_xticks(range(len(groups)), groups, rotation=20)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=7, ncol=3)
        fig.tight_layout()
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        files.append(name)

    grouped(
        "speedup",
        "Decode speed-up over each one's own plain decoding (median of rounds, min–max bars)",
        "speed-up (x)",
        "speedup.png",
    )
    grouped(
        "tokens_per_pass",
        "Tokens per target pass (mean acceptance length)",
        "tokens / pass",
        "tokens_per_pass.png",
    )

    curve = results["verify_cost"]
    files.append(
        plot_verify_cost(
            plt,
            curve,
            out,
            f"Verify cost after a {curve['prefix_tokens']}-token "
            f"prefix (c(1) = {curve['median_s']['1'] * 1000:.1f} ms)",
        )
    )

    if summary["sweep"]:
        files.append(
            plot_sweep(
                plt,
                summary["sweep"],
                out,
                "draft count k (fixed)",
                "Speed-up and tokens/pass against a fixed draft count (one prompt per task)",
            )
        )
    return files


# ---------------------------------------------------------------- markdown


def _columns(summary: dict, peers: bool = True) -> list[tuple[str, str, dict]]:
    """(heading, config or peer, figures): Draftless (the default drafter) first, the other
    drafters, the oracle, then peers."""
    per = summary["per"]
    default = summary.get("default_drafter")
    columns = [(f"Draftless (`{default}`)", default, per[default])] if default in per else []
    columns += [(f"`{c}`", c, per[c]) for c in summary["ranking"] if c != default]
    if "oracle" in per:
        columns.append(("oracle (limit)", "oracle", per["oracle"]))
    if peers:
        columns += [(name, name, figures) for name, figures in summary["peers"].items()]
        if "mlx-lm" in per:
            columns.append(("mlx-lm plain", "mlx-lm", per["mlx-lm"]))
    return columns


def headline_table(summary: dict) -> str:
    """Measured speed-up per task: Draftless, the other drafters, the oracle, each peer."""
    columns = _columns(summary)
    rows = [
        [task if task != "all" else "**all**"] + [speedup_cell(f.get(task)) for *_, f in columns]
        for task in summary["tasks"] + ["all"]
    ]
    return _table(["task"] + [name for name, *_ in columns], rows)


def ratio_table(results: dict) -> str:
    """Per cell: the geometric mean of the paired per-answer time ratios with its bootstrap
    95% interval, or "not in this run" where results.json holds no such pairs."""
    summary = results["summary"]
    columns = _columns(summary)
    ratios = paired_ratios(results)
    rows = []
    for task in summary["tasks"] + ["all"]:
        row = [task if task != "all" else "**all**"]
        for _, key, _ in columns:
            cell = ratio_interval(ratios.get(key, {}).get(task, []))
            row.append(
                NOT_IN_RUN
                if cell is None
                else f"{cell['ratio']:.2f} ({cell['lo']:.2f}–{cell['hi']:.2f}; {cell['pairs']} pairs)"
            )
        rows.append(row)
    return _table(["task"] + [name for name, *_ in columns], rows)


def load_free_table(summary: dict) -> str:
    """Tokens per pass and the speed-up the c(n) curve predicts (free drafting)."""
    columns = _columns(summary, peers=False)
    peers = list(summary["peers"].items())
    header = ["task"] + [name for name, *_ in columns] + [f"{name}: tok/pass" for name, _ in peers]
    rows = []
    for task in summary["tasks"] + ["all"]:
        row = [task if task != "all" else "**all**"]
        for *_, figures in columns:
            cell = figures.get(task) or {}
            row.append(
                f"{_f(cell.get('tokens_per_pass'))} · "
                f"{_f(cell.get('predicted_speedup'), '{:.2f}x')}"
            )
        row += [_f((figures.get(task) or {}).get("tokens_per_pass")) for _, figures in peers]
        rows.append(row)
    return _table(header, rows)


def identity_table(summary: dict) -> str:
    per = summary["per"]
    rows = [
        [
            f"`{c}`",
            _f((per[c].get("all") or {}).get("acceptance_rate"), "{:.0%}"),
            "yes" if (per[c].get("all") or {}).get("identical") else "**NO**",
        ]
        for c in summary["configs"]
        if c in per
    ]
    rows += [
        [name, "–", "yes (vs its own plain)" if (f.get("all") or {}).get("identical") else "**NO**"]
        for name, f in summary["peers"].items()
    ]
    return _table(["config", "acceptance", "identical to plain"], rows)


def goals_table(summary: dict) -> str:
    rows = []
    for goal in summary["goals"]:
        if "best_peer" in goal:
            detail = (
                f"{_f(goal['ours'], '{:.2f}x')} vs {goal['best_peer'] or 'no peer'} "
                f"{_f(goal.get('peer'), '{:.2f}x')} (ratio {_f(goal.get('ratio'))})"
            )
        elif "verdict" in goal:
            detail = f"{_f(goal['ours'], '{:.2f}x')} (slowest round {_f(goal.get('lo'), '{:.2f}x')}; {goal['verdict']})"
        else:
            detail = _f(goal["ours"], "{:.2f}x")
        met = {
            True: "met",
            False: "**not met**",
            None: "no peer ran" if "best_peer" in goal else "not judged (one round)",
        }[goal["met"]]
        rows.append([goal["goal"], detail, met])
    return _table(["goal", "measured", ""], rows)


def render(results: dict, out: Path, plots: bool = True) -> list[str]:
    """Write report.md (and the plots unless ``plots`` is False) into ``out``; return the
    plot file names."""
    if results.get("format", 1) < 2:
        raise ValueError(
            "results written before report format 2 cannot be rendered; run the benchmark again"
        )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg, summary, env = results["settings"], results["summary"], results["environment"]
    failures = results["failures"]
    files = _plots(results, out) if plots else []
    m, v = env["machine"], env["versions"]
    loads = [r.get("loadavg_1min") or 0.0 for r in results["runs"]]
    lines = [
        f"# Draftless benchmark{' (quick)' if cfg['quick'] else ''}"
        f"{' — tuning set' if cfg.get('split') == 'tuning' else ''}",
        "",
    ]
    differences = results.get("peer_differences", [])
    lines += [
        "**Identity check: "
        + (
            "every Draftless run's greedy output equals plain greedy decoding, token for token."
            if not failures
            else "FAILED — see *Failures* below."
        )
        + "**"
        + (
            f" {len(differences)} peer answers differ from that peer's own plain greedy "
            "output (see *Peer differences*)."
            if differences
            else ""
        ),
        "",
    ]
    lines += [
        f"- Date: {env['date_utc']}; total run time {env.get('total_s', 0):.0f} s",
        f"- Command: `{results['command']}`",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; BLAS: {m['blas']}"
        f"{row_gemv_note(m)}; "
        f"load average at start {_loadavg(m.get('loadavg_start'))}, at end "
        f"{_loadavg(m.get('loadavg_end'))}; 1-minute load during the runs "
        f"{min(loads, default=0):.1f}–{max(loads, default=0):.1f}",
        f"- Model: {env['model']['name']} ({env['model']['model_type']}, "
        f"{env['model']['parameters'] / 1e6:.0f}M parameters, {env['model']['dtype']}), "
        f"speculation {env['model']['speculation']}",
        "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
        f"- Code: git {env.get('git') or 'unknown'}",
        f"- Settings: greedy, answers up to {cfg['max_tokens']} tokens (to end-of-answer), "
        f"{cfg['repeats']} interleaved rounds, prompt set `{cfg.get('split', 'check')}`, draft "
        f"count cap {cfg['draft_count']}, adaptive {'on' if cfg['adaptive'] else 'off'}; "
        f"drafters: {', '.join(results['drafters'])}; oracle draft count "
        f"{results.get('oracle_draft_count')}",
        "",
        "## The goals (Draftless = the default drafter, no flags)",
        "",
        goals_table(summary) if summary["goals"] else "(the default drafter did not run)",
        "",
        "## Headline: speed-up per task, each against its own plain decoding",
        "",
        "Cells: the median of the rounds' speed-ups with their min–max. \"no change\": the "
        "range overlaps the none-vs-none noise of those answers, so no gain or loss is claimed. "
        "*oracle*: a drafter handed the plain run's own answer (drafts "
        f"{results.get('oracle_draft_count')} tokens, all accepted): the limit on this machine.",
        "",
        headline_table(summary),
        "",
        "## Paired per-answer time ratios",
        "",
        "Cells: each answer's decode time over the same answer's plain decode time in the same "
        "round (peers: over their own plain decoding), as a geometric mean over the cell's "
        f"(answer, round) pairs, with a 95% bootstrap interval ({BOOTSTRAP_RESAMPLES:,} "
        "resamples of the pairs, fixed seed). Below 1: faster than plain.",
        "",
        ratio_table(results),
        "",
        "## Load-independent figures",
        "",
        "Cells: tokens per pass · the speed-up the measured verify-cost curve predicts from the "
        "same passes with free drafting (plain passes / Σ c(drafted + 1)/c(1)).",
        "",
        load_free_table(summary),
        "",
    ]
    if files:
        lines += ["![speed-up](speedup.png)", "", "![tokens per pass](tokens_per_pass.png)", ""]
    lines += ["## Identity and acceptance", "", identity_table(summary), ""]
    lines += [
        "## How it is measured",
        "",
        "Every chat is first decoded plainly (the reference). Then, in each of "
        f"{cfg['repeats']} rounds, every config runs the whole chat in its own chat "
        "session, as the app runs a chat (KV cache and drafter state kept across turns, "
        "each later turn after the reference answer), in an order rotated per chat and "
        "round. *Decode time* is each answer's generate call minus its prefill. Per round, "
        "speed-up = Σ plain decode time / Σ decode time over the answers of a cell; the "
        "figure is the median over rounds with min–max. The noise of a cell is max / min "
        "of its plain rounds; a gain is claimed only when the slowest round beats it. "
        "`edit-memory` chats run after their predecessor chat has been taught to the "
        "drafter's cross-chat memory (a fresh memory for every run). The engine keeps one "
        "acceptance memory for the whole run, as the app's service does. Peers run the "
        "same answers (full prompts as token ids) against their own plain decoding: "
        "Hugging Face transformers' prompt lookup (torch CPU, same float32 weights, "
        "child process) and llama.cpp's `llama-server --spec-type` n-gram modes (the "
        "embedded model's Q4_1 GGUF, so its tokens differ from ours; checked against its "
        "own plain run).",
        "",
    ]
    curve = results["verify_cost"]
    lines += [
        "## Verify cost",
        "",
        _table(
            ["n"] + list(curve["ratio"]),
            [
                ["c(n)/c(1) median"] + [_f(x) for x in curve["ratio"].values()],
                ["c(n) ms median"] + [_f(x * 1000, "{:.1f}") for x in curve["median_s"].values()],
            ],
        ),
        "",
    ]
    if "verify_cost.png" in files:
        lines += ["![verify cost](verify_cost.png)", ""]
    if summary["sweep"]:
        rows = []
        for name, by_k in summary["sweep"].items():
            for key, s in sorted(
                by_k.items(),
                key=lambda kv: (not kv[0].isdigit(), int(kv[0]) if kv[0].isdigit() else 0),
            ):
                rows.append(
                    [
                        f"`{name}`",
                        key,
                        _f(s.get("tokens_per_pass")),
                        _f(s.get("speedup"), "{:.2f}x"),
                        _f(s.get("predicted_speedup"), "{:.2f}x"),
                    ]
                )
        lines += [
            "## Draft count",
            "",
            _table(["drafter", "k", "tok/pass", "speed-up", "predicted"], rows),
            "",
        ]
        if "speedup_vs_draft_count.png" in files:
            lines += ["![draft count](speedup_vs_draft_count.png)", ""]
    lines += ["## Peers", ""]
    for name, label in (
        ("hf_prompt_lookup", "Hugging Face prompt lookup"),
        ("llama_cpp", "llama.cpp"),
    ):
        peer = results.get(name) or {}
        if peer.get("status") == "ran":
            extra = (
                f"prompt_lookup_num_tokens {peer.get('prompt_lookup_num_tokens')}, "
                f"{peer.get('threads') or 1} torch threads, "
                f"versions {peer.get('versions')}"
                if name == "hf_prompt_lookup"
                else f"modes {', '.join(peer.get('modes', []))} with llama.cpp's default "
                f"sizes, {peer.get('threads')} threads"
            )
            lines += [f"- {label}: ran ({extra})"]
        else:
            lines += [f"- {label}: {peer.get('status', 'skipped')}"]
    lines += ["", "## Workloads", ""]
    for p in results["provenance"]:
        lines += [
            f"- **{p['task']}**: {p['source']}; {', '.join(p['items'])}"
            + (f" ({p['note']})" if p.get("note") else "")
        ]
    lines += [
        "",
        _table(
            ["chat", "task", "answers (tokens)", "after"],
            [
                [
                    w["id"],
                    w["task"],
                    ", ".join(str(t) for t in w["reference_tokens"]),
                    w.get("after") or "",
                ]
                for w in results["workloads"]
            ],
        ),
        "",
    ]
    if results["skipped"]:
        lines += ["## Skipped", ""] + [f"- {s}" for s in results["skipped"]] + [""]
    if failures:
        lines += ["## Failures", ""] + [f"- FAILED {f}" for f in failures] + [""]
    if differences:
        lines += [
            "## Peer differences",
            "",
            "A peer's speculative answer that is not token for token its own plain answer. "
            "Its speed-up is still shown; its tokens per pass count a different answer.",
            "",
        ]
        lines += [f"- {d}" for d in differences] + [""]
    lines += [
        f"Goals: copy-heavy families >= {GOAL_PEER_RATIO}x the best peer; open questions "
        f"and novel text >= {GOAL_FLOOR}x; all tasks geometric mean >= {GOAL_GEOMEAN}x.",
        "",
    ]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return files
