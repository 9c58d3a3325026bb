"""report.md and its plots (``plots.py``), rendered from a suite's ``results.json`` alone, so a
committed run can be rendered again without measuring: ``python -m engine bench --render
results.json``."""

from __future__ import annotations

from pathlib import Path

from ..policy.context_scale import ContextScale
from ..policy.verify_cost import CostCurve
from .aggregate import BOOTSTRAP_RESAMPLES, column_name, columns, paired_ratios, ratio_interval
from .plots import draw

HOW_IT_IS_MEASURED = """\
Every chat is first decoded plainly (the reference). Then, in each of {repeats} rounds, every \
config runs the whole chat in its own chat session as the app runs one (KV cache and drafter \
state kept across turns), configs in an order rotated per chat and round. *Decode time*: each \
answer's generate call minus its prefill. Per round, speed-up = Σ plain decode time / Σ decode \
time over a cell's answers; the figure is the median over rounds with min–max. A cell's noise \
is max / min of its plain rounds; a gain is claimed only when the slowest round beats it. \
`edit-memory` chats run after their predecessor was taught to a fresh cross-chat memory. This \
guards wall-clock speed on the machine that ran it; peers are compared on named device curves \
(`python -m engine.bench.devices`)."""

DEVICE_NOTE = """\
Predicted speed-up over plain decoding when the check set's answers are replayed on each named \
verify-cost curve (`devices.json`, written by `python -m engine.bench.devices --json`; every \
strategy and task: [devices.md](devices.md)). Best peer: the peer strategy highest over all \
tasks on that curve."""

SPEEDUP_CELLS = """\
Cells: the median of the rounds' speed-ups with their min–max. "no change": the range \
overlaps the none-vs-none noise of those answers, so no gain or loss is claimed."""
ORACLE_NOTE = """ *oracle*: a drafter handed the plain run's own answer (drafts \
{oracle_draft_count} tokens, all accepted): the limit on this machine."""
RATIO_CELLS = f"""\
Cells: each answer's decode time over the same answer's plain decode time in the same round, \
as a geometric mean over the cell's (answer, round) pairs, with a 95% bootstrap interval \
({BOOTSTRAP_RESAMPLES:,} resamples of the pairs, fixed seed). Below 1: faster than plain."""


PREDICTED_NOTE = """\
The device table's replay (`python -m engine.bench.devices`) of this run's own plain answers \
on the verify cost measured in this run, the drafter's host time charged: what it predicts \
each config makes, against what it \
made here (the median round above). Both are Σ plain time / Σ time over a task's answers. \
*hindsight*: the default drafter's own drafts, each pass cut knowing the answer (what a better \
policy could make of them)."""


PASS_COST_NOTE = """\
Every pass of every round, its seconds against what the prediction charges for the same \
passes on the verify cost measured in this run: c(n) at the pass's context, and a pass queued \
before the last token was read (plain decoding's, a blind pass) at the share of c(1) the \
prediction charges. A pass at a new length or cache length can cost more than the curve's."""


PIPELINED_NOTE = """\
A one-token pass queued before the last token is read, as plain decoding runs and as the \
adaptive policy sends a pass after one that sent nothing where that pays (a blind pass), \
costs {share} of c(1) here."""


LOOP_NOTE = """\
In the engine's own loop, with its host work per token, plain decoding's passes took {share} \
of c(1) at their context (this run's reference answers, decoded before the timed rounds): the \
prediction prices plain decoding, and every pass queued as it is, at that share (its policy \
plans, as the loop's does, on the share above)."""


SAMPLES_NOTE = """\
c(n) here is the median of up to {repeats} timed passes a length: {verify_repeats} at the \
start, which the adaptive policy planned on, and {verify_between} after each chat of every \
length its passes are priced on, so the prediction prices the machine as it was over the run. \
The start's alone said c(n)/c(1): {planned}."""


CONTEXT_NOTE = """\
c(n) after other contexts, as a share of c(n) after the prefix (medians, the contexts \
interleaved): the prediction prices each pass at its own context, interpolating between these \
and holding at the edges."""


def context_scale_lines(scale: dict) -> list[str]:
    """The verify-cost section's table of c(n, context) / c(n)."""
    header = ["context \\ n"] + [str(n) for n in scale["lengths"]]
    rows = [
        [str(context)] + [_f(r) for r in ratios]
        for context, ratios in zip(scale["contexts"], scale["ratios"])
    ]
    return [CONTEXT_NOTE, "", _table(header, rows), ""]


def priced_passes(curve: CostCurve, run: dict, queued_share: float = 1.0) -> float:
    """c(n) of a run's passes, each at about its context (its answer's prompt, then that
    answer's tokens spread evenly over its passes: the run records no pass's own); its queued
    passes at ``queued_share`` of c(1) (the run counts them, not which they were: they are
    priced at its one-token passes' mean context)."""
    sizes, start = run["stats"]["pass_sizes"], run["timing"].get("prompt_tokens", 0)
    step = run["stats"]["emitted"] / max(len(sizes), 1)
    costs = [curve.at_context(n, start + i * step) for i, n in enumerate(sizes)]
    ones = [c for c, n in zip(costs, sizes) if n == 1]
    queued = min(run["stats"].get("queued_passes", 0), len(ones))
    return sum(costs) - (queued and queued * (1.0 - queued_share) * sum(ones) / len(ones))


def measured_curve(results: dict) -> CostCurve:
    """The verify cost a results.json measured, each pass at its context where it measured
    a context scale."""
    measured = results["verify_cost"]
    scale = measured.get("context_scale")
    return CostCurve(
        {int(n): s for n, s in measured["median_s"].items()},
        context_scale=scale and ContextScale.from_dict(scale),
    )


def _passes_of(results: dict, config: str, task: str | None = None) -> list[dict]:
    """A config's runs (of one task, or all) whose every pass is listed ([] where one is not:
    an older results.json)."""
    runs = [r for r in results["runs"] if r["config"] == config and r.get("stats")]
    runs = [r for r in runs if task is None or r["task"] == task]
    sizes = sum(len(r["stats"].get("pass_sizes", [])) for r in runs)
    return runs if sizes and sizes == sum(r["stats"]["passes"] for r in runs) else []


def pass_cost_table(results: dict) -> list[str]:
    """Where measured and predicted part: per config, the seconds of its passes against what
    the prediction charges for the same passes (``priced_passes``, queued ones at the share
    it charges them), and the shares of passes that sent no draft and that were queued; then
    measured / charged per task, where a source's passes part from the curve."""
    measured = results["verify_cost"]
    recorded = measured.get("loop_share") or measured.get("pipelined_share")
    share = recorded or 1.0  # (an older run: every pass at c(n))
    curve = measured_curve(results)

    def charged(runs: list[dict]) -> float:
        return sum(priced_passes(curve, r, share) for r in runs)

    rows, configs = [], []
    for config in results["summary"]["configs"]:
        runs = _passes_of(results, config)
        if not runs:
            continue
        configs.append(config)
        sizes = [n for r in runs for n in r["stats"]["pass_sizes"]]
        spent = sum(r["timing"]["decode_s"] for r in runs)
        drafter = sum(r["timing"].get("drafter_s", 0.0) for r in runs)
        on_curve = charged(runs)
        alone = sum(n == 1 for n in sizes) / len(sizes)
        counted = all("queued_passes" in r["stats"] for r in runs)  # (older runs: not)
        queued = sum(r["stats"].get("queued_passes", 0) for r in runs) / len(sizes)
        cells = [f"{len(sizes):,}", f"{alone:.0%}", f"{queued:.0%}" if counted else "–"]
        cells += [_f(1e3 * spent / len(sizes)), _f(1e3 * drafter / len(sizes))]
        cells += [_f(1e3 * on_curve / len(sizes)), _f(spent / on_curve)]
        rows.append([f"`{config}`"] + cells)
    if not rows:
        return []
    header = ["config", "passes", "no draft", "queued", "ms a pass", "of it drafter"]
    header += ["charged ms a pass", "measured / charged"]
    note = PASS_COST_NOTE + (f" Here that share is {share}." if recorded else "")
    by_task = []
    for task in results["summary"]["tasks"]:
        cells = []
        for config in configs:
            runs = _passes_of(results, config, task)
            spent = sum(r["timing"]["decode_s"] for r in runs)
            cells.append(_f(spent / charged(runs)) if runs else "–")
        by_task.append([task] + cells)
    task_header = ["measured / charged, by task"] + [f"`{c}`" for c in configs]
    return [note, "", _table(header, rows), "", _table(task_header, by_task), ""]


def predictions(results: dict) -> dict[str, dict]:
    """The run's predicted speed-ups by config (a results.json from before every config was
    predicted holds the default drafter's as "default")."""
    predicted = dict(results.get("predicted") or {})
    default = results["summary"].get("default_drafter")
    if "default" in predicted and default:
        predicted.setdefault(default, predicted.pop("default"))
    return predicted


def predicted_rows(results: dict) -> list[list]:
    """Per drafter config and task (then all): measured, predicted, measured / predicted."""
    summary, predicted = results["summary"], predictions(results)
    rows = []
    for config, _ in columns(summary):
        guesses = predicted.get(config)
        if not guesses:
            continue
        for task in summary["tasks"] + ["all"]:
            made = (summary["per"][config].get(task) or {}).get("speedup")
            guess = guesses.get(task)
            rows.append([config, task, made, guess, made / guess if made and guess else None])
    return rows


def measured_beside_predicted(results: dict) -> list[str]:
    """The run's closing lines: each config's measured speed-up beside the prediction."""
    rows = predicted_rows(results)
    if not rows:
        return []
    lines = ["measured (this machine's clock) / predicted (replay on the curve measured here):"]
    for config, task, made, guess, ratio in rows:
        lines.append(f"  {config:16} {task:16} {_f(made)} / {_f(guess)} = {_f(ratio)}")
    return lines


def predicted_table(results: dict) -> list[str]:
    """The report's section "Measured against predicted", where the run saved a prediction."""
    summary, predicted = results["summary"], predictions(results)
    rows = predicted_rows(results)
    if not rows:
        return []
    hindsight = predicted.get("hindsight", {})
    table = []
    for config, task, made, guess, ratio in rows:
        name = column_name(config, summary)
        cells = [made, guess, ratio]
        bound = hindsight.get(task) if config == summary.get("default_drafter") else None
        label = "**all**" if task == "all" else task
        table.append([name, label] + [_f(x) for x in cells] + [_f(bound)])
    header = ["config", "task", "measured", "predicted", "measured / predicted"]
    header.append("hindsight (predicted)")
    lines = ["## Measured against predicted", "", PREDICTED_NOTE, "", _table(header, table), ""]
    return lines + pass_cost_table(results)


def _f(value, fmt="{:.2f}", missing="–"):
    return missing if value is None else fmt.format(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _loadavg(values) -> str:
    return "/".join(f"{v:.1f}" for v in values) if values else "unknown"


def speedup_cell(figures: dict | None) -> str:
    """ "1.52x (1.48–1.60)", or "no change (0.97–1.05)" when the range is inside the noise."""
    if not figures or figures.get("speedup") is None:
        return "–"
    speedup, verdict = f"{figures['speedup']:.2f}x", figures.get("verdict")
    if verdict == "one round":
        return f"{speedup}? (one round: no noise estimate)"
    span = f"({figures['lo']:.2f}–{figures['hi']:.2f})"
    label = {"gain": speedup, "loss": f"**{speedup}**"}.get(verdict, "no change")
    return f"{label} {span}"


def _task_table(summary: dict, cell) -> str:
    """One row per task (and all), one column per config (``columns``):
    ``cell(key, figures, task)``."""
    ran = columns(summary)
    rows = [
        ["**all**" if task == "all" else task] + [cell(key, figures, task) for key, figures in ran]
        for task in summary["tasks"] + ["all"]
    ]
    return _table(["task"] + [column_name(key, summary) for key, _ in ran], rows)


def ratio_cell(ratios: list[float]) -> str:
    cell = ratio_interval(ratios)
    if cell is None:
        return "not in this run"
    return f"{cell['ratio']:.2f} ({cell['lo']:.2f}–{cell['hi']:.2f}; {cell['pairs']} pair{'s' * (cell['pairs'] != 1)})"


def identity_table(summary: dict) -> str:
    rows = []
    for config in summary["configs"]:
        f = summary["per"].get(config, {}).get("all")
        if not f:
            continue  # did not run (mlx-lm on schema tasks)
        cells = [_f(f.get("tok_s"), "{:.1f}"), _f(f.get("tokens_per_pass"))]
        cells += [_f(f.get("acceptance_rate"), "{:.0%}"), "yes" if f.get("identical") else "**NO**"]
        rows.append([f"`{config}`", *cells])
    header = ["config", "tokens/s", "tokens per pass", "acceptance", "identical to plain"]
    return _table(header, rows)


def header_lines(results: dict) -> list[str]:
    cfg, env = results["settings"], results["environment"]
    m, model = env["machine"], env["model"]
    loads = [r.get("loadavg_1min") or 0.0 for r in results["runs"]]
    identity = (
        "every Draftless run's greedy output equals plain greedy decoding, token for token."
        if not results["failures"]
        else "FAILED — see *Failures* below."
    )
    on = m.get("row_gemv")
    prompt_set = cfg.get("conversations") or cfg.get("split", "check")
    library = "" if on is None else f" (one-row sgemv library {'on' if on else 'off'})"
    return [
        f"# Draftless benchmark{' (quick)' if cfg['quick'] else ''}"
        f"{' — tuning set' if cfg.get('split') == 'tuning' else ''}",
        "",
        f"**Identity check: {identity}**",
        "",
        f"- Date: {env['date_utc']}; total run time {env.get('total_s', 0):.0f} s",
        f"- Command: `{results['command']}`",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; BLAS: {m['blas']}"
        f"{library}; load average at start {_loadavg(m.get('loadavg_start'))}, at end "
        f"{_loadavg(m.get('loadavg_end'))}; 1-minute load during the runs "
        f"{min(loads, default=0):.1f}–{max(loads, default=0):.1f}",
        f"- Model: {model['name']} ({model['model_type']}, {model['parameters'] / 1e6:.0f}M "
        f"parameters, {model['dtype']}), speculation {model['speculation']}",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v),
        f"- Code: git {env.get('git') or 'unknown'}",
        f"- Settings: greedy, answers up to {cfg['max_tokens']} tokens (to end-of-answer), "
        f"{cfg['repeats']} interleaved rounds, prompt set `{prompt_set}`, draft "
        f"count cap {cfg['draft_count']}, adaptive {'on' if cfg['adaptive'] else 'off'}; "
        f"drafters: {', '.join(results['drafters'])}; oracle draft count "
        f"{results.get('oracle_draft_count')}",
        "",
    ]


def samples_note(curve: dict, settings: dict) -> str:
    planned = {int(n): s for n, s in curve["planned_s"].items()}
    one = planned[min(planned)]
    ratios = ", ".join(f"{n} {_f(s / one)}" for n, s in planned.items())
    return SAMPLES_NOTE.format(
        repeats=curve["repeats"],
        verify_repeats=settings["verify_repeats"],
        verify_between=settings["verify_between"],
        planned=ratios,
    )


def render(results: dict, out: Path, devices: dict | None = None) -> None:
    """Write the plots (``plots.py``; the device table's with ``devices``, a
    ``python -m engine.bench.devices --json``) and report.md into ``out``."""
    if results.get("format", 1) < 2:
        raise ValueError("written before report format 2: run the benchmark again")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    images = {file: f"![{caption}]({file})" for file, caption in draw(results, devices, out)}
    summary, failures = results["summary"], results["failures"]
    ratios = paired_ratios(results)
    speedups = _task_table(summary, lambda key, figures, task: speedup_cell(figures.get(task)))
    pairs = _task_table(summary, lambda key, _, task: ratio_cell(ratios.get(key, {}).get(task, [])))
    oracle = ORACLE_NOTE.format(**results) if "oracle" in summary["per"] else ""
    lines = header_lines(results)
    lines += ["## Speed-up per task against plain decoding", "", SPEEDUP_CELLS + oracle, ""]
    lines += [speedups, "", images["speedup.png"], ""]
    lines += predicted_table(results)
    lines += ["## Paired per-answer time ratios", "", RATIO_CELLS, "", pairs, ""]
    lines += ["## Speed, acceptance, identity (all answers)", "", identity_table(summary), ""]
    lines += [images["tokens_per_pass.png"], ""]
    lines += ["## How it is measured", "", HOW_IT_IS_MEASURED.format(**results["settings"]), ""]
    curve = results["verify_cost"]
    ratio_row = ["c(n)/c(1) median"] + [_f(x) for x in curve["ratio"].values()]
    ms_row = ["c(n) ms median"] + [_f(x * 1000, "{:.1f}") for x in curve["median_s"].values()]
    lines += ["## Verify cost", "", _table(["n"] + list(curve["ratio"]), [ratio_row, ms_row]), ""]
    if curve.get("planned_s"):
        lines += [samples_note(curve, results["settings"]), ""]
    if curve.get("pipelined_share") is not None:
        lines += [PIPELINED_NOTE.format(share=curve["pipelined_share"]), ""]
    if curve.get("loop_share") is not None:
        lines += [LOOP_NOTE.format(share=curve["loop_share"]), ""]
    if curve.get("context_scale"):
        lines += context_scale_lines(curve["context_scale"])
    lines += [images["verify_cost.png"], ""]
    if "devices.png" in images:
        lines += ["## Device table", "", DEVICE_NOTE, "", images["devices.png"], ""]
    lines += ["## Workloads", ""]
    for p in results["provenance"]:
        note = f" ({p['note']})" if p.get("note") else ""
        lines.append(f"- **{p['task']}**: {p['source']}; {', '.join(p['items'])}{note}")
    chats = [
        [w["id"], w["task"], ", ".join(map(str, w["reference_tokens"])), w.get("after") or ""]
        for w in results["workloads"]
    ]
    lines += ["", _table(["chat", "task", "answers (tokens)", "after"], chats), ""]
    if results["skipped"]:
        lines += ["## Skipped", ""] + [f"- {s}" for s in results["skipped"]] + [""]
    if failures:
        lines += ["## Failures", ""] + [f"- FAILED {f}" for f in failures] + [""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
