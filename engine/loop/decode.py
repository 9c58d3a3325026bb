"""The draft → verify → accept → rollback loop, greedy and sampled.

The model call (``Target``) is kept apart from choosing tokens (``TokenChooser``), as in
mlx-lm's generate.py. Invariants, pinned by tests:
- greedy: the emitted tokens equal plain greedy decoding, token for token;
- sampled: each emitted token is the target's own sample at its position, and a draft
  token is kept only if it equals that sample;
- every pass emits at least one token;
- after a pass the KV cache holds exactly the history but its last token, which is the
  next pass's first input (``target.offset == len(history) - 1``).

Plain decoding (drafter ``none``) on a cache that can be cut back runs pipelined
(``pipelined_plain_decode``): each pass is queued before the previous token is read, so
the host's work overlaps the device's, as in mlx-lm's ``generate_step``. When the
speculative loop's other passes go out is the schedule's (``schedule.PassSchedule``): plain
decoding from where drafting cannot pay (a cost curve that is still a guess among those
cases), and blind passes after a pass that sends no draft (queued before that pass's token
is read, still planned once their input is known: ``blind_passes``).

Each pass the policy (``draft_policy.DraftPolicy``: a fixed draft length, or the adaptive
one) chooses how much of the drafter's proposal goes out and is handed back its choice with
the pass's outcome: ``passes.plan_pass`` and ``passes.learn_pass``, the steps the replays
share.

Multi-row drafters verify all their rows in one pass as a prefix tree (``engine/loop/tree.py``)
where the model allows it; which caches can be rolled back, and how, is decided per model
in ``engine/models/caches.py`` (sliding windows, recurrent state).

A grammar (``engine/formats/grammar.py``) masks the logits after the processors; its drafts are
cut at the first token it forbids and verified one row at a time. Where the grammar forces
what comes next (a schema's keys, quotes and separators), those tokens go out whatever the
policy's acceptance memory says (``passes.DraftPlan``): ahead of the drafter's row where it begins
with them, alone where it does not (then neither the drafter nor that memory learns from the
pass).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.sample_utils import make_logits_processors

from ..drafters.base import Drafter
from ..models.caches import (
    TRIM,
    restore,
    rollback_kind,
    snapshot,
    speculation_cache,
    speculation_for,
)
from ..models.tree_adapter import TreeView
from ..policy.draft_policy import DraftPolicy, FixedDraftLength
from ..policy.passes import DraftPlan, learn_pass, plan_pass
from ..policy.schedule import PassSchedule
from ..settings import SamplingSettings
from ..tokens import DraftGate, output_size
from .sampling import PositionSampler
from .tree import DraftTree, Verdict, forward_tree, keep_path, verify_tree

PREFILL_STEP = 512


class Target:
    """The target model and its KV cache: the only code that calls the model."""

    # Plain passes may be queued before the previous pass's token is read (a subclass
    # that must see every input token first, e.g. to mirror it to other ranks, says no).
    pipelines = True

    def __init__(self, model):
        self.model = model
        self.speculation = speculation_for(model, speculation_cache(model))
        self._tree_view: TreeView | None = None
        self._empty_cache()

    @property
    def offset(self) -> int:
        first = self.cache[0] if self.cache else None
        return first.offset if hasattr(first, "offset") else self.fed

    @property
    def trimmable(self) -> bool:
        """Whether the cache can be cut back to any earlier length (not only to a checkpoint)."""
        return all(rollback_kind(c) == TRIM for c in self.cache)

    @property
    def supports_tree(self) -> bool:
        """Whether several draft rows can be verified in one pass (``forward_tree``)."""
        return self.speculation.tree

    def prefill(self, tokens: Sequence[int]) -> None:
        """Run ``tokens`` into the cache without computing output logits."""
        for start in range(0, len(tokens), PREFILL_STEP):
            chunk = mx.array(tokens[start : start + PREFILL_STEP], dtype=mx.uint32)[None]
            self.model(chunk, cache=self.cache)
            self.fed += chunk.shape[1]
            mx.eval([c.state for c in self.cache])

    def forward(self, tokens: Sequence[int] | mx.array) -> mx.array:
        """Logits (float32, shape [len(tokens), vocab]) for each input position. ``tokens``
        may be an array not computed yet (``pipelined_plain_decode``)."""
        inputs = tokens if isinstance(tokens, mx.array) else mx.array(tokens, dtype=mx.uint32)
        logits = self.model(inputs[None], cache=self.cache)
        self.fed += len(tokens)
        return logits[0].astype(mx.float32)

    def forward_tree(self, tree: DraftTree) -> mx.array:
        """Logits (float32, [len(tree), vocab]) for each tree node, one forward pass."""
        if self._tree_view is None:  # built once: the model does not change under a target
            self._tree_view = TreeView(self.model)
        logits = forward_tree(self.model, self.cache, tree, self._tree_view)
        self.fed += len(tree)
        return logits

    def keep_path(self, base: int, path: list[int]) -> None:
        """After ``forward_tree`` at offset ``base``: the accepted path next to the root."""
        keep_path(self.cache, base, path)

    def checkpoint(self) -> tuple[int, list]:
        return self.fed, [snapshot(c) for c in self.cache]

    def restore(self, mark: tuple[int, list]) -> None:
        fed, saved = mark
        for c, part in zip(self.cache, saved):
            restore(c, part)
        self.fed = fed

    def settle(self, history: Sequence[int], mark: tuple[int, list]) -> None:
        """After a verify pass that began at ``mark``: hold exactly ``history`` but its last
        token. Trimmable caches are cut; recurrent state is restored and the kept tokens
        run again."""
        length = len(history) - 1
        if self.offset == length:
            return
        if self.trimmable:
            self.trim(self.offset - length)
            return
        self.restore(mark)
        self.prefill(history[mark[0] : length])

    def trim(self, count: int) -> None:
        if count > 0:
            for c in self.cache:
                c.trim(count)
            self.fed -= count

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` cached positions."""
        if self.offset > length:
            if not self.trimmable:
                self.reset()
                return
            self.trim(self.offset - length)

    def reset(self) -> None:
        self._empty_cache()

    def _empty_cache(self) -> None:  # not ``reset``: a subclass may do more there
        self.cache = speculation_cache(self.model)
        self.fed = 0  # positions run into the cache, for caches that keep no offset (Mamba)


# (log-probability of the emitted token, [(token, log-probability)] of the most likely ones)
TokenLogprobs = tuple[float, list[tuple[int, float]]]


class TokenChooser:
    """Turns logits into the target's own choices: argmax, or a sample whose draw depends
    only on the seed and the token's position (``sampling.PositionSampler``), so the same
    seed gives plain decoding's answer whatever was drafted.

    ``logprobs`` (None: off) asks for each emitted token's log-probability and that many
    most likely alternatives (``token_logprobs``). ``constraint`` (a ``GrammarConstraint``)
    masks what a grammar forbids, after the processors."""

    def __init__(self, sampling: SamplingSettings, logprobs: int | None = None, constraint=None):
        self.sampler = None if sampling.greedy else PositionSampler(sampling)
        self.processors = make_logits_processors(
            repetition_penalty=sampling.repetition_penalty,
            presence_penalty=sampling.presence_penalty,
            frequency_penalty=sampling.frequency_penalty,
        )
        self.greedy = sampling.greedy
        self.logprobs = logprobs
        self.constraint = constraint

    def processed(self, logits: mx.array, history: Sequence[int], draft: Sequence[int]) -> mx.array:
        """``logits`` after the logits processors and the grammar's mask, row i seeing
        ``history + draft[:i]`` exactly as plain decoding would at that position."""
        if self.constraint is not None:
            allowed = self.constraint.masks(draft, logits.shape[0])
            return mx.where(allowed, self._processed(logits, history, draft), -mx.inf)
        return self._processed(logits, history, draft)

    def _processed(
        self, logits: mx.array, history: Sequence[int], draft: Sequence[int]
    ) -> mx.array:
        if not self.processors:
            return logits
        rows = []
        context = mx.array(list(history) + list(draft), dtype=mx.uint32)
        for i in range(logits.shape[0]):
            row = logits[i : i + 1]
            for processor in self.processors:
                row = processor(context[: len(history) + i], row)
            rows.append(row)
        return mx.concatenate(rows, axis=0)

    def choose(self, logits: mx.array, history: Sequence[int], draft: Sequence[int]) -> list[int]:
        """The target's token at each of the ``len(draft) + 1`` positions (position i sees
        ``history + draft[:i]`` and is sequence index ``len(history) + i``)."""
        return self.pick(self.processed(logits, history, draft), len(history)).tolist()

    def token_logprobs(
        self, logits: mx.array, history: Sequence[int], emitted: Sequence[int]
    ) -> list[TokenLogprobs]:
        """Each emitted token's log-probability and the ``self.logprobs`` most likely tokens,
        from the log-softmax of the logits it was chosen from (after the processors, before
        temperature and the sampler's filters, as mlx-lm reports them). ``logits`` holds the
        raw logits at the emitted positions; ``history`` ends before ``emitted``."""
        rows = self.processed(logits[: len(emitted)], history, emitted)
        logprobs = rows - mx.logsumexp(rows, axis=-1, keepdims=True)
        chosen = mx.take_along_axis(logprobs, mx.array(emitted, dtype=mx.uint32)[:, None], axis=-1)[
            :, 0
        ]
        k = self.logprobs or 0
        if not k:
            return [(value, []) for value in chosen.tolist()]
        top = mx.argpartition(-logprobs, kth=k - 1, axis=-1)[:, :k]
        values = mx.take_along_axis(logprobs, top, axis=-1)
        order = mx.argsort(-values, axis=-1)
        top, values = (
            mx.take_along_axis(top, order, axis=-1),
            mx.take_along_axis(values, order, axis=-1),
        )
        return [
            (value, [(t, v) for t, v in zip(ids, row) if v != -math.inf])  # (not masked)
            for value, ids, row in zip(chosen.tolist(), top.tolist(), values.tolist())
        ]

    @property
    def queueable(self) -> bool:
        """Whether ``pick`` alone is the choice (no logits processor needs the history, no
        log-probabilities are asked for)."""
        return not self.processors and self.logprobs is None and self.constraint is None

    def pick(self, logits: mx.array, position: int | None = None) -> mx.array:
        """The choice at each row of ``logits``, not computed yet (no processors applied);
        row i is the token at sequence index ``position + i`` (needed when sampling)."""
        if self.greedy:
            return mx.argmax(logits, axis=-1)
        if position is None:
            raise ValueError("sampling needs the position of the token it chooses")
        return self.sampler(logits, position)


@dataclass
class PassResult:
    tokens: list[int]  # emitted by this pass: accepted drafts, then the target's token
    accepted: int  # how many of ``tokens`` came from the draft
    drafted: int
    seconds: float
    drafter_seconds: float
    row: int = 0
    logprobs: list[TokenLogprobs] | None = None  # per emitted token, when the chooser asks
    tree: bool = False  # several rows verified in one tree pass
    queued: bool = False  # a one-token pass queued before its input token was read


def top_k_tokens(logits: mx.array, k: int, count: int) -> list[list[int]]:
    """The target's ``k`` most likely tokens at the first ``count`` positions, best first."""
    rows = logits[:count]
    top = mx.argpartition(-rows, kth=k - 1, axis=-1)[:, :k]
    order = mx.argsort(-mx.take_along_axis(rows, top, axis=-1), axis=-1)
    return mx.take_along_axis(top, order, axis=-1).tolist()


def verify_row(
    target: Target,
    draft: list[int],
    chooser: TokenChooser,
    history: list[int],
    eos_tokens: set[int],
) -> Verdict:
    """One pass over the last history token and ``draft``: keep the longest prefix the
    target agrees with, then its own next token; roll the cache back to match."""
    mark = target.checkpoint()
    logits = target.forward([history[-1]] + draft)
    choices = chooser.choose(logits, history, draft)
    accepted = 0
    while accepted < len(draft) and choices[accepted] == draft[accepted]:
        accepted += 1
    emitted = draft[:accepted]
    if not (emitted and emitted[-1] in eos_tokens):
        emitted.append(choices[accepted])
    target.settle(history + emitted, mark)
    return Verdict(emitted, accepted, len(draft), logits[: len(emitted)])


def speculative_decode(
    target: Target,
    drafter: Drafter,
    chooser: TokenChooser,
    history: list[int],
    *,
    max_tokens: int,
    draft_count: int,
    eos_tokens: set[int],
    speculate: bool = True,
    policy: DraftPolicy | None = None,
    schedule: PassSchedule | None = None,
) -> Iterator[PassResult]:
    """Decode after ``history`` (whose last token is not yet in the cache).

    ``history`` is extended in place with every emitted token. Stops after an
    end-of-sequence token or ``max_tokens`` emitted tokens; the caller may stop
    pulling between passes to cancel. ``policy`` chooses what each pass sends (default: a
    fixed draft length); ``schedule`` says when passes go out (default: nothing scheduled).
    """
    assert target.offset == len(history) - 1, "cache must hold the history but its last token"
    policy = policy or FixedDraftLength()
    speculate = speculate and target.speculation.on  # no exact rollback: plain decoding
    pipelines = target.pipelines and target.trimmable and chooser.queueable
    if not (speculate and drafter.drafts) and pipelines:
        yield from pipelined_plain_decode(
            target, drafter, chooser, history, max_tokens=max_tokens, eos_tokens=eos_tokens
        )
        return
    # (a chooser that queues has no grammar: nothing forced)
    schedule = (schedule or PassSchedule()).for_loop(pipelines and speculate)
    produced = 0
    gate = DraftGate(output_size(target.model), drafter.name)  # no id outside the vocabulary
    while produced < max_tokens:
        if schedule.gives_up(draft_count):
            yield from pipelined_plain_decode(
                target,
                drafter,
                chooser,
                history,
                max_tokens=max_tokens - produced,
                eos_tokens=eos_tokens,
            )
            return
        started = time.perf_counter()
        # draft
        limit = min(draft_count, max_tokens - produced - 1) if speculate else 0
        constraint = chooser.constraint  # a grammar: a token it forbids is never sent
        forced: list[int] = []  # what the grammar forces next (drafter none stays plain)
        if constraint is not None and limit > 0 and drafter.drafts:
            forced = gate.rows([constraint.forced()[:limit]])[0]
        plan = plan_pass(
            drafter,
            limit,
            eos_tokens,
            policy,
            forced=forced,
            first_row_only=constraint is not None,
            admit=gate.rows,  # no id outside the vocabulary
            allowed=constraint.allowed if constraint is not None else None,
        )
        if schedule.queues_next_blind(plan, drafter):
            produced += yield from blind_passes(
                target,
                drafter,
                chooser,
                policy,
                schedule,
                history,
                plan,
                lambda left: plan_pass(
                    drafter, min(draft_count, left - 1), eos_tokens, policy, admit=gate.rows
                ),
                max_tokens=max_tokens - produced,
                eos_tokens=eos_tokens,
                draft_count=draft_count,
                planning_s=time.perf_counter() - started,
            )
            if history[-1] in eos_tokens:
                return
            continue
        result = verified_pass(
            target, drafter, chooser, policy, schedule, history, plan, eos_tokens, started
        )
        produced += len(result.tokens)
        yield result
        if result.tokens[-1] in eos_tokens:
            return


def verified_pass(
    target: Target,
    drafter: Drafter,
    chooser: TokenChooser,
    policy: DraftPolicy,
    schedule: PassSchedule,
    history: list[int],
    plan: DraftPlan,
    eos_tokens: set[int],
    started: float,
) -> PassResult:
    """One pass that waits for its input: ``plan``'s rows verified (as one tree where the
    drafter and the model allow it), the longest agreeing prefix and the target's own token
    kept (``history`` extended, the cache cut back to match), then learned from. ``started``:
    when its planning began."""
    rows = plan.rows
    drafted_at = time.perf_counter()
    # verify, accept, roll back: the cache ends holding the new history but its last token
    if len(rows) > 1 and drafter.multi_row and target.supports_tree:
        verdict = verify_tree(target, rows, chooser, history, eos_tokens)
    else:
        verdict = verify_row(target, rows[0] if rows else [], chooser, history, eos_tokens)
    emitted = verdict.emitted
    logprobs = (
        chooser.token_logprobs(verdict.logits, history, emitted)
        if chooser.logprobs is not None
        else None
    )
    if chooser.constraint is not None:
        chooser.constraint.accept(emitted)
    history.extend(emitted)
    verified_at = time.perf_counter()
    # learn
    topk = (
        top_k_tokens(verdict.logits, drafter.wants_target_topk, len(emitted))
        if drafter.wants_target_topk
        else None
    )
    seconds = verified_at - drafted_at
    accepted = learn_pass(
        drafter, policy, plan, verdict, seconds, target_topk=topk, schedule=schedule
    )
    done_at = time.perf_counter()
    return PassResult(
        emitted,
        accepted,
        verdict.drafted,
        done_at - started,
        (drafted_at - started) + (done_at - verified_at),
        verdict.row,
        logprobs,
        verdict.depth is not None,
    )


def queued_passes(
    target: Target,
    chooser: TokenChooser,
    history: list[int],
    *,
    max_tokens: int,
    eos_tokens: set[int],
    queue_next: Callable[[], bool],
    learn: Callable[[int, float], PassResult],
) -> Iterator[PassResult]:
    """One-token passes after ``history``, each after the first queued before the token of
    the one before is read while ``queue_next()`` (asked before each token is read) says so,
    as mlx-lm's ``generate_step`` does: the host's work on token t (reading it,
    ``learn(token, started)``, which gives its result, the caller's events) overlaps the
    device's work on token t + 1. The same passes as one at a time, so the same tokens. Ends
    after an end-of-sequence token, ``max_tokens`` tokens, or a token after which no pass was
    queued; returns the tokens made.

    While a result is out with a pass queued, the cache is one token ahead (it already
    holds the token just emitted); it is trimmed back before an end-of-sequence token's
    result and when the caller stops early.
    """

    def step(token: mx.array) -> mx.array:
        logits = target.forward(token)
        return chooser.pick(logits, target.offset)  # the index of the token it chooses

    queued_at = time.perf_counter()
    pending = step(mx.array(history[-1:], dtype=mx.uint32))
    mx.async_eval(pending)
    # on MLX's CPU backend most of a pass runs inside ``async_eval`` itself: the first
    # result's time holds its queuing, not what ``learn`` is told (on the CPU, each step
    # already holds the body of the pass it queues)
    owed = time.perf_counter() - queued_at
    ahead = False
    try:
        for produced in range(1, max_tokens + 1):
            started = time.perf_counter()
            ahead = produced < max_tokens and queue_next()
            if ahead:
                following = step(pending)
                mx.async_eval(following)
            token = pending.item()
            history.append(token)
            result = learn(token, started)
            result.seconds, owed = result.seconds + owed, 0.0
            result.queued = produced > 1
            if token in eos_tokens or not ahead:
                if ahead:
                    target.trim(1)
                    ahead = False
                yield result
                return produced
            yield result
            pending = following
    finally:
        if ahead:  # the caller stopped pulling: drop the queued pass's input
            target.trim(1)
    return max_tokens


def pipelined_plain_decode(
    target: Target,
    drafter: Drafter,
    chooser: TokenChooser,
    history: list[int],
    *,
    max_tokens: int,
    eos_tokens: set[int],
) -> Iterator[PassResult]:
    """Plain decoding, every pass queued (``queued_passes``); the drafter observes each
    token."""

    def learn(token: int, started: float) -> PassResult:
        observed_at = time.perf_counter()
        drafter.observe([token], accepted=0, drafted=0)
        done_at = time.perf_counter()
        return PassResult([token], 0, 0, done_at - started, done_at - observed_at)

    return queued_passes(
        target,
        chooser,
        history,
        max_tokens=max_tokens,
        eos_tokens=eos_tokens,
        queue_next=lambda: True,
        learn=learn,
    )


def blind_passes(
    target: Target,
    drafter: Drafter,
    chooser: TokenChooser,
    policy: DraftPolicy,
    schedule: PassSchedule,
    history: list[int],
    first: DraftPlan,
    next_plan: Callable[[int], DraftPlan],
    *,
    max_tokens: int,
    eos_tokens: set[int],
    draft_count: int,
    planning_s: float = 0.0,
) -> Iterator[PassResult]:
    """From a pass planned to send nothing (``first``, planned in ``planning_s``), one-token
    passes (``queued_passes``), the next queued blind while the pass in flight was planned to
    send nothing and the schedule says so (``queues_next_blind``, asked once a pass is
    planned). A
    blind pass is planned (``next_plan(tokens left)``) once its input is read and learned
    from as it went out (``DraftPlan.went_blind``), as ``bench.tune.simulate`` replays it;
    where the schedule gives up, the rest is plain decoding, nothing planned. Returns the
    tokens made: the loop plans the pass after the last one."""
    current: DraftPlan | None = first  # the pass in flight's plan (None: nothing planned)
    planned = 1  # passes planned so far
    plain = False  # the schedule gave up: nothing is planned any more
    spent = 0.0  # planning the pass in flight after its token's wait began
    owed = planning_s  # planning the first pass, before its wait began

    def queue_next() -> bool:
        nonlocal current, planned, plain, spent
        made = len(history) - 1 - before
        if planned == made:  # the pass in flight went out blind: planned now, its input known
            began = time.perf_counter()
            plain = plain or schedule.gives_up(draft_count)
            plan = None if plain else next_plan(max_tokens - made)
            current, planned = plan and plan.went_blind(), planned + 1
            spent = time.perf_counter() - began
            if plan is not None:
                return schedule.queues_next_blind(plan, drafter)
        return plain or schedule.queues_next_blind(current, drafter)

    def learn(token: int, started: float) -> PassResult:
        nonlocal owed
        read_at = time.perf_counter()
        if current is None:
            drafter.observe([token], accepted=0, drafted=0)
        else:
            verdict = Verdict([token], 0, 0, None)
            learn_pass(
                drafter, policy, current, verdict, read_at - started - spent, schedule=schedule
            )
        done_at = time.perf_counter()
        host = done_at - read_at + spent + owed
        result = PassResult([token], 0, 0, done_at - started + owed, host)
        owed = 0.0
        return result

    before = len(history) - 1  # history[before] is the first pass's input
    return (
        yield from queued_passes(
            target,
            chooser,
            history,
            max_tokens=max_tokens,
            eos_tokens=eos_tokens,
            queue_next=queue_next,
            learn=learn,
        )
    )
