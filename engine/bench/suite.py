"""The benchmark suite: drafters against plain decoding, greedy, on this machine's clock.

One run measures the verify-cost curve c(n)/c(1) (the adaptive policy plans on it) and warms
every drafter up. Each chat (one or more user turns) of the chosen split (``check``: the
report's prompts; ``tuning``: the ones the defaults were tuned on) is first decoded plainly,
turn by turn, each later turn asked after the model's own answer: the reference every run must
equal, token for token. Then, in each of ``repeats`` rounds, every config (``none``: plain, our
loop; each drafter; the ``oracle``, handed the reference answer: the limit; mlx-lm's
``stream_generate``) runs the whole chat in its own ChatSession, as the app runs a chat, in an
order rotated per chat and round. The run writes ``results.json``; the report renders from it.

It is the wall-clock guard on this machine; peers are judged on named device curves
(``devices.py``). One ``EngineMemory`` serves the whole run, as in the app's service; the
user's cross-chat memory is never read (it would hold earlier runs' answers).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from ..drafters import DEFAULT_DRAFTER, DRAFTERS, make_drafter, measurement_options
from ..errors import EngineError
from ..runtime.memory import EngineMemory
from ..runtime.model_ngrams import model_key
from ..models import load_model
from ..runtime.session import ChatSession, prompt_tokens
from ..settings import GenerationRequest
from ..policy.context_scale import ContextScale
from ..policy.verify_cost import CostCurve, NamedCurve
from . import report
from .aggregate import aggregate
from .conversations import conversation_workloads
from .devices import strategies
from .oracle import ORACLE, OracleDrafter, OracleSession, best_fixed_count
from .runner import COMPARED_DRAFTERS, QUICK_DRAFTERS, QUICK_TASKS, BenchConfig, EngineRun
from .runner import compare, draft_settings, environment, load_averages, load_now, log
from .runner import (
    CurveTimer,
    context_tokens_needed,
    mlx_lm_greedy,
    plain_chat,
    run_engine,
    verify_cost_curve,
)
from .scratch import FolderStores, scratch_memory
from .tune import model_identity, plain_seconds, replay_turn, replays, schema_forced
from .workloads import Workload, predecessor, select_workloads

__all__ = ["QUICK_TASKS", "BenchConfig", "Suite"]


def _request(messages) -> GenerationRequest:
    return GenerationRequest(messages=messages).validated()


class Suite:
    def __init__(self, cfg: BenchConfig):
        self.cfg = cfg
        self.runs: list[EngineRun] = []
        self.reference: dict[str, list[int]] = {}  # answer id -> plain greedy tokens
        self.reference_runs: list[EngineRun] = []  # their runs (untimed use)
        self.chat_messages: dict[str, list[list[dict]]] = {}  # chat -> messages of each turn
        self.workloads: list[Workload] = []
        self.provenance = []
        self.skipped: list[str] = []
        self.failures: list[str] = []  # ours: any makes the run fail
        self.drafters: list[str] = []
        self.configs: list[str] = []
        self.oracle_count = 0
        self.default_drafter: str | None = None
        self.memory = scratch_memory()
        self.started = time.perf_counter()

    def elapsed(self) -> str:
        seconds = int(time.perf_counter() - self.started)
        return f"[{seconds // 60:d}:{seconds % 60:02d}]"

    def drafter_names(self) -> list[str]:
        """The drafters asked for (default: the compared ones, the default drafter first)."""
        compared = QUICK_DRAFTERS if self.cfg.quick else COMPARED_DRAFTERS
        names = self.cfg.drafters or [DEFAULT_DRAFTER] + [n for n in compared if n in DRAFTERS]
        names = list(DRAFTERS) if names == ["all"] else list(dict.fromkeys(names))
        if unknown := [n for n in names if n not in DRAFTERS]:
            raise EngineError(
                f"Unknown drafter(s) {', '.join(unknown)}. Registered: {', '.join(DRAFTERS)}."
            )
        usable = []
        for name in (n for n in names if n != "none"):
            try:
                draft_settings(name, self.cfg).validated()
                usable.append(name)
            except EngineError as error:
                self.skipped.append(f"drafter `{name}` skipped: {error}")
                log(f"  drafter {name} skipped: {error}")
        return usable

    def warm_up(self):
        messages = [{"role": "user", "content": "Say hello. Say hello."}]
        warm = Workload("warm-up", "warm-up", messages, "")
        log(f"{self.elapsed()} warm-up (and any one-off drafter tables)")
        for name in ["none"] + self.drafters:
            session = ChatSession(self.loaded, self.memory)
            try:
                run_engine(session, warm, messages, draft_settings(name, self.cfg), 6, name)
            except Exception as error:  # reported when the drafter runs for real
                log(f"  warm-up {name}: {type(error).__name__}: {error}")

    def measure_verify_cost(self):
        cfg = self.cfg
        text = "\n\n".join(w.messages[-1]["content"] for w in self.workloads)
        tokens = prompt_tokens(self.loaded, _request([{"role": "user", "content": text}]))
        need = context_tokens_needed(cfg.verify_prefix, cfg.verify_ns)
        while len(tokens) < need:
            tokens = tokens + tokens
        log(
            f"{self.elapsed()} verify cost c(n)/c(1): n = {cfg.verify_ns}, "
            f"{cfg.verify_repeats} repeats after a {cfg.verify_prefix}-token prefix"
        )
        self.curve_timer = CurveTimer(self.loaded, tokens[:need], cfg.verify_ns, cfg.verify_prefix)
        self.verify = verify_cost_curve(self.curve_timer, cfg.verify_repeats)
        log("  " + "  ".join(f"c({n})={r:.2f}" for n, r in self.verify["ratio"].items()))
        log(f"  a queued one-token pass: {self.verify['pipelined_share']} of c(1)")
        # the adaptive policy plans on this curve (kept in this process, never saved)
        seconds = {int(n): s for n, s in self.verify["median_s"].items()}
        curve = CostCurve(seconds, pipelined=self.verify["pipelined_share"])
        self.memory.adaptive.curves[model_key(self.loaded)] = curve

    def reference_chat(self, workload: Workload) -> tuple[list[EngineRun], list[list[dict]]]:
        """Plain greedy decoding of every turn in one session (untimed use), kept as the
        reference: the runs and each turn's messages, later turns after the answers before."""
        runs, messages = plain_chat(ChatSession(self.loaded, self.memory), workload, self.cfg)
        self.chat_messages[workload.id] = messages
        self.reference.update((run.workload, run.tokens) for run in runs)
        self.reference_runs += runs
        return runs, messages

    def loop_share(self) -> float | None:
        """Plain decoding's pace in the engine's own loop, as a share of c(1): the reference
        answers' decode time over c(1) at each token's context (``context_scale``). Unlike
        ``pace_steps``'s passes, these carry the loop's host work per token (reading the
        token, the events, the statistics), which on a CPU shares the cores with the passes.
        None without reference answers."""
        measured = self.measured_curve()
        curve = CostCurve(measured.seconds, context_scale=measured.context_scale)
        runs = [r for r in self.reference_runs if r.tokens and r.timing]
        priced = sum(plain_seconds(curve, r.timing["prompt_tokens"], len(r.tokens)) for r in runs)
        return round(sum(r.decode_wall_s for r in runs) / priced, 4) if priced else None

    def measured_curve(self) -> NamedCurve:
        """The verify cost measured in this run (``measure_verify_cost``) as a named curve."""
        scale = self.verify.get("context_scale")
        return NamedCurve(
            "measured",
            "this run's verify cost",
            {int(n): s for n, s in self.verify["median_s"].items()},
            pipelined_share=self.verify.get("pipelined_share"),
            context_scale=scale and ContextScale.from_dict(scale),
        )

    def teach_cross_chat(self, name: str, earlier: Workload, stores) -> None:
        """Give a drafter's cross-chat memory the chat ``earlier``, as if the user had had it:
        its reference answers go through the drafter protocol (reset, observe), no model."""
        drafter = make_drafter(draft_settings(name, self.cfg, cross_chat=True).validated())
        drafter.attach_model(model_key(self.loaded), stores=stores)
        for turn_id, messages in zip(earlier.turn_ids(), self.chat_messages[earlier.id]):
            drafter.reset(prompt_tokens(self.loaded, _request(messages)))
            drafter.observe(self.reference[turn_id])
        drafter.flush()

    def chat_session(self, config: str, workload: Workload):
        """A fresh session for one config's run of a chat, and its drafter settings."""
        if config == ORACLE:
            session = OracleSession(self.loaded, self.memory, OracleDrafter())
            return session, draft_settings("none", self.cfg, self.oracle_count)
        earlier = predecessor(workload)
        if earlier is None or not measurement_options(config):
            return ChatSession(self.loaded, self.memory), draft_settings(config, self.cfg)
        # cross-chat memory: a fresh store in a fresh folder, taught the earlier chat
        stores = FolderStores(tempfile.mkdtemp(prefix="memory-", dir=self.scratch))
        self.teach_cross_chat(config, earlier, stores)
        memory = EngineMemory(adaptive=self.memory.adaptive, stores=stores)
        return ChatSession(self.loaded, memory), draft_settings(config, self.cfg, cross_chat=True)

    def run_chat_config(self, workload: Workload, config: str, repeat: int) -> list[EngineRun]:
        max_tokens, runs = self.cfg.max_tokens, []
        turns = list(zip(workload.turn_ids(), self.chat_messages[workload.id]))
        if config == "mlx-lm":
            for turn_id, messages in turns:
                prompt = prompt_tokens(self.loaded, _request(messages))
                tokens, seconds, cpu = mlx_lm_greedy(self.loaded, prompt, max_tokens)
                runs.append(EngineRun("mlx-lm", turn_id, workload.task, tokens, seconds, cpu))
                runs[-1].loadavg = load_now()
        else:
            session, settings = self.chat_session(config, workload)
            for turn_id, messages in turns:
                if config == ORACLE:
                    session.oracle.expect(self.reference[turn_id])
                run = run_engine(session, workload, messages, settings, max_tokens, config)
                run.workload = turn_id
                runs.append(run)
        for run in runs:
            run.chat, run.repeat = workload.id, repeat
        return runs

    def run_chat(self, workload: Workload, index: int) -> None:
        earlier = predecessor(workload)
        if earlier is not None and earlier.id not in self.chat_messages:
            self.reference_chat(earlier)  # the chat it follows, for its cross-chat memory
        lengths = ", ".join(str(len(r.tokens)) for r in self.reference_chat(workload)[0])
        log(
            f"{self.elapsed()} ({index}/{len(self.workloads)}) {workload.task}/{workload.id}: "
            f"turns of {lengths} tokens; load {load_now():.2f}"
        )
        for repeat in range(self.cfg.repeats):
            shift = (index + repeat) % len(self.configs)
            for config in self.configs[shift:] + self.configs[:shift]:
                if config == "mlx-lm" and workload.schema:
                    continue  # mlx-lm's plain decoding knows no schema
                where = f"{workload.task}/{workload.id} {config}"
                try:
                    runs = self.run_chat_config(workload, config, repeat)
                except Exception as error:  # a drafter that crashes is a failure, not a skip
                    self.failures.append(f"{where}: {type(error).__name__}: {error}")
                    log(f"  FAILED {self.failures[-1]}")
                    continue
                for run in runs:
                    compare(run, self.reference[run.workload])
                    if not run.identical:
                        self.failures.append(
                            f"{workload.task}/{run.workload} {config} (round {repeat + 1}): "
                            f"output differs from plain greedy at token {run.first_mismatch}"
                        )
                self.runs += runs
                tokens = sum(len(r.tokens) for r in runs)
                passes = sum(r.stats["passes"] for r in runs if r.stats)
                log(
                    f"  round {repeat + 1} {config:14} "
                    f"{tokens / sum(r.decode_wall_s for r in runs):6.1f} tok/s"
                    + (f" {tokens / passes:.2f} tok/pass" if passes else "")
                    + ("" if all(r.identical for r in runs) else "  MISMATCH")
                )

    def run_main(self):
        self.configs = ["none"] + self.drafters
        if self.cfg.oracle:
            self.oracle_count = best_fixed_count(self.verify["ratio"])
            self.configs.append(ORACLE)
        if self.cfg.mlx_lm:
            self.configs.append("mlx-lm")
        answers = sum(len(w.turn_ids()) for w in self.workloads)
        log(
            f"{self.elapsed()} {len(self.workloads)} chats ({answers} answers) x "
            f"{self.cfg.repeats} rounds x ({', '.join(self.configs)}), up to "
            f"{self.cfg.max_tokens} tokens each"
            + (f"; oracle drafts {self.oracle_count} per pass" if self.cfg.oracle else "")
        )
        for index, workload in enumerate(self.workloads, 1):
            self.run_chat(workload, index)
            sent = [r.stats["pass_sizes"] for r in self.runs if r.chat == workload.id and r.stats]
            longest = max((n for sizes in sent for n in sizes), default=1)
            self.curve_timer.time(self.cfg.verify_between, longest=longest)

    def verify_cost_over_the_run(self) -> None:
        """Price with c(n) over the run: every sample, the start's and those after each chat
        (``CurveTimer``); ``planned_s`` keeps the start's medians, which the policy planned on."""
        planned = self.verify["median_s"]
        self.verify.update(self.curve_timer.curve(), planned_s=planned)

    def predicted(self) -> dict:
        """What the device table's replay predicts for this run's own plain answers on the
        curve measured here, planned as the loop plans (on the curve and pipelined share it
        measured) and priced as the loop runs (plain decoding and every queued pass at the
        pace of this run's reference answers, ``loop_share``, and every other pass at c(n)
        over the run, ``verify_cost_over_the_run``), the drafter's host time charged: per
        drafter config that ran (as the suite ran it) and for the default drafter's hindsight
        bound, per task, Σ plain time / Σ predicted time, summed as the measured speed-ups
        are, so the two stand side by side in the report."""
        if not self.drafters:
            return {}
        key, eos = model_identity(self.loaded)
        chats = {}
        for workload in self.workloads:
            turns = []
            for turn_id, messages in zip(workload.turn_ids(), self.chat_messages[workload.id]):
                answer = self.reference[turn_id]
                turns.append(replay_turn(self.loaded, messages, answer, self.cfg.max_tokens))
                if workload.schema:
                    turns[-1]["forced"] = schema_forced(self.loaded, workload.schema, answer)
            chats[workload.id] = {"task": workload.task, "turns": turns}
        named = self.measured_curve()
        planned = {int(n): s for n, s in self.verify.get("planned_s", {}).items()} or named.seconds
        plans = {}
        for name in self.drafters:
            settings = draft_settings(name, self.cfg)
            plans[name] = {
                "drafter_name": name,
                "draft_count": settings.draft_count,
                "adaptive": settings.adaptive,
                "policy": settings.policy,
            }
        if self.default_drafter is not None:
            plans["hindsight"] = strategies(eos, named)["hindsight"]
        figures = {}
        for label, plan in plans.items():
            options = (False, False, True, 0.0, 1)
            kept = replays(
                chats,
                key,
                eos,
                planned,
                plan,
                *options,
                pipelined=named.pipelined_share,
                context_scale=named.context_scale,
                charge_share=self.verify.get("loop_share"),
                charge_seconds=named.seconds,
            )
            spent: dict[str, list[float]] = {}
            for name, result in kept.items():
                sums = spent.setdefault(chats[name]["task"], [0.0, 0.0])
                sums[0] += result["plain_s"]
                sums[1] += result["spec_s"] + result["drafter_s"]
            totals = [sum(plain for plain, _ in spent.values()), sum(s for _, s in spent.values())]
            spent["all"] = totals
            figures[label] = {task: round(plain / spec, 4) for task, (plain, spec) in spent.items()}
        return figures

    def results(self) -> dict:
        """Everything the run measured, as JSON data: what the report renders from."""
        workloads = [
            {
                **{k: getattr(w, k) for k in ("id", "task", "role", "split", "after", "source")},
                "turns": w.turn_ids(),
                "reference_tokens": [len(self.reference.get(t, [])) for t in w.turn_ids()],
            }
            for w in self.workloads
        ]
        settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(self.cfg).items()}
        return {
            "format": 2,
            "environment": self.env,
            "command": self.cfg.command,
            "settings": settings,
            "drafters": self.drafters,
            "failures": self.failures,
            "skipped": self.skipped,
            "provenance": self.provenance,
            "workloads": workloads,
            "verify_cost": self.verify,
            "predicted": self.predicted(),
            "oracle_draft_count": self.oracle_count,
            "summary": aggregate(self),
            "runs": [r.record() for r in self.runs],
        }

    def run(self) -> int:
        cfg = self.cfg
        if cfg.conversations:
            chosen = conversation_workloads(cfg.conversations, cfg.per_task)
        else:
            chosen = select_workloads(cfg.tasks, cfg.per_task, cfg.split)
        self.workloads, self.provenance = chosen
        if not self.workloads:
            raise EngineError("No workloads to run.")
        log(f"{self.elapsed()} loading model {cfg.model or '(embedded default)'}")
        self.loaded = load_model(cfg.model, lambda done, total, message: log(f"  {message}"))
        self.env = environment(self.loaded)
        self.drafters = self.drafter_names()
        self.default_drafter = DEFAULT_DRAFTER if DEFAULT_DRAFTER in self.drafters else None
        self.measure_verify_cost()
        self.warm_up()
        # drafter memory taught for a chat lives in a scratch folder, removed at the end
        with tempfile.TemporaryDirectory(prefix="draftless-bench-") as scratch:
            self.scratch = Path(scratch)
            self.run_main()
        self.verify_cost_over_the_run()
        self.verify["loop_share"] = self.loop_share()
        self.env["machine"]["loadavg_end"] = load_averages()
        self.env["total_s"] = round(time.perf_counter() - self.started, 1)
        results = self.results()
        for line in report.measured_beside_predicted(results):
            log(line)
        out = Path(cfg.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=1))  # kept if drawing fails
        report.render(results, out)
        log(f"{self.elapsed()} report: {out / 'report.md'}")
        if self.failures:
            log("FAILED checks:\n" + "\n".join(f"  {f}" for f in self.failures))
            return 3
        log("all of Draftless's greedy outputs identical to plain decoding")
        return 0
