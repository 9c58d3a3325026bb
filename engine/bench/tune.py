"""Replaying greedy answers: speed-ups predicted on a verify-cost curve, free of load.

A greedy answer is fixed, so a draft is accepted as far as it equals the answer. ``simulate``
runs the decode loop's own pass steps (``engine.policy.passes``: plan, judge by the answer, learn)
against a known answer with no model and charges each pass c(tokens verified + 1) of a curve
(a tree pass also the curve's tree extra): predicted speed-up = plain passes x c(1) / Σ cost.
``predict`` replays a set of chats; the device table (``devices.py``) runs it on every
named curve.

``python -m engine.bench.tune`` decodes the tuning prompts plainly once (cached per model
and set), then prints per task the predicted speed-up of drafters x draft-count caps, for
one process answering the whole set and for each chat alone (a first answer), and the
acceptance per match class the adaptive policy's cold-start priors are fitted to (its
first row's, and what a tree's other rows added).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..drafters import make_drafter, measurement_options
from ..drafters._static_table import StaticTable
from ..errors import EngineError
from ..policy.adaptive import CLASS_PRIORS, AdaptiveMemory, BonusPriors, Priors, match_class
from ..policy.calibrated_policy import PolicyMemory
from ..policy.context_scale import ContextScale
from ..policy.draft_policy import FixedDraftLength
from ..policy.passes import judge_by_answer, learn_pass, plan_pass
from ..policy.schedule import PassSchedule
from ..policy.verify_cost import CostCurve
from ..settings import DraftSettings
from .scratch import FolderStores

# The static n-gram table the replays of each model key draft from (``suffix-static``'s, as a
# session attaches it), noted by ``model_identity``, where every replayed model's key comes from
STATIC_TABLES: dict = {}
# The corpus index likewise (``suffix-static``'s ``index`` option), built on first use: model
# key -> the loaded model, then its index
CORPUS_INDEXES: dict = {}
QUIET_CURVE = "resources/readme/benchmarks/results.json"  # a quiet machine's c(n), seconds
PRIOR_STRENGTH = 1.0  # pseudo-observations of a fitted prior, as the flat Beta(0.5, 0.5)


def simulate(
    chat: list[dict],
    drafter_name: str,
    draft_count: int,
    adaptive: bool,
    memory: AdaptiveMemory,
    model_key: str,
    seconds: dict[int, float],
    eos: int,
    options: dict | None = None,
    classes: dict | None = None,
    stores=None,
    drafter=None,
    tree_extra: float = 0.0,
    grammar: bool = True,
    pipelined: float | None = None,
    queues_idle: bool = False,
    context_scale: ContextScale | None = None,
    charge_share: float | None = None,
    charge_seconds: dict | None = None,
) -> dict:
    """Replay one chat (``[{"prompt": tokens, "answer": tokens, "stop": bool}]``, turns in
    order, one drafter for the whole chat as ``ChatSession`` keeps it, a policy and a schedule
    an answer as it makes them) and return
    ``{"plain_s", "spec_s", "passes", "emitted", "drafter_s"}``. ``drafter``: an instance
    to replay instead of the registered ``drafter_name`` (a peer's strategy, the oracle);
    ``grammar``: a turn's ``forced`` tokens (what its schema forces at each answer position)
    are drafted as the engine's loop drafts them; ``pipelined``: a queued one-token pass's
    share of c(1) (``CostCurve.pipelined``; plain decoding and blind passes cost that);
    ``queues_idle``: every pass that sends nothing costs that too (a strategy with no
    schedule of its own, a peer's, hindsight's, priced as if its loop queued each such pass
    before the last token was read: never worse than the default's blind passes);
    ``context_scale``: each pass priced at its context (``CostCurve.context_scale``);
    ``charge_share``: where given, queued passes are charged at this share of c(1) while the
    policy and the schedule plan on ``pipelined`` (a loop plans on what it measured, the clock
    charges what its passes take); ``charge_seconds``: likewise, passes charged at this c(n)
    while the policy plans on ``seconds``."""
    curve = CostCurve(
        seconds, tree_extra=tree_extra, pipelined=pipelined, context_scale=context_scale
    )
    price = curve
    if charge_share is not None or charge_seconds is not None:
        share = pipelined if charge_share is None else charge_share
        price = CostCurve(charge_seconds or seconds, pipelined=share, context_scale=context_scale)
    if drafter is None:
        options = measurement_options(drafter_name) if options is None else options
        settings = DraftSettings(
            drafter=drafter_name, draft_count=draft_count, adaptive=adaptive, options=options
        )
        drafter = make_drafter(settings.validated())
    drafter.attach_model(
        model_key,
        static_table=STATIC_TABLES.get(model_key),
        corpus_index=corpus_index(model_key) if drafter.wants_corpus_index else None,
        stores=stores if stores is not None else FolderStores(),
    )
    constrained = any("forced" in turn for turn in chat)  # a schema's answers
    charged = Charged(price, tree_extra, queues_idle, classes)
    history: list[int] = []
    for turn in chat:
        prompt, answer = list(turn["prompt"]), list(turn["answer"])
        answer += [eos] if turn.get("stop", True) else []
        started = time.perf_counter()
        if history and prompt[: len(history)] == history:
            drafter.extend(prompt[len(history) :])
        else:
            drafter.reset(prompt)
        charged.drafter_s += time.perf_counter() - started
        schema = "forced" in turn  # what it forces is drafted as the loop drafts it
        # a policy and a schedule an answer, as the session makes them (sharing the memory's
        # acceptance counts and blind gain); a grammar's answer cannot queue passes
        policy, schedule = FixedDraftLength(), PassSchedule(pipelines=not schema)
        if adaptive:
            policy = memory.policy(model_key, drafter, curve, constrained=constrained)
            schedule = memory.schedule(model_key, drafter, curve, constrained, not schema)
        forced = turn["forced"] if schema and grammar else None
        charged.context = len(prompt)
        replay_answer(answer, drafter, policy, schedule, charged, draft_count, eos, forced, schema)
        history = prompt + answer
    drafter.flush()
    return charged.result()


@dataclass
class Charged:
    """What a replay charges on ``curve``: plain decoding's time, the strategy's (``spec_s``:
    its passes, a tree pass ``tree_extra`` more) and its host's (``drafter_s``), each pass's
    size (tokens verified + 1, a tree or not), cost and context (the tokens before it:
    ``context`` is where the next pass starts); ``queues_idle``: a pass that sends
    nothing is queued (``simulate``); ``classes``: where given, per match class, the first
    row's [reached, accepted] per position, then [trees' first-row tokens, tokens beyond
    them]."""

    curve: CostCurve
    tree_extra: float = 0.0
    queues_idle: bool = False
    classes: dict | None = None
    plain_s: float = 0.0
    spec_s: float = 0.0
    drafter_s: float = 0.0
    passes: int = 0
    emitted: int = 0
    context: int = 0
    sizes: list[tuple[int, bool]] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    contexts: list[int] = field(default_factory=list)
    answers: list[tuple[int, int]] = field(default_factory=list)  # (context, tokens) each

    @property
    def queued(self) -> float:
        """A one-token pass queued before the last token is read, plain decoding's token, at
        the current context."""
        return self.curve.queued_base() * self.curve.context_share(1, self.context)

    def add_answer(self, tokens: int) -> None:
        """What plain decoding pays for an answer of ``tokens`` from the current context."""
        self.answers.append((self.context, tokens))
        self.plain_s += plain_seconds(self.curve, self.context, tokens)

    def cost(self, verdict, blind: bool) -> float:
        if blind or (self.queues_idle and not verdict.drafted):
            return self.queued
        tree = verdict.depth is not None
        n = verdict.drafted + 1
        return self.curve.at_context(n, self.context) + (self.tree_extra if tree else 0.0)

    def add_pass(self, verdict, cost: float) -> None:
        self.spec_s += cost
        self.costs.append(cost)
        self.sizes.append((verdict.drafted + 1, verdict.depth is not None))
        self.contexts.append(self.context)
        self.passes += 1
        self.emitted += len(verdict.emitted)
        self.context += len(verdict.emitted)

    def add_plain(self, tokens: int) -> None:
        """``tokens`` decoded plainly, pipelined (the schedule gave up)."""
        queued, start = self.curve.queued_base(), self.context
        self.spec_s += plain_seconds(self.curve, start, tokens)
        self.costs += [queued * self.curve.context_share(1, start + i) for i in range(tokens)]
        self.contexts += range(start, start + tokens)
        self.context += tokens
        self.sizes += [(1, False)] * tokens
        self.passes, self.emitted = self.passes + tokens, self.emitted + tokens

    def count_class(self, plan, verdict, draft_count: int) -> None:
        """A pass that sent the drafter's rows, in its match class's counts."""
        if self.classes is None or not plan.rows or plan.grammar:
            return
        rows, matches, proposal = plan.rows, verdict.matches, plan.proposal
        counts = self.classes.setdefault(
            match_class(proposal.match_length, proposal.follows),
            [[0, 0] for _ in range(draft_count + 1)],
        )
        for i in range(min(matches[0] + 1, len(rows[0]))):
            counts[i][0] += 1
            counts[i][1] += i < matches[0]
        counts[-1][0] += len(rows[0]) if verdict.depth is not None else 0
        counts[-1][1] += verdict.accepted - matches[0]

    def result(self) -> dict:
        return {
            "plain_s": self.plain_s,
            "spec_s": self.spec_s,
            "passes": self.passes,
            "emitted": self.emitted,
            "drafter_s": self.drafter_s,
            "sizes": self.sizes,
            "costs": self.costs,
            "contexts": self.contexts,
            "answers": self.answers,
        }


def plain_seconds(curve: CostCurve, context: int, tokens: int) -> float:
    """``tokens`` one-token passes, each queued (``CostCurve.queued_base``), from ``context``
    tokens of context on (``CostCurve.context_scale``)."""
    queued = curve.queued_base()
    if curve.context_scale is None:
        return tokens * queued
    return sum(queued * curve.context_share(1, context + i) for i in range(tokens))


def replay_answer(
    answer: list[int],
    drafter,
    policy,
    schedule: PassSchedule,
    charged: Charged,
    draft_count: int,
    eos: int,
    forced: list | None = None,
    schema: bool = False,
) -> None:
    """One answer's passes, as the loop makes them (``decode.speculative_decode``: its
    schedule, blind passes included), judged by the answer and charged to ``charged``;
    ``forced``: what a schema forces at each answer position (drafted as the loop does);
    ``schema``: the answer is a schema's (one row a pass)."""
    ends = {eos}
    produced, blind, hidden = 0, False, 0.0
    charged.add_answer(len(answer))
    while produced < len(answer):
        if schedule.gives_up(draft_count):
            charged.add_plain(len(answer) - produced)  # the rest plainly, pipelined
            break
        started = time.perf_counter()
        limit = min(draft_count, len(answer) - produced - 1)
        planned = plan_pass(
            drafter,
            limit,
            ends,
            policy,
            forced=forced[produced] if forced is not None and limit > 0 else (),
            first_row_only=schema or not drafter.multi_row,
        )
        # a blind pass, queued before its input was known: planned, nothing sent
        plan = planned.went_blind() if blind else planned
        hidden += time.perf_counter() - started
        verdict = judge_by_answer(plan.rows, answer, produced, ends, tree=True)
        cost = charged.cost(verdict, blind)
        # the host's work while a queued pass runs on the device costs only what it takes
        # beyond that pass (``decode.blind_passes``: the last pass's learning, then this
        # one's planning)
        charged.drafter_s += max(hidden - cost, 0.0) if blind else hidden
        blind = schedule.queues_next_blind(planned, drafter)
        charged.add_pass(verdict, cost)
        started = time.perf_counter()
        learn_pass(drafter, policy, plan, verdict, cost, schedule=schedule)
        hidden = time.perf_counter() - started
        if not blind:
            charged.drafter_s, hidden = charged.drafter_s + hidden, 0.0
        charged.count_class(plan, verdict, draft_count)
        produced += len(verdict.emitted)
    charged.drafter_s += hidden  # the answer's last learning: no pass was queued after it


def recost(result: dict, curve: CostCurve) -> dict:
    """``simulate``'s result with the same passes costed on another curve (a replay whose
    drafts the curve does not change: no policy, nothing planned on it, so a pass that sent
    nothing is queued, as ``simulate``'s ``queues_idle`` charges it), each at its context."""
    queued = curve.queued_base()
    trees = sum(tree for _, tree in result["sizes"])
    spec = sum(
        (queued if n == 1 else curve.base(n)) * curve.context_share(n, context)
        for (n, _), context in zip(result["sizes"], result["contexts"])
    )
    plain = sum(plain_seconds(curve, context, tokens) for context, tokens in result["answers"])
    return {**result, "plain_s": plain, "spec_s": spec + trees * curve.tree_extra}


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def predict(
    chats: dict,
    key: str,
    eos: int,
    seconds: dict[int, float],
    plan: dict,
    cold: bool = False,
    cross_chat: bool = False,
    charge_drafter: bool = False,
    tree_extra: float = 0.0,
    repeats: int = 1,
    pipelined: float | None = None,
) -> dict[str, float]:
    """Predicted speed-up per task (geometric mean over its chats) of one plan (``simulate``'s
    ``drafter_name``, ``draft_count``, ``adaptive``; ``make``: a function of the chat and a
    dict kept for the run, giving a drafter instance instead; ``charge``: False where its host
    time is not charged; ``grammar``: False for a peer, whose code drafts nothing a schema
    forces; ``priors``: the adaptive policy's cold-start priors, default ``CLASS_PRIORS``).
    One process answering the chats in order (acceptance memory carried) unless ``cold``;
    ``cross_chat``: a chat that follows another starts with a
    drafter memory taught that chat; ``charge_drafter``: the drafter's own time counts, the
    least of ``repeats`` whole replays per chat (the replay is deterministic: only the host's
    timing varies, and a pause of this machine's is not the drafter's cost);
    ``tree_extra``: seconds a tree pass costs beyond c(its nodes); ``pipelined``:
    ``CostCurve.pipelined``."""
    charged = charge_drafter and plan.get("charge", True)
    options = (cold, cross_chat, charged, tree_extra, repeats)
    kept = replays(chats, key, eos, seconds, plan, *options, pipelined=pipelined)
    return per_task(chats, kept, charged)


def replays(
    chats,
    key,
    eos,
    seconds,
    plan,
    cold,
    cross_chat,
    charged,
    tree_extra,
    repeats,
    pipelined=None,
    context_scale=None,
    charge_share=None,
    charge_seconds=None,
):
    """``predict``'s replay: each chat's ``simulate`` result, the least drafter time of
    ``repeats`` whole replays where the drafter's time is ``charged``; ``pipelined``,
    ``context_scale``, ``charge_share`` and ``charge_seconds`` as ``simulate`` takes them."""
    kept: dict[str, dict] = {}
    for _ in range(repeats if charged else 1):
        priors, kind = plan.get("priors", CLASS_PRIORS), plan.get("policy", "adaptive")
        memory, run = PolicyMemory(priors, policy_kind=kind), {}
        for name, chat in chats.items():
            memory = PolicyMemory(priors, policy_kind=kind) if cold else memory
            extra = {"drafter": plan["make"](chat, run)} if "make" in plan else {}
            if cross_chat and not extra:
                extra = taught_memory(chats, chat, plan, key, seconds, eos)
            if "options" in plan and not extra:
                extra = {"options": plan["options"]}
            arguments = (plan["drafter_name"], plan["draft_count"], plan["adaptive"])
            extra.update(tree_extra=tree_extra, grammar=plan.get("grammar", True))
            extra.update(pipelined=pipelined, queues_idle=not plan["adaptive"])
            extra.update(context_scale=context_scale, charge_share=charge_share)
            extra.update(charge_seconds=charge_seconds)
            result = simulate(chat["turns"], *arguments, memory, key, seconds, eos, **extra)
            if name not in kept or result["drafter_s"] < kept[name]["drafter_s"]:
                kept[name] = result
    return kept


def per_task(chats: dict, kept: dict[str, dict], charged: bool) -> dict[str, float]:
    """Predicted speed-up per task, the geometric mean over its chats' ``replays``."""
    speedups: dict[str, list[float]] = {}
    for name, result in kept.items():
        spent = result["spec_s"] + (result["drafter_s"] if charged else 0.0)
        speedups.setdefault(chats[name]["task"], []).append(result["plain_s"] / spent)
    return {task: geomean(values) for task, values in speedups.items()}


def taught_memory(chats: dict, chat: dict, plan: dict, key: str, seconds: dict, eos: int) -> dict:
    """For a chat that follows another (``edit-memory``) and a drafter with cross-chat
    memory: the app's options and a fresh store in a fresh folder that saw the earlier chat."""
    earlier = chats.get(chat.get("after") or "")
    if earlier is None or not measurement_options(plan["drafter_name"]):
        return {}
    stores = FolderStores()
    name, count = plan["drafter_name"], plan["draft_count"]
    memory = AdaptiveMemory()
    simulate(earlier["turns"], name, count, False, memory, key, seconds, eos, {}, stores=stores)
    return {"options": {}, "stores": stores}


def corpus_index(key: str):
    """The corpus index of the model ``model_identity`` noted under ``key`` (built or read
    from the cache on first use), or None."""
    from ..runtime.model_ngrams import ModelTables

    found = CORPUS_INDEXES.get(key)
    if found is not None and not hasattr(found, "draft"):  # the model: build its index now
        build = ModelTables().index(found, key)
        while not build.step():
            pass
        CORPUS_INDEXES[key] = found = build.table
    return found


def model_identity(loaded) -> tuple[str, int]:
    """What the replay needs of a model: its key (names the drafters' files), its end token
    (and, in ``STATIC_TABLES``, its static n-gram table where it is shipped or cached)."""
    from ..runtime.model_ngrams import ModelTables, model_key

    key = model_key(loaded)
    STATIC_TABLES[key] = ModelTables().static(loaded, key).table
    CORPUS_INDEXES.setdefault(key, loaded)
    return key, sorted(loaded.tokenizer.eos_token_ids)[0]


def reference_answers(
    split: str, max_tokens: int, tasks=None, per_task: int = 2, cached_only: bool = False
) -> tuple[dict, str, int]:
    """Every chat of a split decoded plainly once (cached): ({chat: {"task", "turns",
    "after"}}, model key, eos id)."""
    from ..models import load_model
    from ..paths import cache_dir
    from ..runtime.session import ChatSession
    from .runner import BenchConfig, plain_chat
    from .scratch import scratch_memory
    from .workloads import TASK_ORDER, select_workloads

    loaded = load_model(None)
    key, eos = model_identity(loaded)
    path = cache_dir() / "tuning" / f"answers-{key}-{split}.json"
    cached = json.loads(path.read_text()) if path.exists() else {}
    workloads, _ = select_workloads(list(tasks or TASK_ORDER), per_task, split)
    cfg, memory = BenchConfig(out=Path("."), max_tokens=max_tokens), scratch_memory()
    for workload in workloads:
        if workload.id in cached or cached_only:
            continue
        print(f"  decoding {workload.task}/{workload.id} plainly", file=sys.stderr, flush=True)
        runs, messages = plain_chat(ChatSession(loaded, memory), workload, cfg)
        turns = [replay_turn(loaded, m, run.tokens, max_tokens) for run, m in zip(runs, messages)]
        cached[workload.id] = {"task": workload.task, "turns": turns, "after": workload.after}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cached))
    chats = {w.id: cached[w.id] for w in workloads if w.id in cached}
    for workload in (w for w in workloads if w.schema and w.id in chats):
        for turn in chats[workload.id]["turns"]:
            turn["forced"] = schema_forced(loaded, workload.schema, turn["answer"])
    return chats, key, eos


def replay_turn(loaded, messages: list[dict], answer: list[int], max_tokens: int) -> dict:
    """One plain answer as ``simulate`` replays it: the prompt the chat template makes from
    ``messages``, the answer, and whether it ended before ``max_tokens`` cut it."""
    from ..runtime.session import prompt_tokens
    from ..settings import GenerationRequest

    prompt = prompt_tokens(loaded, GenerationRequest(messages=messages))
    return {"prompt": prompt, "answer": answer, "stop": len(answer) < max_tokens}


def schema_forced(loaded, schema: dict, answer: list[int]) -> list:
    """At each position of an answer decoded under a JSON schema, what the schema forces
    next (the tokens the engine drafts for a grammar-constrained answer)."""
    from ..formats.grammar import GrammarConstraint, json_schema_grammar
    from ..tokens import output_size

    constraint = GrammarConstraint(
        loaded.tokenizer, json_schema_grammar(schema), output_size(loaded.model)
    )
    forced = []
    for token in answer:
        forced.append(constraint.forced())
        constraint.accept([token])
    return forced


def conversation_answers(paths: list[str]) -> tuple[dict, str, int]:
    """The answers of conversations files (``conversations.read_conversations``), as
    ``reference_answers`` gives a split's: ({chat: {"task", "turns"}}, model key, eos id)."""
    from ..models import load_model
    from .conversations import read_conversations, replay_chats

    read = [read_conversations(path) for path in paths]  # checked before the model loads
    loaded = load_model(None)
    key, eos = model_identity(loaded)
    chats: dict = {}
    for conversations in read:
        chats.update(replay_chats(conversations, loaded))
    return chats, key, eos


def class_acceptance(chats: dict, key: str, eos: int, seconds: dict, drafters, cap: int = 16):
    """Acceptance per match class and draft position with a fixed draft count: what the
    adaptive policy's cold-start priors are fitted to. Prints it and returns fitted priors."""
    print(f"\nper match class, fixed draft count {cap}: passes, P(position i of the first row kept")
    print("| earlier kept) for i = 0, 1, 2, 3, 7, 15")
    fitted: Priors = {}
    bonus: BonusPriors = {}
    for name in drafters:
        classes: dict = {}
        for chat in chats.values():
            memory = AdaptiveMemory()
            simulate(chat["turns"], name, cap, False, memory, key, seconds, eos, classes=classes)
        for klass, counts in sorted(classes.items()):
            counts, (first_rows, beyond) = counts[:-1], counts[-1]
            if first_rows:
                bonus.setdefault(name, {})[klass] = round(beyond / first_rows, 3)
            rates = [f"{a / r:.2f}" if r else "  – " for r, a in counts]
            picks = [rates[i] for i in (0, 1, 2, 3, 7, 15) if i < len(rates)]
            print(f"  {name:14} {klass.name:11}: {counts[0][0]:5} passes  " + " ".join(picks))
            p0 = counts[0][1] / counts[0][0]
            prior = (round(PRIOR_STRENGTH * p0, 2), round(PRIOR_STRENGTH * (1 - p0), 2))
            fitted.setdefault(name, {})[klass] = prior
    print(f"fitted priors (strength {PRIOR_STRENGTH}): {fitted}; tree bonus: {bonus}")
    return fitted


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.tune", description=__doc__)
    parser.add_argument("--split", default="tuning", choices=("tuning", "check"))
    parser.add_argument("--drafters", default="ngram-cache,prompt-lookup,suffix")
    parser.add_argument("--caps", default="4,8,16,32", help="draft-count caps to try")
    parser.add_argument("--max-tokens", type=int, default=512, help="answer cap (default 512)")
    parser.add_argument("--fixed", action="store_true", help="also try fixed draft counts")
    parser.add_argument("--curve", default=QUIET_CURVE, help="a results.json whose c(n) to use")
    parser.add_argument("--tasks", help="comma-separated tasks (default: all)")
    parser.add_argument("--cached-only", action="store_true", help="decode nothing new")
    parser.add_argument(
        "--conversations",
        nargs="+",
        metavar="FILE",
        help="replay these conversations' answers instead of the split's prompts (tuning "
        "files: python -m engine.bench.conversations --split tuning)",
    )
    parser.add_argument(
        "--table",
        metavar="FILE.npz",
        help="the static n-gram table to replay with instead of the shipped one (one built "
        "without the replayed chats: python -m engine.bench.static_table --exclude)",
    )
    args = parser.parse_args(argv)
    tasks = args.tasks.split(",") if args.tasks else None
    try:  # the files checked before the model loads
        table = StaticTable.load(args.table) if args.table else None
        if args.conversations:
            chats, key, eos = conversation_answers(args.conversations)
        else:
            chats, key, eos = reference_answers(
                args.split, args.max_tokens, tasks, cached_only=args.cached_only
            )
    except EngineError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if table is not None:
        shipped = STATIC_TABLES.get(key)
        if shipped is not None and (
            table.vocab_size != shipped.vocab_size
            or (table.tokenizer and shipped.tokenizer and table.tokenizer != shipped.tokenizer)
        ):
            print(f"error: {args.table} was built for another model's tokenizer", file=sys.stderr)
            return 2
        STATIC_TABLES[key] = table
    curve = json.loads(Path(args.curve).read_text())["verify_cost"]["median_s"]
    seconds = {int(n): s for n, s in curve.items()}
    print(f"python -m engine.bench.tune {' '.join(argv if argv is not None else sys.argv[1:])}")
    tokens = sum(len(t["answer"]) for c in chats.values() for t in c["turns"])
    shape = ", ".join(f"c({n})/c(1)={s / seconds[1]:.2f}" for n, s in sorted(seconds.items()))
    answers = " ".join(args.conversations) if args.conversations else f"{args.split} set"
    print(f"{answers}: {len(chats)} chats, {tokens} tokens; c(n) from {args.curve}: {shape}")
    drafters = args.drafters.split(",")
    fitted = class_acceptance(chats, key, eos, seconds, drafters)
    # priors fitted here are only a candidate on the tuning set; on the check set the
    # engine's own are compared with flat ones, nothing is fitted to it
    variants = {"": CLASS_PRIORS, " flat-priors": {}}
    if args.split == "tuning" or args.conversations:
        variants[" fitted-priors"] = fitted
    tasks = sorted({c["task"] for c in chats.values()})
    for cold in (False, True):
        print(
            f"\n{'cold start: each chat alone' if cold else 'one process, memory carried'}; "
            "predicted speed-up per task (geomean over chats), then geomean over tasks"
        )
        print(f"{'config':28}" + "".join(f"{t[:12]:>13}" for t in tasks) + f"{'geomean':>10}")
        for name in drafters:
            for cap in map(int, args.caps.split(",")):
                for adaptive in (True, False) if args.fixed else (True,):
                    for label, priors in variants.items() if adaptive else [("", {})]:
                        plan = {"drafter_name": name, "draft_count": cap, "adaptive": adaptive}
                        plan["priors"] = priors
                        values = predict(chats, key, eos, seconds, plan, cold, cross_chat=True)
                        row = f"{name}@{cap}{'' if adaptive else ' fixed'}{label}"
                        cells = "".join(f"{values[t]:13.2f}" for t in tasks)
                        print(f"{row:28}{cells}{geomean(values.values()):10.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
