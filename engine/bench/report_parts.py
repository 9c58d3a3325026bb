"""Pieces both report renderers use: Markdown cells and tables, and the two plots
whose data has the same shape in every results format (verify cost, draft-count sweep)."""

from __future__ import annotations

from pathlib import Path


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
    ax.plot(ns, [curve["ratio_min"][str(n)] for n in ns], marker="x", ls="--",
            label="fastest repeat c(n)/c(1)")
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
        a1.plot(ks, [by_k[str(k)].get("speedup") or 0 for k in ks], marker="o", label=name,
                color=cmap(i * 2))
        a2.plot(ks, [by_k[str(k)].get("tokens_per_pass") or 0 for k in ks], marker="o",
                label=name, color=cmap(i * 2))
        if "adaptive" in by_k and by_k["adaptive"].get("speedup"):
            a1.axhline(by_k["adaptive"]["speedup"], ls="--", color=cmap(i * 2),
                       label=f"{name} adaptive")
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
