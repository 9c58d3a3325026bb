"""What a request asks for: drafting and sampling settings, validated in one place."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .drafters import DRAFTERS, resolve_drafter_name
from .errors import EngineError

DRAFT_COUNT_RANGE = (1, 64)
NGRAM_ORDER_RANGE = (1, 32)
MAX_TOKENS_RANGE = (1, 32768)  # an answer's tokens (the app's setting)
LOGPROBS_RANGE = (0, 20)  # alternatives per token (OpenAI's top_logprobs bound)
SEED_RANGE = (0, 2**64 - 1)  # what MLX's random seed takes
TOP_K_RANGE = (0, 1_000_000)  # 0: off; the largest vocabularies are about 260,000 tokens
MIN_P_RANGE = (0.0, 1.0)  # a share of the most likely token's probability; 0: off
# mlx-lm's multiplicative penalty: 1 leaves the logits as they are; 10 all but bans a repeat
REPETITION_PENALTY_RANGE = (0.01, 10.0)
# how the adaptive policy judges acceptance: ``DraftSettings.policy``'s values
POLICY_KINDS = ("adaptive", "calibrated")


def _check_range(name: str, value, bounds, kind=int) -> None:
    low, high = bounds
    if not isinstance(value, kind) or isinstance(value, bool) or not low <= value <= high:
        raise EngineError(
            f"{name} must be {'an integer' if kind is int else 'a number'} "
            f"from {low} to {high}; got {value!r}."
        )


@dataclass(frozen=True)
class DraftSettings:
    """How to draft. ``options`` holds drafter-specific knobs (see each drafter's file)."""

    drafter: str = "default"
    # the most draft tokens per pass: the user's upper bound. The adaptive policy sends what
    # pays on the verify-cost curve, so on a flat (GPU) curve long copies go out whole and on
    # a steep one they are cut (python -m engine.bench.devices: 64 against 16 gained on every
    # accelerator curve and was no change on this CPU's)
    draft_count: int = 64
    ngram_order: int = 4
    ngram_min: int = 1
    adaptive: bool = True  # off: draft exactly draft_count tokens whenever the drafter can
    # how the adaptive policy judges acceptance (``POLICY_KINDS``): ``adaptive``, per
    # match class from fitted prior tables; ``calibrated``, a logistic model per drafter
    # learned online (``calibrated_policy``)
    policy: str = "adaptive"
    options: dict[str, Any] = field(default_factory=dict)
    # a device curve to plan with and to estimate on (``engine.policy.verify_cost.NamedCurve``, from
    # the command line's --cost-curve); None: this model's curve measured on this machine
    cost_curve: Any = None

    def validated(self) -> "DraftSettings":
        """Checked settings (EngineError names what is wrong), with the drafter's name resolved."""
        _check_range("draft_count", self.draft_count, DRAFT_COUNT_RANGE)
        _check_range("ngram_order", self.ngram_order, NGRAM_ORDER_RANGE)
        _check_range("ngram_min", self.ngram_min, NGRAM_ORDER_RANGE)
        if self.ngram_min > self.ngram_order:
            raise EngineError(
                f"ngram_min ({self.ngram_min}) must not exceed ngram_order ({self.ngram_order})."
            )
        if not isinstance(self.adaptive, bool):
            raise EngineError(f"adaptive must be true or false; got {self.adaptive!r}.")
        if self.policy not in POLICY_KINDS:
            kinds = " or ".join(POLICY_KINDS)
            raise EngineError(f"policy must be {kinds}; got {self.policy!r}.")
        drafter = resolve_drafter_name(self.drafter)
        DRAFTERS[drafter].check_options(self.options)
        return replace(self, drafter=drafter)


@dataclass(frozen=True)
class SamplingSettings:
    """Temperature 0 means greedy. Others use mlx-lm's sampler and logits processors."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float | None = None
    presence_penalty: float | None = None  # additive, mlx-lm's (over the last 20 tokens)
    frequency_penalty: float | None = None
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def validated(self) -> "SamplingSettings":
        _check_range("temperature", float(self.temperature), (0.0, 5.0), float)
        _check_range("top_p", float(self.top_p), (0.0, 1.0), float)
        _check_range("min_p", float(self.min_p), MIN_P_RANGE, float)
        _check_range("top_k", self.top_k, TOP_K_RANGE)
        if self.repetition_penalty is not None:
            _check_range(
                "repetition_penalty",
                float(self.repetition_penalty),
                REPETITION_PENALTY_RANGE,
                float,
            )
        for name in ("presence_penalty", "frequency_penalty"):
            if getattr(self, name) is not None:
                _check_range(name, float(getattr(self, name)), (-2.0, 2.0), float)
        if self.seed is not None:
            _check_range("seed", self.seed, SEED_RANGE)
        return self


@dataclass(frozen=True)
class GenerationRequest:
    """One answer to produce.

    Either ``messages`` (chat turns, rendered with the model's chat template, ending
    with the user's turn) or ``prompt`` with ``raw=True`` (text given as is).
    ``chat_id`` lets the engine keep the KV cache and n-gram state between turns.
    ``client``: whose request it is; chats and the cross-chat n-gram memory are kept per
    client (the server names each of its clients; None: the machine's own user, the app).
    ``model`` is a local folder or a Hugging Face id; None means the embedded default.
    """

    messages: list[dict] | None = None
    prompt: str | None = None
    raw: bool = False
    model: str | None = None
    chat_id: str | None = None
    client: str | None = None
    max_tokens: int = 512
    draft: DraftSettings = field(default_factory=DraftSettings)
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    # each token's log-probability and this many most likely alternatives; None: none
    logprobs: int | None = None
    # tools the model may call (OpenAI's function tools), rendered by its chat template
    tools: list[dict] | None = None
    # a JSON schema the answer must follow (constrained decoding, engine/formats/grammar.py)
    json_schema: dict | None = None
    # names of ``tools`` one of which the answer must call (constrained decoding); None: the
    # model decides
    forced_tools: tuple[str, ...] | None = None
    # False: at most one tool call (OpenAI's ``parallel_tool_calls``): the answer ends as
    # the first call closes
    parallel_tool_calls: bool = True
    # the answer so far, as the model's token ids, to be continued (after it stopped at
    # its token limit): the prompt is the chat with these tokens as the answer's start
    continue_tokens: tuple[int, ...] | None = None
    # a raw prompt given as the model's token ids (instead of ``prompt``'s text)
    prompt_ids: tuple[int, ...] | None = None
    # each prompt token's log-probability and this many most likely alternatives, sent as
    # a ``PromptEvent`` before the answer (evaluation harnesses score prompts so); None: none
    prompt_logprobs: int | None = None

    @property
    def wants_grammar(self) -> bool:
        """Whether the answer must follow a grammar: a JSON schema, or tools (a forced call,
        or a generic-format answer)."""
        return bool(self.tools or self.forced_tools) or self.json_schema is not None

    def validated(self) -> "GenerationRequest":
        # 0: the prompt alone, read (and scored, where asked): what evaluation asks for
        _check_range("max_tokens", self.max_tokens, (0, MAX_TOKENS_RANGE[1]))
        if self.continue_tokens is not None:
            if self.messages is None or not all(
                isinstance(t, int) and not isinstance(t, bool) and t >= 0
                for t in self.continue_tokens
            ):
                raise EngineError("Only a chat answer, given as token ids, can be continued.")
        if self.logprobs is not None:
            _check_range("top_logprobs", self.logprobs, LOGPROBS_RANGE)
        if self.prompt_logprobs is not None:
            _check_range("prompt_logprobs", self.prompt_logprobs, LOGPROBS_RANGE)
        if self.prompt_ids is not None:
            if not self.prompt_ids or not all(
                isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in self.prompt_ids
            ):
                raise EngineError(
                    "A prompt of token ids must be a non-empty list of ids (0 or more)."
                )
            return replace(self, draft=self.draft.validated(), sampling=self.sampling.validated())
        if self.messages is None and self.prompt is None:
            raise EngineError("Nothing to answer: give a prompt or chat messages.")
        if self.messages is not None:
            if not self.messages or not any(
                (m.get("content") or "").strip() or m.get("tool_calls") for m in self.messages
            ):
                raise EngineError("The prompt is empty: type something to answer.")
        elif not self.prompt.strip():
            raise EngineError("The prompt is empty: type something to answer.")
        return replace(self, draft=self.draft.validated(), sampling=self.sampling.validated())


def configurations(
    drafters: Sequence[str],
    draft_counts: Sequence[int],
    ngram_orders: Sequence[int],
    base: DraftSettings | None = None,
) -> list[DraftSettings]:
    """Every drafter (but ``none``) at each draft count and n-gram order, on ``base``'s other
    settings with a fixed draft count: the configurations a replay compares."""
    base = base or DraftSettings()
    return [
        replace(
            base,
            drafter=d,
            draft_count=k,
            ngram_order=n,
            ngram_min=min(base.ngram_min, n),
            adaptive=False,
        )
        for d in drafters
        for k in draft_counts
        for n in ngram_orders
        if d != "none"
    ]
