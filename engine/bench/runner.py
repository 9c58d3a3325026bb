"""One engine run of the benchmark, and what every part of a run shares: its settings, the
machine's description, c(n) as the engine times it, mlx-lm's own plain decoding (so our loop's
overhead over it shows) and ``run_engine``, one generate call timed as a user waits for it:
the whole call's wall time minus its prefill, so drafting, verifying, detokenizing and event
overhead count.
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
from ..drafters import measurement_options
from ..events import DoneEvent, PassEvent, ProgressEvent
from ..loop.decode import Target
from ..policy.context_scale import CONTEXT_SHARES, SCALE_LENGTHS, scale_steps
from ..policy.verify_cost import pace_steps, timing_steps
from ..settings import DraftSettings, GenerationRequest
from .workloads import TASK_ORDER, Workload

QUICK_TASKS = ["code-edit", "edit-session", "rag", "open-question"]
# Without --drafters: these and the engine's default drafter (--drafters all: every one).
COMPARED_DRAFTERS = ("ngram-cache", "prompt-lookup", "suffix")
QUICK_DRAFTERS = ("prompt-lookup",)
VERIFY_NS = [1, 2, 3, 4, 5, 6, 8, 9, 12, 16, 17, 24, 32, 48]


@dataclass
class BenchConfig:
    out: Path
    model: str | None = None
    quick: bool = False
    drafters: list[str] | None = None  # None: the compared drafters and the default
    max_tokens: int = 512  # answers run to their end unless longer
    repeats: int = 3  # interleaved rounds per chat and config
    split: str = "check"  # "check": the report's prompts; "tuning": the tuning set
    conversations: str | None = None  # a conversations file's chats instead of the split's
    draft_count: int = DraftSettings.draft_count
    ngram_order: int = DraftSettings.ngram_order
    ngram_min: int = DraftSettings.ngram_min
    adaptive: bool = DraftSettings.adaptive
    tasks: list[str] = field(default_factory=lambda: list(TASK_ORDER))
    per_task: int = 2
    verify_ns: list[int] = field(default_factory=lambda: list(VERIFY_NS))
    verify_repeats: int = 7
    verify_between: int = 2  # more samples after each chat (of the c(n) it is priced on)
    verify_prefix: int = 384
    oracle: bool = True
    mlx_lm: bool = True  # mlx-lm's own plain decoding, as a config
    command: str = ""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_averages() -> list[float] | None:
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def load_now() -> float | None:
    return (load_averages() or [None])[0]


def cpu_model() -> str:
    info = Path("/proc/cpuinfo")
    lines = info.read_text(errors="replace").splitlines() if info.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def git_revision() -> str | None:
    def git(*args: str) -> str:
        root = Path(__file__).resolve().parents[2]
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
        return done.stdout.strip()

    try:
        rev, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "-uno")
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{rev}{' (with uncommitted changes)' if dirty else ''}" if rev else None


def environment(loaded) -> dict:
    weights = [v for _, v in tree_flatten(loaded.model.parameters())]
    dtypes = sorted({str(v.dtype).replace("mlx.core.", "") for v in weights})
    versions = {name: metadata.version(name) for name in ("mlx", "mlx-lm", "numpy")}
    return {
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "machine": {
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg_start": load_averages(),
            "blas": _blas.loaded_blas or "mlx's bundled BLAS",
            "row_gemv": bool(_blas.row_gemv),
        },
        "model": {
            "name": loaded.name,
            "path": str(loaded.path),
            "parameters": int(sum(v.size for v in weights)),
            "dtype": ", ".join(dtypes),
            "model_type": loaded.config.get("model_type"),
            "speculation": loaded.speculation,
        },
        "versions": {"python": platform.python_version(), **versions},
        "git": git_revision(),
    }


@dataclass
class EngineRun:
    config: str  # drafter name, "mlx-lm" or "oracle"
    workload: str  # the answer (turn) id
    task: str
    tokens: list[int]
    decode_wall_s: float
    cpu_s: float | None = None  # this process's CPU time (all threads) for the whole call
    stats: dict | None = None  # DecodeStats.to_dict() from the DoneEvent
    timing: dict | None = None
    # each pass: (drafted, accepted, emitted, seconds)
    passes: list[tuple[int, int, int, float]] = field(default_factory=list)
    identical: bool | None = None
    first_mismatch: int | None = None
    loadavg: float | None = None
    repeat: int = 0
    chat: str = ""  # the workload (chat) this turn belongs to

    def record(self) -> dict:
        """The run as ``results.json`` keeps it (its tokens counted, not listed)."""
        kept = ("config", "workload", "task", "repeat", "identical", "first_mismatch")
        out = {k: getattr(self, k) for k in kept} | {"chat": self.chat or self.workload}
        out |= {"emitted_tokens": len(self.tokens), "decode_wall_s": round(self.decode_wall_s, 4)}
        out |= {"cpu_s": self.cpu_s and round(self.cpu_s, 4), "loadavg_1min": self.loadavg}
        out |= {"pass_seconds": [round(p[3], 5) for p in self.passes]} if self.passes else {}
        return out | ({"stats": self.stats, "timing": self.timing} if self.stats else {})


def draft_settings(
    name: str, cfg: BenchConfig, draft_count: int | None = None, cross_chat: bool = False
) -> DraftSettings:
    """The suite's counts for drafter ``name``; a given ``draft_count`` is drafted every pass
    (no adaptive policy). ``cross_chat``: the app's own options, else the measurement ones."""
    return DraftSettings(
        drafter=name,
        draft_count=draft_count or cfg.draft_count,
        ngram_order=cfg.ngram_order,
        ngram_min=cfg.ngram_min,
        adaptive=cfg.adaptive and draft_count is None,
        options={} if cross_chat else measurement_options(name),
    )


def run_engine(
    session, workload: Workload, messages, draft: DraftSettings, max_tokens: int, label: str
) -> EngineRun:
    request = GenerationRequest(
        messages=messages, max_tokens=max_tokens, draft=draft, json_schema=workload.schema
    ).validated()
    passes, done, shown = [], None, -1
    cpu_started, started = time.process_time(), time.perf_counter()
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
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    decode = wall - float(done.timing.get("prefill_s", 0.0))
    run = EngineRun(label, workload.id, workload.task, list(done.tokens), decode, cpu)
    run.stats, run.timing, run.passes, run.loadavg = done.stats, done.timing, passes, load_now()
    return run


def plain_chat(session, workload: Workload, cfg: BenchConfig):
    """Plain greedy decoding of every turn of a chat in one session, as the app runs it: the
    runs and each turn's messages, later turns asked after the model's own answers."""
    plain = draft_settings("none", cfg)
    runs, messages = [], [list(workload.messages)]
    for turn, turn_id in enumerate(workload.turn_ids()):
        run = run_engine(session, workload, messages[turn], plain, cfg.max_tokens, "reference")
        run.workload, run.chat = turn_id, workload.id
        runs.append(run)
        if turn < len(workload.turns):
            answer = {"role": "assistant", "content": session.loaded.tokenizer.decode(run.tokens)}
            follow_up = {"role": "user", "content": workload.turns[turn]}
            messages.append(messages[turn] + [answer, follow_up])
    return runs, messages


def compare(run: EngineRun, reference: list[int]) -> None:
    run.identical = run.tokens == reference
    if not run.identical:
        n = min(len(run.tokens), len(reference))
        run.first_mismatch = next((i for i in range(n) if run.tokens[i] != reference[i]), n)


class CurveTimer:
    """c(n) timed as the engine times it (``timing_steps``) after a realistic ``prefix`` of
    ``prefix_tokens`` (which hold at least ``context_tokens_needed`` of them), every sample
    kept: a run times some at its start (``verify_cost_curve``) and more between its chats
    (``time``), so the curve it prices with (``curve``) is the machine's over the whole run,
    not over one window of a few seconds (back to back, 7-sample curves of this CPU differed
    by up to 15% at a length: c(32) 2.81-3.74 c(1))."""

    def __init__(self, loaded, prefix_tokens: list[int], ns: list[int], prefix: int):
        self.loaded, self.prefix_tokens, self.ns, self.prefix = loaded, prefix_tokens, ns, prefix
        self.target = Target(loaded.model)
        self.probe = prefix_tokens[-max(ns) :]
        self.target.prefill(prefix_tokens[:prefix])
        self.samples: dict[int, list[float]] = {n: [] for n in ns}

    def time(self, repeats: int, warm: bool = False, longest: int | None = None) -> None:
        """``repeats`` more samples of every length (``warm``: each shape run once first);
        ``longest``: only of the lengths a pass of that many tokens is priced on (those up to
        the first timed length at or past it), so a run that drafts little pays little (at 4
        bits on this CPU a sample of every length takes about a minute)."""
        if repeats < 1:
            return
        ns = self.ns
        if longest is not None:
            bound = min([n for n in ns if n >= longest] or [max(ns)])
            ns = [n for n in ns if n <= bound]
        steps = timing_steps(self.target, ns, repeats, tokens=self.probe, warm=warm)
        for _, _, samples in steps:
            pass
        for n, seconds in samples.items():
            self.samples[n] += seconds

    def curve(self) -> dict:
        """Every sample so far: the median and least seconds per length, and over c(1)."""
        ns = self.ns
        median = {n: statistics.median(self.samples[n]) for n in ns}
        least = {n: min(self.samples[n]) for n in ns}
        return {
            "repeats": len(self.samples[ns[0]]),
            "median_s": {str(n): round(median[n], 5) for n in ns},
            "min_s": {str(n): round(least[n], 5) for n in ns},
            "ratio": {str(n): round(median[n] / median[ns[0]], 4) for n in ns},
            "ratio_min": {str(n): round(least[n] / least[ns[0]], 4) for n in ns},
        }


def verify_cost_curve(timer: CurveTimer, repeats: int) -> dict:
    """c(n) from ``repeats`` samples of ``timer`` (its first), a queued one-token pass's share
    of c(1) there (``pace_steps``) and c(n) at shorter and longer contexts as a share of it
    (``context_scale.scale_steps``)."""
    timer.time(repeats, warm=True)
    share = _value(pace_steps(timer.target))
    prefix, probe = timer.prefix, timer.probe
    targets = {prefix: timer.target}
    for context in scale_contexts(prefix):
        if context != prefix:
            targets[context] = Target(timer.loaded.model)
            targets[context].prefill(timer.prefix_tokens[:context])
    lengths = [n for n in SCALE_LENGTHS if n <= max(timer.ns)] or [max(timer.ns)]
    scale = _value(scale_steps(targets, prefix, probe, lengths))
    return {
        "prefix_tokens": prefix,
        **timer.curve(),
        "pipelined_share": None if share is None else round(share, 4),
        "context_scale": scale.to_dict(),
    }


def scale_contexts(prefix: int) -> list[int]:
    """The contexts c(n) is timed at beside ``prefix`` (``context_scale.CONTEXT_SHARES``)."""
    return [max(1, round(prefix * share)) for share in CONTEXT_SHARES]


def context_tokens_needed(prefix: int, ns) -> int:
    """Tokens ``verify_cost_curve`` reads: the longest context timed, then its passes'."""
    return max(scale_contexts(prefix)) + max(ns)


def _value(steps):
    """Run a generator of steps to its end; its return value."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def mlx_lm_greedy(loaded, prompt: list[int], max_tokens: int) -> tuple[list[int], float, float]:
    """mlx-lm's own ``stream_generate``, greedy, after the same prefill as our loop:
    (tokens, decode seconds, CPU seconds). The prompt but its last token is prefilled into a
    fresh cache (not timed), so the timed part is the work our loop's decode time covers."""
    import mlx.core as mx
    from mlx_lm import stream_generate

    target = Target(loaded.model)
    target.prefill(prompt[:-1])
    tokens: list[int] = []
    cpu_started, started = time.process_time(), time.perf_counter()
    last = mx.array(prompt[-1:], dtype=mx.uint32)
    for response in stream_generate(
        loaded.model, loaded.tokenizer, last, max_tokens=max_tokens, prompt_cache=target.cache
    ):
        if response.finish_reason == "stop":
            break  # the end-of-sequence token: our loop does not list it either
        tokens.append(int(response.token))
    return tokens, time.perf_counter() - started, time.process_time() - cpu_started
