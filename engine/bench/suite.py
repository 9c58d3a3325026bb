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

One engine run and the run's settings: ``runner.py``; the peers (each a ``peers.Peer``):
``peers.py`` and ``llamacpp.py``; the draft-count sweep: ``sweep.py``.

The suite keeps one ``EngineMemory`` for the whole run, as the app's service does: every
chat shares the measured cost curve and the acceptance memory.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from ..decode import Target
from ..drafters import DEFAULT_DRAFTER, DRAFTERS, measurement_options
from ..errors import EngineError
from ..memory import EngineMemory
from ..model_ngrams import model_key
from ..models import load_model
from ..session import ChatSession, prompt_tokens
from ..settings import GenerationRequest
from . import llamacpp, peers, report
from .aggregate import aggregate
from .oracle import ORACLE, OracleDrafter, OracleSession, best_fixed_count
from .runner import (
    COMPARED_DRAFTERS,
    QUICK_DRAFTERS,
    QUICK_TASKS,
    BenchConfig,
    EngineRun,
    compare,
    draft_settings,
    environment,
    load_now,
    log,
    run_engine,
    verify_cost_curve,
)
from .scratch import FolderStores, scratch_memory
from .sweep import draft_count_sweep
from .workloads import Workload, predecessor, select_workloads

__all__ = ["QUICK_TASKS", "BenchConfig", "Suite"]


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
        self.peer_results: dict[str, dict] = {}  # results.json key -> the peer's entry
        self.chat_messages: dict[str, list[list[dict]]] = {}  # chat -> messages of each turn
        self.configs: list[str] = []
        self.oracle_count = 0
        self.default_drafter: str | None = None
        self.memory = scratch_memory()  # one for the run, as the app's service keeps one
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
                raise EngineError(
                    f"Unknown drafter(s) {', '.join(unknown)}. Registered: {', '.join(DRAFTERS)}."
                )
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
        warm = Workload(
            "warm-up", "warm-up", [{"role": "user", "content": "Say hello. Say hello."}], ""
        )
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
        log(
            f"[{self.elapsed()}] verify cost c(n)/c(1): n = {self.cfg.verify_ns}, "
            f"{self.cfg.verify_repeats} repeats after a {self.cfg.verify_prefix}-token prefix"
        )
        self.verify = verify_cost_curve(
            self.loaded, tokens[:need], self.cfg.verify_ns, self.cfg.verify_repeats
        )
        log("  " + "  ".join(f"c({n})={r:.2f}" for n, r in self.verify["ratio"].items()))

    # -- one chat, every config, interleaved rounds

    def turn_messages(self, workload: Workload, answers: list[str]) -> list[list[dict]]:
        """The messages of each turn, later turns after the given (reference) answers."""
        messages = list(workload.messages)
        out = [messages]
        for answer, follow_up in zip(answers, workload.turns):
            messages = messages + [
                {"role": "assistant", "content": answer},
                {"role": "user", "content": follow_up},
            ]
            out.append(messages)
        return out

    def reference_chat(self, workload: Workload) -> list[EngineRun]:
        """Plain greedy decoding of every turn in one session: the reference (untimed use)."""
        session = ChatSession(self.loaded, self.memory)
        runs, answers = [], []
        for turn, turn_id in enumerate(workload.turn_ids()):
            messages = self.turn_messages(workload, answers)[turn]
            run = run_engine(
                session,
                workload,
                messages,
                draft_settings("none", self.cfg),
                self.cfg.max_tokens,
                "reference",
            )
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
            return OracleSession(self.loaded, self.memory, oracle), draft_settings(
                "none", cfg, self.oracle_count, adaptive=False
            )
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
                tokens = prompt_tokens(
                    self.loaded, GenerationRequest(messages=messages).validated()
                )
                plain = peers.mlx_lm_greedy(self.loaded, tokens, cfg.max_tokens)
                runs.append(
                    EngineRun(
                        "mlx-lm",
                        turn_id,
                        workload.task,
                        plain.tokens,
                        plain.decode_wall_s,
                        plain.cpu_s,
                        loadavg=load_now(),
                        repeat=repeat,
                        chat=workload.id,
                    )
                )
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
        reference = self.reference_only(workload)
        lengths = ", ".join(str(len(r.tokens)) for r in reference)
        log(
            f"[{self.elapsed()}] ({index}/{total}) {workload.task}/{workload.id}: "
            f"{len(reference)} turn(s) of {lengths} tokens; load {load_now():.2f}"
        )
        for repeat in range(cfg.repeats):
            shift = (index + repeat) % len(configs)
            for config in configs[shift:] + configs[:shift]:
                try:
                    runs = self.run_chat_config(workload, config, repeat)
                except Exception as error:  # a drafter that crashes is a failure, not a skip
                    message = (
                        f"{workload.task}/{workload.id} {config}: {type(error).__name__}: {error}"
                    )
                    self.failures.append(message)
                    log(f"  FAILED {message}")
                    continue
                for run in runs:
                    compare(run, self.reference[run.workload])
                    if not run.identical:
                        self.failures.append(
                            f"{workload.task}/{run.workload} {config} (round {repeat + 1}): output "
                            f"differs from plain greedy at token {run.first_mismatch}"
                        )
                self.runs += runs
                wall = sum(r.decode_wall_s for r in runs)
                tokens = sum(len(r.tokens) for r in runs)
                passes = sum(r.stats["passes"] for r in runs if r.stats) or None
                log(
                    f"  round {repeat + 1} {config:14} {tokens / wall:6.1f} tok/s"
                    + (f" {tokens / passes:.2f} tok/pass" if passes else "")
                    + ("" if all(r.identical for r in runs) else "  MISMATCH")
                )

    def reference_only(self, workload: Workload) -> list[EngineRun]:
        """The chat's reference runs, kept: its tokens per turn and each turn's messages."""
        reference = self.reference_chat(workload)
        answers = [self.loaded.tokenizer.decode(r.tokens) for r in reference]
        self.chat_messages[workload.id] = self.turn_messages(workload, answers)
        for run in reference:
            self.reference[run.workload] = run.tokens
        return reference

    def run_main(self):
        configs = ["none"] + list(self.drafters)
        if self.cfg.oracle:
            self.oracle_count = best_fixed_count(self.verify["ratio"])
            configs.append(ORACLE)
        configs.append("mlx-lm")
        self.configs = configs
        turns = sum(len(w.turn_ids()) for w in self.workloads)
        log(
            f"[{self.elapsed()}] {len(self.workloads)} chats ({turns} answers) x {self.cfg.repeats} "
            f"rounds x ({', '.join(configs)}), up to {self.cfg.max_tokens} tokens each"
            + (f"; oracle drafts {self.oracle_count} per pass" if self.cfg.oracle else "")
        )
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
                jobs.append(
                    {
                        "id": turn_id,
                        "task": workload.task,
                        "tokens": prompt_tokens(
                            self.loaded, GenerationRequest(messages=messages).validated()
                        ),
                    }
                )
        return jobs

    def run_peers(self) -> None:
        cfg = self.cfg
        jobs = None
        for peer, wanted in (
            (peers.HFPeer(cfg.hf_lookup), cfg.hf_peer),
            (llamacpp.LlamaCppPeer(), cfg.llama_peer),
        ):
            if not wanted:
                self.peer_results[peer.key] = {"status": "skipped: --no-peers"}
                continue
            if jobs is None:
                jobs = self.peer_jobs(cfg.hf_tasks, cfg.hf_prompts_per_task)
            log(f"[{self.elapsed()}] peer {peer.key}")
            entry, differences, skipped = peers.run_peer(
                peer, self.loaded, jobs, cfg.max_tokens, cfg.repeats, self.reference, log
            )
            self.peer_results[peer.key] = entry
            self.peer_differences += differences
            self.skipped += skipped

    # -- everything

    def results(self) -> dict:
        """Everything the run measured, as JSON data: what the report renders from."""
        return {
            "environment": self.env,
            "command": self.cfg.command,
            "settings": {
                k: (str(v) if isinstance(v, Path) else v) for k, v in vars(self.cfg).items()
            },
            "drafters": list(self.drafters),
            "failures": self.failures,
            "peer_differences": self.peer_differences,
            "skipped": self.skipped,
            "provenance": [vars(p) for p in self.provenance],
            "format": 2,
            "workloads": [
                {
                    "id": w.id,
                    "task": w.task,
                    "turns": w.turn_ids(),
                    "role": w.role,
                    "split": w.split,
                    "after": w.after,
                    "source": w.source,
                    "reference_tokens": [len(self.reference.get(t, [])) for t in w.turn_ids()],
                }
                for w in self.workloads
            ],
            "verify_cost": self.verify,
            "oracle_draft_count": self.oracle_count,
            "summary": aggregate(self),
            "hf_prompt_lookup": self.peer_results.get("hf_prompt_lookup", {}),
            "llama_cpp": self.peer_results.get("llama_cpp", {}),
            "runs": [r.record() for r in self.runs],
            "sweep_runs": [r.record() for r in self.sweep_runs],
            "plots": [],
        }

    def run(self) -> int:
        """The whole run with throw-away drafter memory (the user's cross-chat memory is never
        read: it would hold the identical greedy answers of earlier runs) and a scratch
        folder, removed at the end."""
        with tempfile.TemporaryDirectory(prefix="draftless-bench-") as scratch:
            self.scratch = Path(scratch)
            return self._run()

    def _run(self) -> int:
        cfg = self.cfg
        self.load()
        self.workloads, self.provenance = select_workloads(
            cfg.tasks, cfg.per_task, cfg.mtbench_turns, cfg.split
        )
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
        ranking = aggregate(self)["ranking"]
        self.run_peers()
        if cfg.sweep:
            self.sweep_runs = draft_count_sweep(self, ranking)
        self.env["machine"]["loadavg_end"] = (
            list(os.getloadavg()) if hasattr(os, "getloadavg") else None
        )
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
        log(
            "all of Draftless's greedy outputs identical to plain decoding"
            + (
                f"; {len(self.peer_differences)} peer answers differ from the peer's own plain run "
                "(see the report)"
                if self.peer_differences
                else ""
            )
        )
        return 0
