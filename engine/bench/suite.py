"""The benchmark suite: drafters against plain decoding, in one process, greedy.

What one run does, in order:
1. loads the model and warms it up;
2. measures the verify-cost curve c(n)/c(1): the wall time of one forward pass of n tokens
   after a realistic prefix (median of several interleaved repeats), as the loop runs it
   (forward, then argmax of every row);
3. for each prompt, in one ChatSession (so the prompt is prefilled once and reused):
   ``none`` through our loop, every drafter (order rotated per prompt), mlx-lm's
   ``stream_generate``, and ``none`` again. The baseline time of the prompt is the median of
   its ``none`` runs; every run's greedy tokens are compared with the first ``none`` run;
4. the Hugging Face transformers prompt-lookup peer (plain vs lookup) on some prompts;
5. speed-up against draft count for the best drafters on one prompt per task;
6. writes ``results.json`` (every run, the figures of ``aggregate.py``), then the report and
   plots (``report.py``), which read nothing but that file's content.

The suite keeps one ``EngineMemory`` for the whole run, as the app's service does: every
chat session shares the measured cost curve and the acceptance memory.

Statistics are ``engine.stats.DecodeStats``: each run's own (from its DoneEvent) and, for
a task or the whole suite, one DecodeStats fed with every PassEvent of those runs.
Speed-up of a drafter on a set of prompts = sum of baseline decode wall times / sum of the
drafter's decode wall times (the outputs are identical, so this is the throughput ratio).
Decode wall time = the whole ``generate`` call's wall time minus its prefill time, so it
includes drafting, verifying, detokenizing and event overhead: what a user waits for.
"""

from __future__ import annotations

import json
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
from ..adaptive import timing_steps
from ..decode import Target
from ..drafters import DEFAULT_DRAFTER, DRAFTERS, measurement_options
from ..errors import EngineError
from ..events import DoneEvent, PassEvent, ProgressEvent
from ..memory import EngineMemory
from ..model_ngrams import model_key
from ..models import load_model
from ..session import ChatSession, prompt_tokens
from ..settings import DraftSettings, GenerationRequest
from . import peers, report
from .aggregate import aggregate
from .workloads import TASK_ORDER, Workload, select_workloads

QUICK_TASKS = ["code-edit", "rag", "open-question"]
# --quick runs a subset: these where registered (plus the engine's default drafter).
QUICK_DRAFTERS = ("prompt-lookup", "suffix", "ngram-simple", "frequency")
FULL_TASKS = list(TASK_ORDER)
VERIFY_NS = [1, 2, 3, 4, 5, 6, 8, 9, 12, 16, 17, 24, 32]
SWEEP_COUNTS = [1, 2, 4, 8]


@dataclass
class BenchConfig:
    out: Path
    model: str | None = None
    quick: bool = False
    drafters: list[str] | None = None  # None: every registered drafter
    max_tokens: int = 64
    draft_count: int = DraftSettings.draft_count
    ngram_order: int = DraftSettings.ngram_order
    ngram_min: int = DraftSettings.ngram_min
    tasks: list[str] = field(default_factory=lambda: list(FULL_TASKS))
    per_task: int = 1
    mtbench_turns: int = 2
    hf_peer: bool = True
    hf_prompts_per_task: int = 1
    hf_lookup: int = 0  # 0: the same as draft_count
    sweep: bool = True
    sweep_counts: list[int] = field(default_factory=lambda: list(SWEEP_COUNTS))
    sweep_drafters: int = 2
    verify_ns: list[int] = field(default_factory=lambda: list(VERIFY_NS))
    verify_repeats: int = 7
    verify_prefix: int = 384
    plots: bool = True
    adaptive: bool = DraftSettings.adaptive  # the engine's default
    sweep_tasks: list[str] = field(default_factory=lambda: ["code-edit", "rag"])
    hf_tasks: list[str] = field(default_factory=lambda: ["code-edit", "rag", "humaneval"])
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
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{rev}{' (with uncommitted changes)' if dirty else ''}" if rev else None


def environment(loaded) -> dict:
    params = sum(v.size for _, v in tree_flatten(loaded.model.parameters()))
    dtypes = sorted({str(v.dtype) for _, v in tree_flatten(loaded.model.parameters())})
    return {
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
                    "loadavg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
                    "blas": _blas.loaded_blas or "mlx's bundled BLAS"},
        "model": {"name": loaded.name, "path": str(loaded.path), "parameters": int(params),
                  "dtype": ", ".join(d.replace("mlx.core.", "") for d in dtypes),
                  "model_type": loaded.config.get("model_type"),
                  "speculation": loaded.speculation},
        "versions": {"python": platform.python_version(),
                     **{name: version_of(name) for name in ("mlx", "mlx-lm", "numpy", "torch",
                                                            "transformers", "matplotlib")}},
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
    passes: list[tuple[int, int, int, float]] = field(default_factory=list)  # drafted, accepted, emitted, s
    identical: bool | None = None
    first_mismatch: int | None = None
    loadavg: float | None = None
    error: str | None = None

    def record(self) -> dict:
        out = {"config": self.config, "workload": self.workload, "task": self.task,
               "emitted_tokens": len(self.tokens), "decode_wall_s": round(self.decode_wall_s, 4),
               "cpu_s": None if self.cpu_s is None else round(self.cpu_s, 4),
               "identical": self.identical, "first_mismatch": self.first_mismatch,
               "loadavg_1min": self.loadavg}
        if self.stats is not None:
            out["stats"] = self.stats
            out["timing"] = self.timing
        if self.error:
            out["error"] = self.error
        return out


ADAPTIVE_SUPPORTED = "adaptive" in DraftSettings.__dataclass_fields__


def draft_settings(name: str, cfg: BenchConfig, draft_count: int | None = None,
                   adaptive: bool | None = None) -> DraftSettings:
    """The engine's defaults but for the suite's counts; ``adaptive`` None: cfg.adaptive."""
    extra = {}
    if ADAPTIVE_SUPPORTED:
        extra["adaptive"] = cfg.adaptive if adaptive is None else adaptive
    extra["options"] = measurement_options(name)
    return DraftSettings(drafter=name, draft_count=draft_count or cfg.draft_count,
                         ngram_order=cfg.ngram_order, ngram_min=cfg.ngram_min, **extra)


def run_engine(session, workload: Workload, messages, draft: DraftSettings, max_tokens: int,
               label: str) -> EngineRun:
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
    run = EngineRun(label, workload.id, workload.task, list(done.tokens),
                    wall - float(done.timing.get("prefill_s", 0.0)), cpu, done.stats, done.timing,
                    passes, loadavg=os.getloadavg()[0] if hasattr(os, "getloadavg") else None)
    return run


def compare(run: EngineRun, reference: list[int]) -> None:
    run.identical = run.tokens == reference
    if not run.identical:
        n = min(len(run.tokens), len(reference))
        run.first_mismatch = next((i for i in range(n) if run.tokens[i] != reference[i]), n)


# ---------------------------------------------------------------- verify cost c(n)

def verify_cost_curve(loaded, prefix_tokens: list[int], ns: list[int], repeats: int) -> dict:
    """c(n) after a realistic prefix, timed as the engine times it (``adaptive.timing_steps``)."""
    target = Target(loaded.model)
    prefix = prefix_tokens[:-max(ns)]
    probe = prefix_tokens[len(prefix):]
    target.prefill(prefix)
    samples: dict[int, list[float]] = {}
    for _, _, samples in timing_steps(target, ns, repeats, tokens=probe):
        pass
    median = {n: statistics.median(v) for n, v in samples.items()}
    c1 = median[ns[0]]
    return {"prefix_tokens": len(prefix), "repeats": repeats,
            "median_s": {str(n): round(median[n], 5) for n in ns},
            "min_s": {str(n): round(min(samples[n]), 5) for n in ns},
            "ratio": {str(n): round(median[n] / c1, 4) for n in ns},
            "ratio_min": {str(n): round(min(samples[n]) / min(samples[ns[0]]), 4) for n in ns}}


# ---------------------------------------------------------------- the suite

class Suite:
    def __init__(self, cfg: BenchConfig):
        self.cfg = cfg
        self.runs: list[EngineRun] = []
        self.sweep_runs: list[EngineRun] = []
        self.reference: dict[str, list[int]] = {}
        self.baseline: dict[str, float] = {}  # workload -> median none decode wall
        self.baseline_spread: dict[str, float] = {}
        self.baseline_cpu: dict[str, float] = {}
        self.workloads: list[Workload] = []
        self.provenance = []
        self.skipped: list[str] = []
        self.failures: list[str] = []
        self.hf: dict = {}
        self.memory = EngineMemory()  # one for the run, as the app's service keeps one
        self.started = time.perf_counter()

    def elapsed(self) -> str:
        seconds = int(time.perf_counter() - self.started)
        return f"{seconds // 60:d}:{seconds % 60:02d}"

    # -- setup

    def load(self):
        def progress(done, total, message):
            log(f"  {message}")

        log(f"[{self.elapsed()}] loading model {self.cfg.model or '(embedded default)'}")
        self.loaded = load_model(self.cfg.model, progress)
        self.env = environment(self.loaded)

    def drafter_names(self) -> list[str]:
        names = [n for n in DRAFTERS if n != "none"]
        if self.cfg.drafters is None and self.cfg.quick:
            names = [n for n in names if n in QUICK_DRAFTERS or n == DEFAULT_DRAFTER]
        if self.cfg.drafters is not None:
            unknown = [n for n in self.cfg.drafters if n not in DRAFTERS]
            if unknown:
                raise EngineError(f"Unknown drafter(s) {', '.join(unknown)}. "
                                  f"Registered: {', '.join(DRAFTERS)}.")
            names = [n for n in self.cfg.drafters if n != "none"]
        usable = []
        for name in names:
            try:
                draft_settings(name, self.cfg).validated()
            except EngineError as error:
                self.skipped.append(f"drafter `{name}` skipped: {error}")
                log(f"  drafter {name} skipped: {error}")
                continue
            usable.append(name)
        return usable

    def warm_up(self):
        warm = Workload("warm-up", "warm-up", [{"role": "user", "content": "Say hello. Say hello."}], "")
        log(f"[{self.elapsed()}] warm-up (and any one-off drafter tables or calibration)")
        key = model_key(self.loaded)
        if self.cfg.adaptive and not self.memory.adaptive.measured(key):
            log("  measuring the verify cost the adaptive policy uses")
            target = Target(self.loaded.model)
            target.prefill(prompt_tokens(self.loaded, GenerationRequest(messages=warm.messages)))
            self.memory.adaptive.measure(key, target)
        for name in ["none"] + list(self.drafters):
            session = ChatSession(self.loaded, self.memory)
            try:
                run_engine(session, warm, warm.messages, draft_settings(name, self.cfg), 6, name)
            except Exception as error:  # reported when the drafter runs for real
                log(f"  warm-up {name}: {type(error).__name__}: {error}")

    # -- main measurements

    def measure_verify_cost(self):
        text = "\n\n".join(w.messages[-1]["content"] for w in self.workloads)
        request = GenerationRequest(messages=[{"role": "user", "content": text}]).validated()
        tokens = prompt_tokens(self.loaded, request)
        need = self.cfg.verify_prefix + max(self.cfg.verify_ns)
        while len(tokens) < need:
            tokens = tokens + tokens
        log(f"[{self.elapsed()}] verify cost c(n)/c(1): n = {self.cfg.verify_ns}, "
            f"{self.cfg.verify_repeats} repeats after a {self.cfg.verify_prefix}-token prefix")
        self.verify = verify_cost_curve(self.loaded, tokens[:need], self.cfg.verify_ns,
                                        self.cfg.verify_repeats)
        log("  " + "  ".join(f"c({n})={r:.2f}" for n, r in self.verify["ratio"].items()))

    def run_prompt(self, workload: Workload, drafters: list[str], index: int, total: int):
        cfg = self.cfg
        session = ChatSession(self.loaded, self.memory)
        tag = f"{workload.task}/{workload.id}"

        def do(label, settings):
            try:
                run = run_engine(session, workload, workload.messages, settings, cfg.max_tokens,
                                 label)
            except Exception as error:  # a drafter that crashes is a failure, not a skip
                message = f"{tag} {label}: {type(error).__name__}: {error}"
                self.failures.append(message)
                log(f"  FAILED {message}")
                return None
            self.runs.append(run)
            return run

        # untimed: prefill the prompt and decode once, so every timed run below reuses the
        # cached prompt and finds buffers and KV capacity already grown (measured: the first
        # decode after a prefill ran ~20% slower than the same decode repeated)
        run_engine(session, workload, workload.messages, draft_settings("none", cfg),
                   cfg.max_tokens, "prime")
        first = do("none", draft_settings("none", cfg))
        if first is None:
            return None
        reference = first.tokens
        self.reference[workload.id] = reference
        compare(first, reference)
        nones = [first]
        log(f"[{self.elapsed()}] ({index}/{total}) {tag}: none {len(reference)} tokens "
            f"{len(reference) / first.decode_wall_s:.1f} tok/s")
        shift = index % max(len(drafters), 1)
        for name in drafters[shift:] + drafters[:shift]:
            run = do(name, draft_settings(name, cfg))
            if run is None:
                continue
            compare(run, reference)
            flag = "identical" if run.identical else \
                f"MISMATCH at token {run.first_mismatch}"
            log(f"  {name:16} {run.stats['tokens_per_pass']:.2f} tok/pass "
                f"{run.stats['acceptance_rate']:.0%} accepted "
                f"{first.decode_wall_s / run.decode_wall_s:.2f}x  {flag}")
            if not run.identical:
                self.failures.append(f"{tag} {name}: output differs from plain greedy at token "
                                     f"{run.first_mismatch}")
        # mlx-lm's own plain decoding on the same prompt tokens
        tokens = prompt_tokens(self.loaded, GenerationRequest(messages=workload.messages).validated())
        try:
            plain = peers.mlx_lm_greedy(self.loaded, tokens, cfg.max_tokens)
            run = EngineRun("mlx-lm", workload.id, workload.task, plain.tokens, plain.decode_wall_s,
                            plain.cpu_s, loadavg=os.getloadavg()[0] if hasattr(os, "getloadavg") else None)
            compare(run, reference)
            self.runs.append(run)
            log(f"  {'mlx-lm':16} {len(plain.tokens) / plain.decode_wall_s:.1f} tok/s "
                f"{'identical' if run.identical else 'differs from our none (token ' + str(run.first_mismatch) + ')'}")
            if not run.identical:
                self.failures.append(f"{tag} mlx-lm stream_generate: output differs from our "
                                     f"plain loop at token {run.first_mismatch}")
        except Exception as error:
            self.failures.append(f"{tag} mlx-lm: {type(error).__name__}: {error}")
        last = do("none", draft_settings("none", cfg))
        if last is not None:
            compare(last, reference)
            nones.append(last)
            if not last.identical:
                self.failures.append(f"{tag} none: second plain run differs at token "
                                     f"{last.first_mismatch}")
        walls = [r.decode_wall_s for r in nones]
        self.baseline[workload.id] = statistics.median(walls)
        self.baseline_cpu[workload.id] = statistics.median(r.cpu_s for r in nones)
        self.baseline_spread[workload.id] = (max(walls) - min(walls)) / statistics.mean(walls)
        return session

    def run_main(self):
        cfg = self.cfg
        drafters = self.drafters
        queue = list(self.workloads)
        done = 0
        log(f"[{self.elapsed()}] {len(queue)} prompts (+ MT-Bench second turns) x "
            f"(none x2, {len(drafters)} drafters, mlx-lm), up to {cfg.max_tokens} tokens each")
        while queue:
            workload = queue.pop(0)
            done += 1
            self.run_prompt(workload, drafters, done, done + len(queue))
            if workload.follow_up and workload.id in self.reference:
                answer = self.loaded.tokenizer.decode(self.reference[workload.id])
                second = Workload(
                    workload.task, workload.id.replace("-t1", "-t2"),
                    workload.messages + [{"role": "assistant", "content": answer},
                                         {"role": "user", "content": workload.follow_up}],
                    workload.source, turn=2, meta=dict(workload.meta))
                self.workloads.insert(self.workloads.index(workload) + 1, second)
                queue.insert(0, second)

    # -- peers

    def run_hf_peer(self):
        cfg = self.cfg
        status = peers.hf_status()
        if status:
            self.hf = {"status": status}
            log(f"[{self.elapsed()}] Hugging Face prompt lookup {status}")
            return
        log(f"[{self.elapsed()}] Hugging Face transformers prompt lookup (torch CPU, same weights, "
            "child process)")
        lookup = cfg.hf_lookup or cfg.draft_count
        per_task: dict[str, int] = {}
        chosen = []
        for workload in self.workloads:
            if workload.id not in self.reference or workload.task not in cfg.hf_tasks:
                continue
            if per_task.get(workload.task, 0) < cfg.hf_prompts_per_task:
                per_task[workload.task] = per_task.get(workload.task, 0) + 1
                chosen.append(workload)
        jobs = [{"id": w.id, "tokens": prompt_tokens(self.loaded, GenerationRequest(
            messages=w.messages).validated())} for w in chosen]
        try:
            result = peers.run_hf_jobs(self.loaded.path, jobs, cfg.max_tokens, lookup)
        except Exception as error:
            self.hf = {"status": f"skipped: transformers could not run on {self.loaded.path} "
                                 f"({type(error).__name__}: {error})"}
            log(f"  {self.hf['status']}")
            return
        rows = []
        by_id = {w.id: w for w in chosen}
        for item in result["rows"]:
            workload = by_id[item["id"]]
            plain_a, plain_b = (peers.HFRun(**p) for p in item["plain"])
            pld = peers.HFRun(**item["lookup"])
            base = statistics.median([plain_a.decode_s, plain_b.decode_s])
            row = {"workload": workload.id, "task": workload.task,
                   "new_tokens": pld.new_tokens, "calls": pld.calls,
                   "plain_calls": plain_a.calls,
                   "tokens_per_call": round(pld.tokens_per_call, 4),
                   "plain_decode_s": round(base, 4), "lookup_decode_s": round(pld.decode_s, 4),
                   "speedup": round(base / pld.decode_s, 4) if pld.decode_s else None,
                   "identical_to_hf_plain": pld.tokens == plain_a.tokens,
                   "hf_plain_equals_our_plain": plain_a.tokens == self.reference[workload.id],
                   "plain_tok_s": round((plain_a.new_tokens - 1) / base, 2) if base else None}
            rows.append(row)
            log(f"  {workload.task}/{workload.id}: {row['tokens_per_call']:.2f} tok/call "
                f"{row['speedup']:.2f}x; HF plain {row['plain_tok_s']} tok/s; "
                f"{'identical' if row['identical_to_hf_plain'] else 'DIFFERS from HF plain'}")
            if not row["identical_to_hf_plain"]:
                self.failures.append(f"HF peer {workload.id}: prompt lookup output differs from "
                                     "transformers' own plain greedy output")
        self.hf = {"status": "ran", "versions": result["versions"],
                   "prompt_lookup_num_tokens": lookup, "max_matching_ngram_size": 2, "rows": rows}

    # -- draft-count sweep

    def run_sweep(self, ranking: list[str]):
        cfg = self.cfg
        best = ranking[:cfg.sweep_drafters]
        if not best:
            return
        supports_adaptive = ADAPTIVE_SUPPORTED
        seen_tasks = set()
        chosen = []
        for workload in self.workloads:
            if workload.task not in seen_tasks and workload.id in self.reference \
                    and workload.turn == 1 and workload.task in cfg.sweep_tasks:
                seen_tasks.add(workload.task)
                chosen.append(workload)
        log(f"[{self.elapsed()}] draft-count sweep: {', '.join(best)} x k = {cfg.sweep_counts}"
            f"{' + adaptive' if supports_adaptive else ''} on {len(chosen)} prompts")
        for index, workload in enumerate(chosen, 1):
            session = ChatSession(self.loaded, self.memory)
            run_engine(session, workload, workload.messages, draft_settings("none", cfg),
                       cfg.max_tokens, "prime")
            base = run_engine(session, workload, workload.messages, draft_settings("none", cfg),
                              cfg.max_tokens, "none")
            compare(base, self.reference[workload.id])
            self.sweep_runs.append(base)
            configs = [(name, k, False) for name in best for k in cfg.sweep_counts]
            if supports_adaptive:
                configs += [(name, max(cfg.sweep_counts), True) for name in best]
            shift = index % len(configs)
            configs = configs[shift:] + configs[:shift] + [("none", 0, False)]
            for name, k, adaptive in configs:
                if name == "none":  # the second baseline run, after all the others
                    again = run_engine(session, workload, workload.messages,
                                       draft_settings("none", cfg), cfg.max_tokens, "none")
                    compare(again, self.reference[workload.id])
                    self.sweep_runs.append(again)
                    continue
                label = f"{name}@{'adaptive' if adaptive else k}"
                try:
                    run = run_engine(session, workload, workload.messages,
                                     draft_settings(name, cfg, k, adaptive), cfg.max_tokens, label)
                except Exception as error:
                    self.failures.append(f"sweep {workload.id} {label}: {type(error).__name__}: {error}")
                    continue
                compare(run, self.reference[workload.id])
                if not run.identical:
                    self.failures.append(f"sweep {workload.id} {label}: output differs from plain "
                                         f"greedy at token {run.first_mismatch}")
                self.sweep_runs.append(run)
            log(f"  ({index}/{len(chosen)}) {workload.task}/{workload.id} done [{self.elapsed()}]")

    # -- everything

    def results(self) -> dict:
        """Everything the run measured, as JSON data: what the report renders from."""
        return {
            "environment": self.env,
            "command": self.cfg.command,
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(self.cfg).items()},
            "drafters": list(self.drafters),
            "failures": self.failures,
            "skipped": self.skipped,
            "provenance": [vars(p) for p in self.provenance],
            "workloads": [{"id": w.id, "task": w.task, "turn": w.turn, "role": w.role,
                           "source": w.source, "reference_tokens": len(self.reference.get(w.id, []))}
                          for w in self.workloads],
            "verify_cost": self.verify,
            "baseline_decode_wall_s": {k: round(v, 4) for k, v in self.baseline.items()},
            "baseline_spread": {k: round(v, 4) for k, v in self.baseline_spread.items()},
            "summary": aggregate(self),
            "hf_prompt_lookup": self.hf,
            "llama_cpp": self.llama_cpp,
            "runs": [r.record() for r in self.runs],
            "sweep_runs": [r.record() for r in self.sweep_runs],
            "plots": [],
        }

    def run(self) -> int:
        cfg = self.cfg
        self.load()
        self.workloads, self.provenance = select_workloads(cfg.tasks, cfg.per_task, cfg.mtbench_turns)
        for prov in self.provenance:
            if prov.source == "skipped":
                self.skipped.append(f"workload `{prov.task}` {prov.note}")
                log(f"  workload {prov.task} {prov.note}")
        if not self.workloads:
            raise EngineError("No workloads to run.")
        self.drafters = self.drafter_names()
        self.warm_up()
        self.measure_verify_cost()
        self.run_main()
        summary = aggregate(self)
        if cfg.hf_peer:
            self.run_hf_peer()
        else:
            self.hf = {"status": "skipped: --no-peers"}
        if cfg.sweep:
            self.run_sweep(summary["ranking"])
        llama = peers.llama_cpp_status()
        self.llama_cpp = llama or "available but not wired into this suite yet"
        self.env["machine"]["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
        self.env["total_s"] = round(time.perf_counter() - self.started, 1)
        results = self.results()
        out = Path(cfg.out)
        results["plots"] = report.render(results, out, plots=cfg.plots)
        (out / "results.json").write_text(json.dumps(results, indent=1))
        log(f"[{self.elapsed()}] report: {out / 'report.md'}")
        if self.failures:
            log("FAILED checks:")
            for failure in self.failures:
                log(f"  {failure}")
            return 3
        log("all greedy outputs identical to plain decoding")
        return 0
