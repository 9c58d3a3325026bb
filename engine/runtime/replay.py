"""Replay: run drafters over a finished answer's own tokens, without the model.

For a greedy answer the target's choice at every position is the answer itself, so the
decode loop can be re-enacted exactly: each pass the drafter proposes, the longest prefix
that matches the answer is accepted (over all rows for a multi-row drafter, as the tree
verification does), the next answer token is the target's own, and the drafter observes
what the pass emitted: the loop's own pass steps (``engine.policy.passes``), with the answer as the
target's verdict. Tokens per pass, acceptance, per-position acceptance and which
tokens came from accepted drafts then equal what a real greedy run with that drafter and
a fixed draft count would have produced (tested against real decoding).

It is an estimate, and says why, when the answer was sampled (a different guess could
have changed what was sampled next), when the drafter needs the target's top-k or the
model's bigram table (not recorded with the answer), and for ngram-cache, which replays
without its cross-chat memory (a replay never reads or grows it). ``suffix-static`` replays
with the static n-gram table the live session attaches (``ModelTables.static``: shipped,
cached or built for the model's tokenizer); one still being built is not waited for, and
the replay says it went without.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache

from ..policy.adaptive import AdaptiveMemory
from ..policy.draft_policy import FixedDraftLength
from ..drafters import DRAFTERS, make_drafter, measurement_options
from ..events import DoneEvent, ReplayOutcome
from ..drafters.base import Drafter
from .model_ngrams import ModelTables, model_key
from ..policy.passes import judge_by_answer, learn_pass, plan_pass
from ..settings import DraftSettings, GenerationRequest, configurations
from ..stats import DecodeStats, summary_line
from ..tokens import output_size
from ..policy.verify_cost import curve_from_spec


@dataclass
class ReplayResult:
    settings: DraftSettings
    stats: DecodeStats
    from_draft: list[bool]  # per answer token (the end-of-answer token excluded)
    notes: list[str] = field(default_factory=list)  # why it is an estimate; empty: exact

    def outcome(self) -> ReplayOutcome:
        """What travels to the caller: the settings replayed and the figures, as data."""
        return ReplayOutcome(
            drafter=self.settings.drafter,
            draft_count=self.settings.draft_count,
            ngram_order=self.settings.ngram_order,
            stats=self.stats.to_dict(),
            from_draft=tuple(self.from_draft),
            notes=tuple(self.notes),
        )

    @property
    def exact(self) -> bool:
        return not self.notes

    @property
    def label(self) -> str:
        return self.outcome().label

    def to_dict(self) -> dict:
        return self.outcome().to_dict()


def _estimate_notes(drafter, asked: DraftSettings, greedy: bool, attached: bool) -> list[str]:
    """Why a replay is an estimate; ``attached``: the model's tables were offered."""
    notes = []
    if not greedy:
        notes.append("sampled answer")
    if drafter.wants_target_topk:
        notes.append("needs the target's top-k, not recorded")
    if drafter.wants_model_bigram:
        notes.append("needs the model's bigram table")
    if attached and drafter.wants_static_table and not drafter.attached_static_table:
        notes.append("without its static n-gram table (not built yet)")
    if attached and drafter.wants_corpus_index and not drafter.attached_corpus_index:
        notes.append("without its corpus index (not built yet)")
    if any(asked.options.get(k) != v for k, v in measurement_options(asked.drafter).items()):
        notes.append("without cross-chat memory")
    return notes


def replay(
    prompt_tokens: Sequence[int],
    answer_tokens: Sequence[int],
    settings: DraftSettings,
    *,
    end_token: int | None = None,
    max_tokens: int | None = None,
    greedy: bool = True,
    tree: bool = True,
    attach: Callable[[Drafter], None] | None = None,
) -> ReplayResult:
    """Re-enact decoding of ``answer_tokens`` after ``prompt_tokens`` with ``settings``
    (fixed draft count). ``end_token``: the answer ended with it (not in answer_tokens).
    ``max_tokens``: the request's limit (default: as many as were produced). ``tree``:
    whether the target verifies several rows in one pass (otherwise only the first row).
    ``attach``: hands the new drafter the model's tables (``replay_request``'s)."""
    asked = settings
    options = {**settings.options, **measurement_options(settings.drafter)}
    settings = replace(settings, adaptive=False, options=options)
    drafter = make_drafter(settings)
    if attach is not None:
        attach(drafter)
    target = list(answer_tokens) + ([end_token] if end_token is not None else [])
    max_tokens = len(target) if max_tokens is None else max_tokens
    ends = {end_token} if end_token is not None else set()
    drafter.reset(list(prompt_tokens))
    stats = DecodeStats(drafter=settings.drafter, prompt_tokens=len(prompt_tokens))
    policy = FixedDraftLength()
    tree = tree and drafter.multi_row  # several rows verified in one pass
    from_draft: list[bool] = []
    produced = 0
    while produced < len(target):
        limit = min(settings.draft_count, max_tokens - produced - 1)
        plan = plan_pass(drafter, limit, ends, policy, first_row_only=not tree)
        verdict = judge_by_answer(plan.rows, target, produced, ends, tree)
        emitted = verdict.emitted
        kept = learn_pass(drafter, policy, plan, verdict, 0.0, stats=stats, eos_tokens=ends)
        produced += len(emitted)
        visible = len(emitted) - int(emitted[-1] in ends)
        from_draft.extend(i < kept for i in range(visible))
    notes = _estimate_notes(drafter, asked, greedy, attach is not None)
    return ReplayResult(settings, stats, from_draft, notes)


def replay_many(
    prompt_tokens: Sequence[int],
    answer_tokens: Sequence[int],
    configs: Sequence[DraftSettings],
    *,
    cost: Callable[[float], float] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    **options,
) -> list[ReplayResult]:
    """Replay every configuration (until ``should_stop()`` says to stop, checked between
    them); best first (by estimated speed-up when a cost curve is given, else by tokens
    per pass)."""
    results = []
    for config in configs:
        if should_stop():
            break
        results.append(replay(prompt_tokens, answer_tokens, config, **options))
    for result in results:
        result.stats.estimate_speedup(cost)

    def key(result: ReplayResult):
        return (result.stats.estimated_speedup or 0.0, result.stats.tokens_per_pass)

    return sorted(results, key=key, reverse=True)


def replay_request(
    loaded,
    request,
    answer_tokens: Sequence[int],
    ended: bool,
    configs: Sequence[DraftSettings],
    greedy: bool | None = None,
    memory: AdaptiveMemory | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    tables: ModelTables | None = None,
) -> list[ReplayResult]:
    """Replay over an answer to ``request`` produced by ``loaded`` (the prompt is tokenized
    as the engine did; the model's measured verify-cost curve in ``memory``, or saved on
    disk, sorts the results; never measured on this machine: sorted by tokens per pass).
    ``should_stop`` is checked between configurations. ``tables``: the model tables the
    live sessions use (the service's ``EngineMemory.tables``; default: the shipped or
    cached ones)."""
    from .session import prompt_tokens as request_tokens  # MLX: not for a replay without the model

    prompt = request_tokens(loaded, request)
    key = model_key(loaded)
    if request.draft.cost_curve is not None:  # a device curve asked for
        cost = request.draft.cost_curve.curve()
    else:
        curve = (memory or AdaptiveMemory()).curve(key)
        cost = curve if curve.measured else None
    tables = tables if tables is not None else ModelTables()

    @cache
    def static_table():  # looked up once for all configurations (no build runs between them)
        return tables.static(loaded, key).table

    @cache
    def corpus_index():
        return tables.index(loaded, key).table

    def attach(drafter) -> None:
        """The static table (and corpus index) the live session attaches, where finished (a
        replay never waits for a build, nor reads the cross-chat memory the session's
        ``stores`` hold)."""
        if drafter.wants_static_table or drafter.wants_corpus_index:
            vocab_size = output_size(loaded.model)
            table = static_table() if drafter.wants_static_table else None
            index = corpus_index() if drafter.wants_corpus_index else None
            drafter.attach_model(key, static_table=table, corpus_index=index, vocab_size=vocab_size)

    eos = list(loaded.tokenizer.eos_token_ids)
    end_token = eos[0] if ended and eos else None
    return replay_many(
        prompt,
        answer_tokens,
        configs,
        cost=cost,
        end_token=end_token,
        max_tokens=None if ended else len(answer_tokens),
        greedy=request.sampling.greedy if greedy is None else greedy,
        should_stop=should_stop,
        attach=attach,
    )


def add_replay_arguments(parser) -> None:
    parser.add_argument(
        "--prompt", required=True, help="the user's message to answer greedily once"
    )
    parser.add_argument("--drafters", default="all", help="comma-separated (default: all)")
    parser.add_argument("--draft-counts", default="2,4,8", help="comma-separated")
    parser.add_argument("--ngram-orders", default="4", help="comma-separated")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_replay(args) -> int:
    """``python -m engine replay``: answer greedily once, replay every drafter over it."""
    from ..models import load_model
    from .session import ChatSession

    loaded = load_model(args.model)
    request = GenerationRequest(
        messages=[{"role": "user", "content": args.prompt}],
        model=args.model,
        max_tokens=args.max_tokens,
        draft=DraftSettings(
            drafter="none",
            cost_curve=(curve_from_spec(args.cost_curve) if args.cost_curve else None),
        ),
    ).validated()
    done = [e for e in ChatSession(loaded).generate(request) if isinstance(e, DoneEvent)][-1]
    names = list(DRAFTERS) if args.drafters == "all" else args.drafters.split(",")
    configs = configurations(
        names,
        [int(k) for k in args.draft_counts.split(",")],
        [int(n) for n in args.ngram_orders.split(",")],
    )
    started = time.perf_counter()
    results = replay_request(loaded, request, done.tokens, done.finish_reason == "stop", configs)
    seconds = time.perf_counter() - started
    if args.json:
        print(
            json.dumps(
                {
                    "text": done.text,
                    "tokens": len(done.tokens),
                    "replay_s": round(seconds, 4),
                    "results": [r.to_dict() for r in results],
                }
            )
        )
        return 0
    print(
        f"{len(done.tokens)} tokens answered greedily; {len(results)} replays in {seconds:.2f} s\n"
    )
    for r in results:
        flag = "exact" if r.exact else "estimate: " + ", ".join(r.notes)
        print(f"{r.label:28} {summary_line(r.stats.to_dict())} · {flag}")
    return 0
