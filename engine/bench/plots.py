"""The report's plots (PNG), drawn from saved results alone, no model and no timing:
speed-up per task and tokens per pass (``results.json``'s summary), the verify-cost curve
(its ``verify_cost``) and, when a ``devices.json`` (``python -m engine.bench.devices --json``)
is given, the device table's default, best peer and oracle on every curve.

matplotlib is imported inside ``draw`` (Agg, no window): only the report needs it, never the
app or the engine.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import EngineError
from .aggregate import column_name, columns

# 10 x 5.5 inches at 90 dpi: 900 x 495 pixels, about the width a README page shows unscaled.
SIZE, DPI = (10, 5.5), 90
# The device plot has a row of three bars per curve (14 curves today): taller to stay legible.
DEVICE_SIZE = (10, 7.5)
# Sections of results.json each plot draws from.
SECTIONS = {"summary": "speed-up and tokens per pass", "verify_cost": "verify cost"}


class MissingSection(ValueError):
    """Results that lack a section a plot is drawn from."""

    def __init__(self, section: str, what: str):
        super().__init__(f"lacks the `{section}` section that the {what} plot is drawn from")
        self.section = section


def check_sections(results: dict) -> None:
    """Raise ``MissingSection`` for the first plot section ``results`` lacks."""
    for section, what in SECTIONS.items():
        if not isinstance(results.get(section), dict):
            raise MissingSection(section, what)


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise EngineError(
            "Drawing the report's plots needs matplotlib: `pip install matplotlib` "
            "(the test set-up, `pip install -e '.[test]'`, installs it)."
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw(results: dict, devices: dict | None, out: Path) -> list[tuple[str, str]]:
    """Write the plots into ``out``; return (file name, caption) for each, in report order."""
    check_sections(results)
    plt = _pyplot()
    summary = results["summary"]
    drawn = [
        (_task_bars(plt, summary, "speedup", out), "Speed-up per task"),
        (_task_bars(plt, summary, "tokens_per_pass", out), "Tokens per pass"),
        (_verify_cost(plt, results["verify_cost"], out), "Verify cost"),
    ]
    if devices is not None:
        drawn.append((_devices(plt, devices, out), "Device table"))
    return drawn


TASK_PLOTS = {  # metric: (file, title, y label)
    "speedup": (
        "speedup.png",
        "Decode speed-up over plain decoding (median of rounds; bars: min–max)",
        "speed-up over plain decoding (×)",
    ),
    "tokens_per_pass": (
        "tokens_per_pass.png",
        "Tokens per target forward pass (mean acceptance length)",
        "tokens per pass (log scale)",
    ),
}


def _task_bars(plt, summary: dict, metric: str, out: Path) -> str:
    """Grouped bars: one group per task (and all), one bar per config that has the metric."""
    name, title, ylabel = TASK_PLOTS[metric]
    groups = summary["tasks"] + ["all"]
    ran = [(key, f) for key, f in columns(summary) if (f.get("all") or {}).get(metric)]
    fig, ax = plt.subplots(figsize=SIZE)
    width = 0.85 / max(len(ran), 1)
    for i, (key, figures) in enumerate(ran):
        cells = [figures.get(task) or {} for task in groups]
        values = [cell.get(metric) or 0 for cell in cells]
        xs = [g + (i - (len(ran) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, values, width, label=column_name(key, summary, quote=""))
        if metric == "speedup":  # the rounds' range
            low = [max(v - (c.get("lo") or v), 0) for v, c in zip(values, cells)]
            high = [max((c.get("hi") or v) - v, 0) for v, c in zip(values, cells)]
            ax.errorbar(xs, values, yerr=[low, high], fmt="none", ecolor="black", lw=0.8)
    ax.axhline(1.0, color="black", lw=1, ls="--", label="plain decoding (1)")
    tallest = max(ax.get_ylim()[1], 1.0)
    if metric == "tokens_per_pass":  # the oracle's passes are ten times the drafters'
        ax.set_yscale("log")
        ax.set_ylim(top=tallest * 4)  # room for the legend above the bars
    else:
        ax.set_ylim(0, tallest * 1.15)
    ax.set_xticks(range(len(groups)), groups, rotation=20)
    ax.set_xlabel("task")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=len(ran) + 1, loc="upper center")
    return _save(plt, fig, out, name)


def _verify_cost(plt, curve: dict, out: Path) -> str:
    ns = sorted(int(n) for n in curve["ratio"])
    one_ms = curve["median_s"]["1"] * 1000
    fig, ax = plt.subplots(figsize=SIZE)
    ax.plot(ns, [curve["ratio"][str(n)] for n in ns], marker="o", label="median of repeats")
    fastest = curve.get("ratio_min") or {}
    if fastest:
        ratios = [fastest[str(n)] for n in ns]
        ax.plot(ns, ratios, marker="x", ls="--", label="fastest repeat")
    ax.plot(ns, ns, ls=":", color="gray", label="n separate one-token passes (n)")
    ax.set_ylim(0, max(curve["ratio"].values()) * 1.3 + 0.5)
    ax.set_xlabel("tokens verified in one forward pass (n)")
    ax.set_ylabel("c(n) / c(1) (× a one-token pass)")
    ax.set_title(
        f"Verify cost on the benchmark's machine: one pass of n tokens after a "
        f"{curve.get('prefix_tokens', '?')}-token prefix (c(1) = {one_ms:.1f} ms)"
    )
    ax.legend(fontsize=8)
    return _save(plt, fig, out, "verify_cost.png")


def _devices(plt, devices: dict, out: Path) -> str:
    """Per curve: the default, the best peer (highest over all tasks) and the oracle."""
    curves = devices["curves"]
    names = list(curves)
    rows = []
    for name in names:
        strategies = curves[name]
        peers = [label for label, row in strategies.items() if row["peer"]]
        peer = max(peers, key=lambda label: strategies[label]["all"])
        rows.append((strategies["default"]["all"], peer, strategies[peer]["all"]))
    oracle = [curves[name]["oracle"]["all"] for name in names]
    fig, ax = plt.subplots(figsize=DEVICE_SIZE)
    height = 0.27
    ys = range(len(names))
    bars = [
        ("Draftless default", [r[0] for r in rows], -height),
        ("best peer (named)", [r[2] for r in rows], 0),
        ("oracle (the answer itself: the limit)", oracle, height),
    ]
    for label, values, shift in bars:
        placed = ax.barh([y + shift for y in ys], values, height, label=label)
        ax.bar_label(placed, fmt="%.2f", fontsize=7, padding=2)
    for y, (_, peer, value) in zip(ys, rows):
        ax.annotate(peer, (value, y), xytext=(26, -2.5), textcoords="offset points", fontsize=7)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", lw=1, ls="--")
    ax.set_yticks(list(ys), names, fontsize=8)
    ax.set_ylim(len(names) + 0.6, -0.6)  # top to bottom, a free row below for the legend
    ax.set_xlabel("predicted speed-up over plain decoding (×, log scale)")
    ax.set_title(
        f"Device table: geometric mean over all tasks, {devices.get('chats', '?')} chats "
        f"replayed on each verify-cost curve"
    )
    ax.legend(fontsize=8, loc="lower center", ncol=3)
    return _save(plt, fig, out, "devices.png")


def _save(plt, fig, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(Path(out) / name, dpi=DPI)
    plt.close(fig)
    return name
