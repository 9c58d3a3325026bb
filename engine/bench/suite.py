"""The benchmark suite: drafters against plain decoding, greedy, with peers in the same run.

What one run does, in order:
1. loads the model and warms it up;
2. measures the verify-cost curve c(n)/c(1): the wall time of one forward pass of n tokens
   after a realistic prefix (median of several interleaved repeats), as the loop runs it;
3. for each chat (a workload: one or more user turns) of the chosen split (``check``: the
   report's prompts; ``tuning``: the prompts the defaults were tuned on):
   a. a reference run: plain greedy decoding, turn by turn in one ChatSession, each later
      turn asked after the model's own answer; its tokens are what every run must equal;
   b. ``repeats`` rounds; in each, every config runs the whole chat in its own
      ChatSession (KV cache and drafter state kept across turns, as the app runs a chat),
      configs in an order rotated per chat and round: ``none`` (plain, our loop), each
      drafter, the ``oracle`` (handed the reference answer: the limit), mlx-lm's plain
      ``stream_generate``. An ``edit-memory`` chat first teaches each drafter's cross-chat
      memory the chat it follows (a fresh memory per run, so no run sees another's);
4. the Hugging Face prompt-lookup peer and llama.cpp's n-gram modes, each against its own
   plain decoding, on the same turns (their full prompts as token ids), ``repeats`` rounds;
5. speed-up against draft count for the best drafters on one prompt per task;
6. writes ``results.json`` (every run, the figures of ``aggregate.py``), then the report and
   plots (``report.py``), which read nothing but that file's content.

The suite keeps one ``EngineMemory`` for the whole run, as the app's service does: every
chat shares the measured cost curve and the acceptance memory.
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
import tempfile
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
from . import llamacpp, peers, report
from .aggregate import aggregate
from .scratch import FolderStores, private_data_dir
from .oracle import ORACLE, OracleDrafter, OracleSession, best_fixed_count
from .workloads import TASK_ORDER, Workload, predecessor, select_workloads

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
                    "blas": _blas.loaded_blas or "mlx's bundled BLAS",
                    "row_gemv": bool(_blas.row_gemv)},
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
    repeat: int = 0
    chat: str = ""  # the workload (chat) this turn belongs to

    def record(self) -> dict:
        out = {"config": self.config, "workload": self.workload, "task": self.task,
               "chat": self.chat or self.workload, "repeat": self.repeat,
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


def draft_settings(name: str, cfg: BenchConfig, draft_count: int | None = None,
                   adaptive: bool | None = None, cross_chat: bool = False) -> DraftSettings:
    """The engine's defaults but for the suite's counts; ``adaptive`` None: cfg.adaptive.
    Without ``cross_chat`` a drafter gets its measurement options (no memory from other
    chats); with it, the app's own options."""
    return DraftSettings(drafter=name, draft_count=draft_count or cfg.draft_count,
                         ngram_order=cfg.ngram_order, ngram_min=cfg.ngram_min,
                         adaptive=cfg.adaptive if adaptive is None else adaptive,
                         options={} if cross_chat else measurement_options(name))


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


def _load() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


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
        self.workloads: list[Workload] = []
        self.provenance = []
        self.skipped: list[str] = []
        self.failures: list[str] = []  # ours: any makes the run fail
        # a peer's speculative output that differs from its own plain run: a finding about the
        # peer (reported, not a failure of this run)
        self.peer_differences: list[str] = []
        self.hf: dict = {}
        self.llama_cpp: dict = {}
        self.chat_messages: dict[str, list[list[dict]]] = {}  # chat -> messages of each turn
        self.configs: list[str] = []
        self.oracle_count = 0
        self.default_drafter: str | None = None
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
        if self.cfg.drafters is None:
            chosen = QUICK_DRAFTERS if self.cfg.quick else COMPARED_DRAFTERS
            names = [n for n in names if n in chosen or n == DEFAULT_DRAFTER]
            names.sort(key=lambda n: n != DEFAULT_DRAFTER)
        elif self.cfg.drafters != ["all"]:
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

    # -- one chat, every config, interleaved rounds

    def turn_messages(self, workload: Workload, answers: list[str]) -> list[list[dict]]:
        """The messages of each turn, later turns after the given (reference) answers."""
        messages = list(workload.messages)
        out = [messages]
        for answer, follow_up in zip(answers, workload.turns):
            messages = messages + [{"role": "assistant", "content": answer},
                                   {"role": "user", "content": follow_up}]
            out.append(messages)
        return out

    def reference_chat(self, workload: Workload) -> list[EngineRun]:
        """Plain greedy decoding of every turn in one session: the reference (untimed use)."""
        session = ChatSession(self.loaded, self.memory)
        runs, answers = [], []
        for turn, turn_id in enumerate(workload.turn_ids()):
            messages = self.turn_messages(workload, answers)[turn]
            run = run_engine(session, workload, messages, draft_settings("none", self.cfg),
                             self.cfg.max_tokens, "reference")
            run.workload, run.chat = turn_id, workload.id
            runs.append(run)
            answers.append(self.loaded.tokenizer.decode(run.tokens))
        return runs

    def teach_cross_chat(self, name: str, earlier: Workload, stores) -> None:
        """Give a drafter's cross-chat memory the chat ``earlier``, as if the user had had it:
        its reference answers go through the drafter protocol (reset, observe), no model."""
        from ..drafters import make_drafter

        drafter = make_drafter(draft_settings(name, self.cfg, cross_chat=True).validated())
        drafter.attach_model(model_key(self.loaded), stores=stores)
        for turn_id, messages in zip(earlier.turn_ids(), self.chat_messages[earlier.id]):
            request = GenerationRequest(messages=messages).validated()
            drafter.reset(prompt_tokens(self.loaded, request))
            drafter.observe(self.reference[turn_id])
        drafter.flush()

    def chat_session(self, config: str, workload: Workload):
        """A fresh session for one config's run of a chat (and its drafter settings)."""
        cfg = self.cfg
        if config == ORACLE:
            oracle = OracleDrafter()
            return OracleSession(self.loaded, self.memory, oracle), \
                draft_settings("none", cfg, self.oracle_count, adaptive=False)
        earlier = predecessor(workload)
        if earlier is None or not measurement_options(config):
            return ChatSession(self.loaded, self.memory), draft_settings(config, cfg)
        # cross-chat memory: a fresh store in a fresh folder, taught the earlier chat
        stores = FolderStores(tempfile.mkdtemp(prefix="memory-", dir=self.scratch))
        self.teach_cross_chat(config, earlier, stores)
        memory = EngineMemory(adaptive=self.memory.adaptive, stores=stores)
        return ChatSession(self.loaded, memory), draft_settings(config, cfg, cross_chat=True)

    def run_chat_config(self, workload: Workload, config: str, repeat: int) -> list[EngineRun]:
        cfg = self.cfg
        turn_ids = workload.turn_ids()
        runs = []
        if config == "mlx-lm":
            for turn_id, messages in zip(turn_ids, self.chat_messages[workload.id]):
                tokens = prompt_tokens(self.loaded, GenerationRequest(messages=messages).validated())
                plain = peers.mlx_lm_greedy(self.loaded, tokens, cfg.max_tokens)
                runs.append(EngineRun("mlx-lm", turn_id, workload.task, plain.tokens,
                                      plain.decode_wall_s, plain.cpu_s, loadavg=_load(),
                                      repeat=repeat, chat=workload.id))
            return runs
        session, settings = self.chat_session(config, workload)
        for turn_id, messages in zip(turn_ids, self.chat_messages[workload.id]):
            if config == ORACLE:
                session.oracle.expect(self.reference[turn_id])
            run = run_engine(session, workload, messages, settings, cfg.max_tokens, config)
            run.workload, run.chat, run.repeat = turn_id, workload.id, repeat
            runs.append(run)
        return runs

    def run_chat(self, workload: Workload, configs: list[str], index: int, total: int) -> None:
        cfg = self.cfg
        earlier = predecessor(workload)
        if earlier is not None and earlier.id not in self.chat_messages:
            self.reference_only(earlier)  # the chat it follows, for its cross-chat memory
        reference = self.reference_chat(workload)
        answers = [self.loaded.tokenizer.decode(r.tokens) for r in reference]
        self.chat_messages[workload.id] = self.turn_messages(workload, answers)
        for run in reference:
            self.reference[run.workload] = run.tokens
        lengths = ", ".join(str(len(r.tokens)) for r in reference)
        log(f"[{self.elapsed()}] ({index}/{total}) {workload.task}/{workload.id}: "
            f"{len(reference)} turn(s) of {lengths} tokens; load {_load():.2f}")
        for repeat in range(cfg.repeats):
            shift = (index + repeat) % len(configs)
            for config in configs[shift:] + configs[:shift]:
                try:
                    runs = self.run_chat_config(workload, config, repeat)
                except Exception as error:  # a drafter that crashes is a failure, not a skip
                    message = f"{workload.task}/{workload.id} {config}: {type(error).__name__}: {error}"
                    self.failures.append(message)
                    log(f"  FAILED {message}")
                    continue
                for run in runs:
                    compare(run, self.reference[run.workload])
                    if not run.identical:
                        self.failures.append(
                            f"{workload.task}/{run.workload} {config} (round {repeat + 1}): output "
                            f"differs from plain greedy at token {run.first_mismatch}")
                self.runs += runs
                wall = sum(r.decode_wall_s for r in runs)
                tokens = sum(len(r.tokens) for r in runs)
                passes = sum(r.stats["passes"] for r in runs if r.stats) or None
                log(f"  round {repeat + 1} {config:14} {tokens / wall:6.1f} tok/s"
                    + (f" {tokens / passes:.2f} tok/pass" if passes else "")
                    + ("" if all(r.identical for r in runs) else "  MISMATCH"))

    def reference_only(self, workload: Workload) -> None:
        reference = self.reference_chat(workload)
        answers = [self.loaded.tokenizer.decode(r.tokens) for r in reference]
        self.chat_messages[workload.id] = self.turn_messages(workload, answers)
        for run in reference:
            self.reference[run.workload] = run.tokens

    def run_main(self):
        configs = ["none"] + list(self.drafters)
        if self.cfg.oracle:
            self.oracle_count = best_fixed_count(self.verify["ratio"])
            configs.append(ORACLE)
        configs.append("mlx-lm")
        self.configs = configs
        turns = sum(len(w.turn_ids()) for w in self.workloads)
        log(f"[{self.elapsed()}] {len(self.workloads)} chats ({turns} answers) x {self.cfg.repeats} "
            f"rounds x ({', '.join(configs)}), up to {self.cfg.max_tokens} tokens each"
            + (f"; oracle drafts {self.oracle_count} per pass" if self.cfg.oracle else ""))
        for index, workload in enumerate(self.workloads, 1):
            self.run_chat(workload, configs, index, len(self.workloads))

    # -- peers, each against its own plain decoding

    def peer_jobs(self, tasks: list[str], chats_per_task: int) -> list[dict]:
        """Every turn of the first chats of each task: full prompt token ids."""
        per_task: dict[str, int] = {}
        jobs = []
        for workload in self.workloads:
            if workload.task not in tasks or workload.id not in self.chat_messages:
                continue
            if per_task.get(workload.task, 0) >= chats_per_task:
                continue
            per_task[workload.task] = per_task.get(workload.task, 0) + 1
            for turn_id, messages in zip(workload.turn_ids(), self.chat_messages[workload.id]):
                jobs.append({"id": turn_id, "task": workload.task, "tokens": prompt_tokens(
                    self.loaded, GenerationRequest(messages=messages).validated())})
        return jobs

    def run_hf_peer(self):
        cfg = self.cfg
        status = peers.hf_status()
        if status:
            self.hf = {"status": status}
            log(f"[{self.elapsed()}] Hugging Face prompt lookup {status}")
            return
        jobs = self.peer_jobs(cfg.hf_tasks, cfg.hf_prompts_per_task)
        log(f"[{self.elapsed()}] Hugging Face transformers prompt lookup (torch CPU, same weights, "
            f"child process): {len(jobs)} answers x {cfg.repeats} rounds")
        try:
            result = peers.run_hf_jobs(self.loaded.path, [{"id": j["id"], "tokens": j["tokens"]}
                                                          for j in jobs],
                                       cfg.max_tokens, cfg.hf_lookup, repeats=cfg.repeats)
        except Exception as error:
            self.hf = {"status": f"skipped: transformers could not run on {self.loaded.path} "
                                 f"({type(error).__name__}: {error})"}
            log(f"  {self.hf['status']}")
            return
        task_of = {j["id"]: j["task"] for j in jobs}
        rows = []
        for item in result["rows"]:
            plain = [peers.HFRun(**p) for p in item["plain"]]
            lookup = [peers.HFRun(**p) for p in item["lookup"]]
            identical = all(r.tokens == plain[0].tokens for r in plain + lookup)
            rows.append({"workload": item["id"], "task": task_of[item["id"]],
                         "plain_decode_s": [round(r.decode_s, 4) for r in plain],
                         "decode_s": [round(r.decode_s, 4) for r in lookup],
                         "new_tokens": lookup[0].new_tokens, "calls": lookup[0].calls,
                         "plain_calls": plain[0].calls,
                         "tokens_per_call": round(lookup[0].tokens_per_call, 4),
                         "identical_to_own_plain": identical,
                         "plain_equals_our_plain": plain[0].tokens == self.reference.get(item["id"]),
                         "loadavg_1min": item.get("loadavg_1min")})
            if not identical:
                self.peer_differences.append(f"HF peer {item['id']}: prompt lookup output differs from "
                                     "transformers' own plain greedy output")
        self.hf = {"status": "ran", "versions": result["versions"], "threads": result.get("threads"),
                   "prompt_lookup_num_tokens": cfg.hf_lookup, "max_matching_ngram_size": 2,
                   "rows": rows}

    def run_llama_peer(self):
        cfg = self.cfg
        status = llamacpp.status()
        if status is None and self.loaded.name != "SmolLM2-135M-Instruct":
            status = "skipped: llama.cpp runs the embedded model's GGUF only"
        if status:
            self.llama_cpp = {"status": status}
            log(f"[{self.elapsed()}] llama.cpp n-gram modes {status}")
            return
        from ..models.embedded import find_embedded_gguf

        jobs = self.peer_jobs(cfg.hf_tasks, cfg.hf_prompts_per_task)
        log(f"[{self.elapsed()}] llama.cpp llama-server ({', '.join(llamacpp.SPEC_TYPES)} vs "
            f"none, Q4_1 GGUF): {len(jobs)} answers x {cfg.repeats} rounds")
        try:
            result = llamacpp.run_modes(llamacpp.server_binary(), find_embedded_gguf(),
                                        [{"id": j["id"], "tokens": j["tokens"]} for j in jobs],
                                        cfg.max_tokens, cfg.repeats, log=log)
        except Exception as error:
            self.llama_cpp = {"status": f"skipped: llama-server failed ({type(error).__name__}: "
                                        f"{error})"}
            log(f"  {self.llama_cpp['status']}")
            return
        task_of = {j["id"]: j["task"] for j in jobs}
        errors = [r for r in result["rows"] if "error" in r]
        for row in errors:
            self.skipped.append(f"llama.cpp {row['mode']} {row['id']} (round {row['repeat'] + 1}): "
                                f"{row['error']}")
        result["rows"] = [r for r in result["rows"] if "error" not in r]
        result["errors"] = errors
        plain: dict[str, list[int]] = {}
        for row in sorted(result["rows"], key=lambda r: r["repeat"]):
            if row["mode"] == "none":
                plain.setdefault(row["id"], row["tokens"])
        for row in result["rows"]:
            row["task"] = task_of[row["id"]]
            row["identical_to_own_plain"] = row["tokens"] == plain.get(row["id"])
            if not row["identical_to_own_plain"]:
                self.peer_differences.append(f"llama.cpp {row['mode']} {row['id']} (round "
                                     f"{row['repeat'] + 1}): output differs from llama.cpp's own "
                                     "plain greedy output")
            row["tokens"] = len(row["tokens"])
        self.llama_cpp = {"status": "ran", **result}

    # -- draft-count sweep

    def run_sweep(self, ranking: list[str]):
        cfg = self.cfg
        best = ranking[:cfg.sweep_drafters]
        if not best:
            return
        seen_tasks = set()
        chosen = []
        for workload in self.workloads:
            if workload.task not in seen_tasks and workload.id in self.reference \
                    and not workload.turns and workload.task in cfg.sweep_tasks:
                seen_tasks.add(workload.task)
                chosen.append(workload)
        log(f"[{self.elapsed()}] draft-count sweep: {', '.join(best)} x k = {cfg.sweep_counts}"
            f" + adaptive on {len(chosen)} prompts")
        for index, workload in enumerate(chosen, 1):
            session = ChatSession(self.loaded, self.memory)
            run_engine(session, workload, workload.messages, draft_settings("none", cfg),
                       cfg.max_tokens, "prime")
            base = run_engine(session, workload, workload.messages, draft_settings("none", cfg),
                              cfg.max_tokens, "none")
            compare(base, self.reference[workload.id])
            self.sweep_runs.append(base)
            configs = [(name, k, False) for name in best for k in cfg.sweep_counts]
            configs += [(name, max(cfg.sweep_counts), True) for name in best]
            shift = index % len(configs)
            configs = configs[shift:] + configs[:shift] + [("none", 0, False)]
            for name, k, adaptive in configs:
                if name == "none":  # the second baseline run, after all the others
                    again = run_engine(session, workload, workload.messages,
                                       draft_settings("none", cfg), cfg.max_tokens, "none")
                    again.repeat = 1  # the noise check; speed-ups pair with the first
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
            "peer_differences": self.peer_differences,
            "skipped": self.skipped,
            "provenance": [vars(p) for p in self.provenance],
            "format": 2,
            "workloads": [{"id": w.id, "task": w.task, "turns": w.turn_ids(), "role": w.role,
                           "split": w.split, "after": w.after, "source": w.source,
                           "reference_tokens": [len(self.reference.get(t, []))
                                                for t in w.turn_ids()]}
                          for w in self.workloads],
            "verify_cost": self.verify,
            "oracle_draft_count": self.oracle_count,
            "summary": aggregate(self),
            "hf_prompt_lookup": self.hf,
            "llama_cpp": self.llama_cpp,
            "runs": [r.record() for r in self.runs],
            "sweep_runs": [r.record() for r in self.sweep_runs],
            "plots": [],
        }

    def run(self) -> int:
        """The whole run in a private data folder (the user's cross-chat memory is never read:
        it would hold the identical greedy answers of earlier runs), removed at the end."""
        with private_data_dir() as scratch:
            self.scratch = scratch
            return self._run()

    def _run(self) -> int:
        cfg = self.cfg
        self.load()
        self.workloads, self.provenance = select_workloads(cfg.tasks, cfg.per_task,
                                                           cfg.mtbench_turns, cfg.split)
        for prov in self.provenance:
            if prov.source == "skipped":
                self.skipped.append(f"workload `{prov.task}` {prov.note}")
                log(f"  workload {prov.task} {prov.note}")
        if not self.workloads:
            raise EngineError("No workloads to run.")
        self.drafters = self.drafter_names()
        self.default_drafter = DEFAULT_DRAFTER if DEFAULT_DRAFTER in self.drafters else None
        self.warm_up()
        self.measure_verify_cost()
        self.run_main()
        summary = aggregate(self)
        if cfg.hf_peer:
            self.run_hf_peer()
        else:
            self.hf = {"status": "skipped: --no-peers"}
        if cfg.llama_peer:
            self.run_llama_peer()
        else:
            self.llama_cpp = {"status": "skipped: --no-peers"}
        if cfg.sweep:
            self.run_sweep(summary["ranking"])
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
        log("all of Draftless's greedy outputs identical to plain decoding"
            + (f"; {len(self.peer_differences)} peer answers differ from the peer's own plain run "
               "(see the report)" if self.peer_differences else ""))
        return 0
