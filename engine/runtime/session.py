"""One conversation with a loaded model: its KV cache and drafter state live across turns.

``ChatSession.generate`` turns a validated request into engine events. A later turn of
the same chat reuses the cached prefix instead of re-prefilling the whole history, and
keeps the drafter's n-gram state when the drafter settings are unchanged. What outlives
the chat (cost curves, acceptance memory, n-gram stores) is the ``EngineMemory`` its owner
hands in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from collections.abc import Callable, Generator, Iterator

from ..policy.adaptive import AdaptivePolicy
from ..loop.decode import PREFILL_STEP, Target, TokenChooser, speculative_decode
from ..drafters import make_drafter
from ..errors import EngineError, describe_error
from ..events import (
    DoneEvent,
    Event,
    PassEvent,
    ProgressEvent,
    PromptEvent,
    TokenEvent,
    TokenLogprob,
    ToolCallEvent,
)
from ..formats.generic_tools import GenericAnswerScanner, generic_messages
from ..formats.grammar import (
    GrammarConstraint,
    generic_tool_grammar,
    json_schema_grammar,
    tool_call_grammar,
)
from .memory import EngineMemory
from .model_ngrams import model_key, wanted_tables
from ..models import LoadedModel
from ..policy.schedule import PassSchedule
from ..loop.scoring import score_prompt
from ..settings import GenerationRequest
from ..stats import DecodeStats
from ..tokens import check_prompt, output_size
from ..formats.tool_calls import ToolCallScanner, tool_format
from ..policy.verify_cost import CostCurve


FIRST_PREFILL_STEP = 128
PREFILL_CHUNK_SECONDS = 1.0  # a stop while reading a long prompt waits about this long
# "<think>\n" is two tokens in Qwen3's and DeepSeek-R1's vocabularies, and the tag alone
# is at most seven tokens in a vocabulary without it: eight always hold the whole tag
THINK_TAIL_TOKENS = 8
BUILDING_TABLE = "Computing the model's bigram table (once per model)…"
TABLE_IN_BACKGROUND = (
    "The model's bigram table is being built in the background (once per model); "
    "until it is ready, ngrammys drafts from the conversation alone."
)


def building(build) -> str:
    if build.what == "bigram table":
        return BUILDING_TABLE
    return f"Building the {build.what} of this model's tokenizer (once per tokenizer)…"


def ready(build) -> str:
    return f"{build.what[0].upper()}{build.what[1:]} ready"


def in_background(build) -> str:
    if build.what == "bigram table":
        return TABLE_IN_BACKGROUND
    return (
        f"The {build.what} of this model's tokenizer is being built in the background (once "
        "per tokenizer); until it is ready, the drafter drafts without it."
    )


def paced_prefill_step(step: int, seconds: float) -> int:
    """The next chunk's size, so that it takes about ``PREFILL_CHUNK_SECONDS`` (attention
    grows with the context): at most double the last, from 16 to ``PREFILL_STEP``."""
    wanted = step * PREFILL_CHUNK_SECONDS / max(seconds, 1e-6)
    return int(min(PREFILL_STEP, 2 * step, max(16, wanted)))


def common_prefix_length(a, b) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prompt_tokens(loaded: LoadedModel, request: GenerationRequest) -> list[int]:
    tokenizer = loaded.tokenizer
    if request.messages is not None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise EngineError(f"{loaded.name} has no chat template; send a raw prompt instead.")
        messages, tools = request.messages, {}
        if request.tools and tool_format(tokenizer) == "template":
            tools = {"tools": request.tools}
        elif request.tools:
            messages = generic_messages(
                messages, request.tools, request.forced_tools, request.parallel_tool_calls
            )
        try:
            start = list(
                tokenizer.apply_chat_template(messages, add_generation_prompt=True, **tools)
            )
        except Exception as error:  # the template is the model folder's code (Jinja), untrusted
            raise EngineError(
                f"The chat template of {loaded.name} failed on this conversation "
                f"({describe_error(error)}). Fix chat_template in the model's "
                "tokenizer_config.json, or send a raw prompt."
            ) from None
        return start + list(request.continue_tokens or ())
    if request.prompt_ids is not None:
        vocabulary = output_size(loaded.model)
        outside = next((t for t in request.prompt_ids if t >= vocabulary), None)
        if outside is not None:
            raise EngineError(
                f"The prompt holds token id {outside}, but {loaded.name} has only "
                f"{vocabulary} token ids (0 to {vocabulary - 1})."
            )
        return list(request.prompt_ids)
    return list(tokenizer.encode(request.prompt))


def opens_thinking(tokenizer, tokens: list[int]) -> bool:
    """Whether a prompt written by the chat template ends with ``<think>`` (Qwen3's and
    DeepSeek-R1's thinking templates end it so): the answer then starts inside the block."""
    tail = tokenizer.decode(list(tokens[-THINK_TAIL_TOKENS:]))
    return tail.rstrip().endswith("<think>")


def token_bytes(tokenizer, tokenmap, token: int) -> bytes:
    """A token's own bytes: through the byte-level BPE map where the tokenizer has one
    (``tokenmap``, mlx-lm's BPE detokenizer's), else its text decoded alone."""
    try:
        from mlx_lm.tokenizer_utils import _byte_decoder  # (private: GPT-2's byte map)
    except ImportError:
        tokenmap = None
    if tokenmap is not None and token < len(tokenmap):
        decoder, piece = _byte_decoder(), tokenmap[token]
        if piece and all(c in decoder for c in piece):
            return bytes(decoder[c] for c in piece)
    return tokenizer.decode([token]).encode()


def start_detokenizer(detokenizer, after: int | None) -> int:
    """Reset ``detokenizer`` for an answer that follows the token ``after`` (None: an answer
    that starts the text); return how many characters of its text that token made."""
    detokenizer.reset()
    if after is None:
        return 0
    detokenizer.add_token(after)
    detokenizer.finalize()
    _ = detokenizer.last_segment  # reading it marks that text as given out
    return len(detokenizer.text)


@dataclass
class AnswerPlan:
    """What ``ChatSession._prepare`` set up for one answer's decoding."""

    stats: DecodeStats
    policy: AdaptivePolicy | None  # None: a fixed draft count
    schedule: PassSchedule | None  # when passes go out (None: nothing scheduled)
    curve: CostCurve | None  # the curve the speed-up is estimated on (None: no estimate)
    constraint: GrammarConstraint | None  # for JSON output or a forced tool call


def check_top_k(sampling, vocab_size: int, model_name: str) -> None:
    """A sampled answer's ``top_k`` keeps fewer tokens than the vocabulary (mlx-lm's sampler
    takes 1 to its size less one; 0 is off): an EngineError naming the range, not a crash."""
    if not sampling.greedy and sampling.top_k >= vocab_size:
        raise EngineError(
            f"'top_k' must be from 0 (off) to {vocab_size - 1:,} with {model_name}, whose "
            f"vocabulary has {vocab_size:,} tokens; got {sampling.top_k:,}."
        )


def grammar_for(loaded, request: GenerationRequest) -> tuple[str, str] | None:
    """The grammar ``request``'s answer must follow on the ``loaded`` model (a JSON schema, a
    forced or generic tool call) and the request field it comes from; None for free text."""
    if request.tools and tool_format(loaded.tokenizer) == "generic":
        if request.json_schema is not None:
            raise EngineError(
                f"'tools' and a JSON 'response_format' cannot both hold with "
                f"{loaded.name}: its answers with tools are JSON of their own (its chat "
                "template has no tool calling)."
            )
        grammar = generic_tool_grammar(
            request.tools, request.forced_tools, request.parallel_tool_calls
        )
        return grammar, "tools"
    if request.forced_tools:
        grammar = tool_call_grammar(loaded.tokenizer, request.tools, request.forced_tools)
        return grammar, "tool_choice"
    if request.json_schema is not None:
        return json_schema_grammar(request.json_schema), "response_format"
    return None


class ChatSession:
    def __init__(
        self,
        loaded: LoadedModel,
        memory: EngineMemory | None = None,
        new_target: Callable[..., Target] = Target,
        client: str | None = None,
    ):
        """``new_target(model)`` makes the one caller of the model (a distributed service
        hands one that mirrors every call to the other ranks); ``client``: whose chat this
        is (its drafters learn across chats in that client's memory only)."""
        self.loaded = loaded
        self.memory = memory if memory is not None else EngineMemory()
        self.stores = self.memory.stores_for(client)
        self.target = new_target(loaded.model)
        self.prefill_step = FIRST_PREFILL_STEP  # tokens per prompt chunk, paced by its time
        self.history: list[int] = []  # everything but the last token is in the cache
        self.drafter = None
        self.drafter_key = None
        self._model_key = None

    @property
    def model_key(self) -> str:
        """The loaded model's identity for on-disk tables and caches."""
        if self._model_key is None:
            self._model_key = model_key(self.loaded)
        return self._model_key

    def _attach_model(self, should_stop: Callable[[], bool]) -> Iterator[Event]:
        """Hand model-derived token data to drafters that want it (``wanted_tables``).
        A table not built yet is built here when the memory builds tables inline (checking
        ``should_stop`` between steps: a stopped build goes on in the next request);
        otherwise its owner builds it between requests, this answer drafts without it and
        says so, and a later answer attaches it."""
        drafter = self.drafter
        names = wanted_tables(drafter)
        if drafter.attached_model == self.model_key and all(
            getattr(drafter, f"attached_{name}") for name in names
        ):
            return
        tables = self.memory.tables
        wanted = tables.builds(names, self.loaded, self.model_key)
        for build in wanted.values():
            if tables.inline and not build.finished:
                while not build.finished and not should_stop():
                    yield ProgressEvent("table", build.done, build.total, building(build))
                    build.step()
                if build.finished:
                    yield ProgressEvent("table", build.total, build.total, ready(build))
            elif not build.finished:
                yield ProgressEvent("table", build.done, build.total, in_background(build))
        drafter.attach_model(
            self.model_key,
            **{name: build.table for name, build in wanted.items()},
            stores=self.stores,
            vocab_size=output_size(self.loaded.model),
        )

    def _prepare_cache(self, tokens: list[int]) -> int:
        """Make the cache hold ``tokens[:-1]``; return how many tokens had to be run."""
        reusable = common_prefix_length(self.history[:-1], tokens[:-1])
        if not self.target.trimmable and reusable < self.target.offset:
            reusable = 0
        self.target.truncate(reusable)
        reusable = self.target.offset
        return len(tokens) - 1 - reusable

    def _prepare_drafter(self, tokens: list[int], request: GenerationRequest) -> None:
        key = request.draft
        if (
            self.drafter is not None
            and key == self.drafter_key
            and tokens[: len(self.history)] == self.history
        ):
            self.drafter.extend(tokens[len(self.history) :])
        else:
            self.drafter = make_drafter(request.draft)
            self.drafter.reset(tokens)
            self.drafter_key = key

    def _read_prompt(
        self, pending: list[int], should_stop: Callable[[], bool], thinking: bool
    ) -> Generator[Event, None, bool]:
        """Run ``pending`` into the cache in chunks of about ``PREFILL_CHUNK_SECONDS`` (one
        progress event each, carrying ``thinking``), checking ``should_stop`` between
        chunks; return whether all of it was read."""
        total = len(pending)
        yield ProgressEvent("prefill", 0, total, "Reading the prompt…", thinking)
        done = 0
        while done < total:
            if should_stop():
                return False
            chunk = pending[done : done + self.prefill_step]
            started = time.perf_counter()
            self.target.prefill(chunk)
            seconds = time.perf_counter() - started
            self.prefill_step = paced_prefill_step(len(chunk), seconds)
            if self.loaded.speculates:  # a curve not yet measured learns its slope from this
                self.memory.adaptive.curve(self.model_key).observe_span(len(chunk), seconds)
            done += len(chunk)
            message = "Prompt read" if done == total else "Reading the prompt…"
            yield ProgressEvent("prefill", done, total, message, thinking)
        return True

    def _token_logprob(self, token: int, value: float) -> TokenLogprob:
        tokenizer = self.loaded.tokenizer
        tokenmap = getattr(tokenizer.detokenizer, "tokenmap", None)  # (shared, not copied)
        raw = token_bytes(tokenizer, tokenmap, token)
        return TokenLogprob(token, raw.decode("utf-8", "replace"), value, raw)

    def _logprobs(self, logprobs, position: int, token: int) -> tuple:
        """A TokenEvent's ``logprob`` and ``top_logprobs`` from a pass's ``logprobs``."""
        if logprobs is None:
            return None, ()
        value, top = logprobs[position]
        entry = self._token_logprob
        return entry(token, value), tuple(entry(t, v) for t, v in top)

    def _scored_prompt(self, tokens: list[int], alternatives: int) -> PromptEvent:
        """The prompt read into an emptied cache with each token's log-probability
        (``scoring.score_prompt``); the cache then holds it, as after prefill."""
        self.target.reset()
        self.history = []
        scored = [None] + score_prompt(self.target, tokens, alternatives)
        self.history = list(tokens)
        events = []
        for position, token in enumerate(tokens):
            logprob, top = self._logprobs(scored, position, token) if position else (None, ())
            text = self._token_logprob(token, 0.0).text
            events.append(TokenEvent(token, text, False, -1, None, "", logprob, top))
        return PromptEvent(tuple(events), self.loaded.tokenizer.decode(tokens))

    def generate(
        self, request: GenerationRequest, should_stop: Callable[[], bool] = lambda: False
    ) -> Iterator[Event]:
        """The answer's events: reading the prompt, then tokens and passes, then Done."""
        plan = yield from self._prepare(request, should_stop)
        if plan is None:
            return
        if request.max_tokens == 0:  # the prompt alone (scored where asked): no answer
            stats = plan.stats
            yield DoneEvent("length", "", [], [], stats.to_dict(), stats.timing_dict())
            return
        yield from self._decode(request, plan, should_stop)

    def _constraint(
        self, request: GenerationRequest, should_stop: Callable[[], bool]
    ) -> GrammarConstraint | None:
        """The grammar the answer must follow (a JSON schema, a forced or generic tool
        call), compiled within its budget; None for free text."""
        loaded = self.loaded
        wanted = grammar_for(loaded, request)
        if wanted is None:
            return None
        grammar, field = wanted
        return GrammarConstraint(
            loaded.tokenizer, grammar, output_size(loaded.model), field, should_stop
        )

    def _prepare(
        self, request: GenerationRequest, should_stop: Callable[[], bool]
    ) -> Generator[Event, None, AnswerPlan | None]:
        """Check the prompt, read it into the cache, set up the drafter and the policy;
        return the ``AnswerPlan``, or None when stopped while reading (after a Done)."""
        loaded = self.loaded
        tokens = check_prompt(
            prompt_tokens(loaded, request), output_size(loaded.model), loaded.name
        )
        if not tokens:
            raise EngineError("The prompt is empty: type something to answer.")
        if len(tokens) + request.max_tokens > loaded.context_length:
            raise EngineError(
                f"The conversation is {len(tokens)} tokens and up to {request.max_tokens} more "
                f"were asked for, but {loaded.name} reads at most {loaded.context_length}. "
                "Start a new chat, shorten the prompt or lower max tokens."
            )
        check_top_k(request.sampling, output_size(loaded.model), loaded.name)
        constraint = self._constraint(request, should_stop)

        stats = DecodeStats(
            drafter=request.draft.drafter,
            speculation=loaded.speculation,
            greedy=request.sampling.greedy,
            prompt_tokens=len(tokens),
        )
        started = time.perf_counter()
        if request.prompt_logprobs is not None:  # read here, from an empty cache
            yield self._scored_prompt(tokens, request.prompt_logprobs)
        to_run = self._prepare_cache(tokens)
        stats.prefilled_tokens = to_run
        self.history = list(tokens)
        templated = tokens[: len(tokens) - len(request.continue_tokens or ())]
        thinking = request.messages is not None and opens_thinking(loaded.tokenizer, templated)
        if not to_run:  # all of it was in the cache: one event says so
            yield ProgressEvent("prefill", len(tokens), len(tokens), "Prompt read", thinking)
        else:
            pending = tokens[len(tokens) - 1 - to_run : -1]
            read = yield from self._read_prompt(pending, should_stop, thinking)
            if not read:  # stopped while reading: the cache keeps what was read
                self.history = tokens[: self.target.offset + 1]
                stats.prefill_s = time.perf_counter() - started
                yield DoneEvent("cancelled", "", [], [], stats.to_dict(), stats.timing_dict())
                return None
        drafter_started = time.perf_counter()
        self._prepare_drafter(tokens, request)
        stats.drafter_s += time.perf_counter() - drafter_started
        yield from self._attach_model(should_stop)
        policy = schedule = None
        named = request.draft.cost_curve.curve() if request.draft.cost_curve is not None else None
        if request.draft.adaptive and loaded.speculates:
            # never measured on this machine: a guess built from this model's own passes
            # (the service measures between answers); or the device curve asked for
            memory, constrained = self.memory.adaptive, constraint is not None
            policy = memory.policy(
                self.model_key,
                self.drafter,
                curve=named,
                constrained=constrained,
                kind=request.draft.policy,
            )
            schedule = memory.schedule(self.model_key, self.drafter, named, constrained)
        stats.prefill_s = time.perf_counter() - started
        # the speed-up is estimated on the curve the policy plans on, and with a fixed draft
        # count on that same curve: a setting taken from a replay shows what it gained
        curve = named or (self.memory.adaptive.curve(self.model_key) if loaded.speculates else None)
        return AnswerPlan(stats, policy, schedule, curve, constraint)

    def _decode(
        self, request: GenerationRequest, plan: AnswerPlan, should_stop: Callable[[], bool]
    ) -> Iterator[Event]:
        """Decode speculatively and turn each pass into Token (and ToolCall) and Pass events."""
        loaded, stats, policy = self.loaded, plan.stats, plan.policy
        tokenizer = loaded.tokenizer
        eos = set(tokenizer.eos_token_ids)
        detokenizer = tokenizer.detokenizer
        # a text completion keeps every byte of its tokens: mlx-lm's detokenizers drop a
        # space that begins the text, so the prompt's last token goes first, its text unused
        primed = start_detokenizer(detokenizer, self.history[-1] if request.raw else None)
        out_tokens: list[int] = []
        from_draft: list[bool] = []
        scanner = None
        if request.tools and tool_format(tokenizer) == "generic":
            scanner = GenericAnswerScanner(request.tools)
        elif request.tools:
            scanner = ToolCallScanner.for_model(tokenizer, request.tools)
        finish = "length"
        single_call_ended = False  # parallel_tool_calls false, and the one call has closed
        decoder = speculative_decode(
            self.target,
            self.drafter,
            TokenChooser(request.sampling, request.logprobs, plan.constraint),
            self.history,
            max_tokens=request.max_tokens,
            draft_count=request.draft.draft_count,
            eos_tokens=eos,
            speculate=loaded.speculates,
            policy=policy,
            schedule=plan.schedule,
        )
        try:
            for pass_index, result in enumerate(decoder):
                ended = bool(eos.intersection(result.tokens))
                accepted, emitted = stats.record_pass(
                    result.drafted,
                    result.accepted,
                    len(result.tokens),
                    result.seconds,
                    ended,
                    result.tree,
                    result.queued,
                )
                stats.drafter_s += result.drafter_seconds
                if ended:
                    finish = "stop"
                elif stats.emitted < request.max_tokens and should_stop():
                    finish = "cancelled"
                final = finish != "length" or stats.emitted >= request.max_tokens
                kept = [t for t in result.tokens if t not in eos]
                calls: list[dict] = []
                deltas: list[dict] = []
                for position, token in enumerate(kept):
                    detokenizer.add_token(token)
                    if final and position == len(kept) - 1:
                        detokenizer.finalize()  # the last token carries any held-back bytes
                    drafted = position < result.accepted
                    out_tokens.append(token)
                    from_draft.append(drafted)
                    text = detokenizer.last_segment
                    if scanner is not None:  # tool calls leave the text, as ToolCallEvents
                        text, closed, moved = scanner.feed(text)
                        calls += closed
                        deltas += moved
                        if closed and not request.parallel_tool_calls:
                            # one call only: the answer ends with it (the rest of the pass,
                            # and any further call in the same markup, are dropped)
                            calls = calls[:1]
                            deltas = [d for d in deltas if d["index"] == 0]
                            finish, final, single_call_ended = "stop", True, True
                    yield TokenEvent(
                        token,
                        text,
                        drafted,
                        pass_index,
                        position if drafted else None,
                        stats.drafter,
                        *self._logprobs(result.logprobs, position, token),
                    )
                    if single_call_ended:
                        break
                if scanner is not None:
                    ends = final and not single_call_ended
                    held, closed, moved = scanner.flush() if ends else ("", [], [])
                    if calls or closed or held or deltas or moved:
                        yield ToolCallEvent(calls + closed, held, deltas + moved)
                yield PassEvent(
                    pass_index,
                    result.drafted,
                    accepted,
                    emitted,
                    result.seconds,
                    stats.tokens_per_pass,
                )
                if final:
                    break
        finally:
            decoder.close()  # a pipelined decoder gives back the pass it queued ahead
        detokenizer.finalize()
        if plan.curve is not None:
            stats.estimate_speedup(plan.curve)
        yield DoneEvent(
            finish,
            detokenizer.text[primed:],
            out_tokens,
            from_draft,
            stats.to_dict(),
            stats.timing_dict(),
        )
