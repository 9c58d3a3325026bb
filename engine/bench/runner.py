"""One engine run of the benchmark, and what every part of a run shares.

``BenchConfig`` (a run's settings), ``run_engine`` (one generate call timed as a user waits
for it: the whole call's wall time minus its prefill, so drafting, verifying, detokenizing
and event overhead count), ``compare`` (token-for-token identity with the reference),
``verify_cost_curve`` (c(n) as the engine times it) and the machine's description.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from mlx.utils import tree_flatten

from .. import _blas
from ..verify_cost import timing_steps
from ..decode import Target
from ..drafters import measurement_options
from ..events import DoneEvent, PassEvent, ProgressEvent
from ..settings import DraftSettings, GenerationRequest
from .workloads import TASK_ORDER, Workload

QUICK_TASKS = ["code-edit", "edit-session", "rag", "open-question"]
# Without --drafters: these where registered, plus the engine's default drafter
# (--drafters all: every registered drafter).
COMPARED_DRAFTERS = ("ngram-cache", "prompt-lookup", "suffix")
QUICK_DRAFTERS = ("prompt-lookup",)
FULL_TASKS = list(TASK_ORDER)
VERIFY_NS = [1, 2, 3, 4, 5, 6, 8, 9, 12, 16, 17, 24, 32, 48]
SWEEP_COUNTS = [1, 2, 4, 8, 16]
HF_LOOKUP = 10  # transformers' own prompt_lookup_num_tokens default


@dataclass
class BenchConfig:
    out: Path
    model: str | None = None
    quick: bool = False
    drafters: list[str] | None = None  # None: every registered drafter
    max_tokens: int = 512  # answers run to their end unless longer
    repeats: int = 3  # interleaved rounds per chat and config
    split: str = "check"  # "check": the report's prompts; "tuning": the tuning set
    draft_count: int = DraftSettings.draft_count
    ngram_order: int = DraftSettings.ngram_order
    ngram_min: int = DraftSettings.ngram_min
    tasks: list[str] = field(default_factory=lambda: list(FULL_TASKS))
    per_task: int = 2
    mtbench_turns: int = 2
    hf_peer: bool = True
    hf_prompts_per_task: int = 2  # chats per task (every turn of a chat runs)
    hf_lookup: int = HF_LOOKUP
    llama_peer: bool = True
    sweep: bool = True
    sweep_counts: list[int] = field(default_factory=lambda: list(SWEEP_COUNTS))
    sweep_drafters: int = 2
    verify_ns: list[int] = field(default_factory=lambda: list(VERIFY_NS))
    verify_repeats: int = 7
    verify_prefix: int = 384
    plots: bool = True
    adaptive: bool = DraftSettings.adaptive  # the engine's default
    sweep_tasks: list[str] = field(default_factory=lambda: ["code-edit", "rag"])
    hf_tasks: list[str] = field(default_factory=lambda: list(FULL_TASKS))
    oracle: bool = True
    command: str = ""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- environment


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def version_of(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_revision() -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{rev}{' (with uncommitted changes)' if dirty else ''}" if rev else None


def environment(loaded) -> dict:
    params = sum(v.size for _, v in tree_flatten(loaded.model.parameters()))
    dtypes = sorted({str(v.dtype) for _, v in tree_flatten(loaded.model.parameters())})
    return {
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "machine": {
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "blas": _blas.loaded_blas or "mlx's bundled BLAS",
            "row_gemv": bool(_blas.row_gemv),
        },
        "model": {
            "name": loaded.name,
            "path": str(loaded.path),
            "parameters": int(params),
            "dtype": ", ".join(d.replace("mlx.core.", "") for d in dtypes),
            "model_type": loaded.config.get("model_type"),
            "speculation": loaded.speculation,
        },
        "versions": {
            "python": platform.python_version(),
            **{
                name: version_of(name)
                for name in ("mlx", "mlx-lm", "numpy", "torch", "transformers", "matplotlib")
            },
        },
        "git": git_revision(),
    }


# ---------------------------------------------------------------- one engine run


@dataclass
class EngineRun:
    config: str  # drafter name, "mlx-lm", or "drafter@k"
    workload: str
    task: str
    tokens: list[int]
    decode_wall_s: float
    cpu_s: float | None = None  # this process's CPU time (all threads) for the whole call
    stats: dict | None = None  # DecodeStats.to_dict() from the DoneEvent
    timing: dict | None = None
    passes: list[tuple[int, int, int, float]] = field(
        default_factory=list
    )  # drafted, accepted, emitted, s
    identical: bool | None = None
    first_mismatch: int | None = None
    loadavg: float | None = None
    error: str | None = None
    repeat: int = 0
    chat: str = ""  # the workload (chat) this turn belongs to

    def record(self) -> dict:
        out = {
            "config": self.config,
            "workload": self.workload,
            "task": self.task,
            "chat": self.chat or self.workload,
            "repeat": self.repeat,
            "emitted_tokens": len(self.tokens),
            "decode_wall_s": round(self.decode_wall_s, 4),
            "cpu_s": None if self.cpu_s is None else round(self.cpu_s, 4),
            "identical": self.identical,
            "first_mismatch": self.first_mismatch,
            "loadavg_1min": self.loadavg,
        }
        if self.stats is not None:
            out["stats"] = self.stats
            out["timing"] = self.timing
        if self.error:
            out["error"] = self.error
        return out


def draft_settings(
    name: str,
    cfg: BenchConfig,
    draft_count: int | None = None,
    adaptive: bool | None = None,
    cross_chat: bool = False,
) -> DraftSettings:
    """The engine's defaults but for the suite's counts; ``adaptive`` None: cfg.adaptive.
    Without ``cross_chat`` a drafter gets its measurement options (no memory from other
    chats); with it, the app's own options."""
    return DraftSettings(
        drafter=name,
        draft_count=draft_count or cfg.draft_count,
        ngram_order=cfg.ngram_order,
        ngram_min=cfg.ngram_min,
        adaptive=cfg.adaptive if adaptive is None else adaptive,
        options={} if cross_chat else measurement_options(name),
    )


def run_engine(
    session, workload: Workload, messages, draft: DraftSettings, max_tokens: int, label: str
) -> EngineRun:
    request = GenerationRequest(messages=messages, max_tokens=max_tokens, draft=draft).validated()
    passes = []
    done = None
    cpu_started = time.process_time()
    started = time.perf_counter()
    shown = -1
    for event in session.generate(request):
        if isinstance(event, PassEvent):
            passes.append((event.drafted, event.accepted, event.emitted, event.seconds))
        elif isinstance(event, DoneEvent):
            done = event
        elif isinstance(event, ProgressEvent) and event.stage != "prefill":
            # one-off work such as a drafter's model table or the adaptive calibration
            tenth = 10 * event.done // max(event.total, 1)
            if tenth != shown:
                shown = tenth
                log(f"  {label}: {event.message} {event.done}/{event.total}")
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    run = EngineRun(
        label,
        workload.id,
        workload.task,
        list(done.tokens),
        wall - float(done.timing.get("prefill_s", 0.0)),
        cpu,
        done.stats,
        done.timing,
        passes,
        loadavg=load_now(),
    )
    return run


def load_now() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def compare(run: EngineRun, reference: list[int]) -> None:
    run.identical = run.tokens == reference
    if not run.identical:
        n = min(len(run.tokens), len(reference))
        run.first_mismatch = next((i for i in range(n) if run.tokens[i] != reference[i]), n)


# ---------------------------------------------------------------- verify cost c(n)


def verify_cost_curve(loaded, prefix_tokens: list[int], ns: list[int], repeats: int) -> dict:
    """c(n) after a realistic prefix, timed as the engine times it (``verify_cost.timing_steps``)."""
    target = Target(loaded.model)
    prefix = prefix_tokens[: -max(ns)]
    probe = prefix_tokens[len(prefix) :]
    target.prefill(prefix)
    samples: dict[int, list[float]] = {}
    for _, _, samples in timing_steps(target, ns, repeats, tokens=probe):
        pass
    median = {n: statistics.median(v) for n, v in samples.items()}
    c1 = median[ns[0]]
    return {
        "prefix_tokens": len(prefix),
        "repeats": repeats,
        "median_s": {str(n): round(median[n], 5) for n in ns},
        "min_s": {str(n): round(min(samples[n]), 5) for n in ns},
        "ratio": {str(n): round(median[n] / c1, 4) for n in ns},
        "ratio_min": {str(n): round(min(samples[n]) / min(samples[ns[0]]), 4) for n in ns},
    }
