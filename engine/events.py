"""The events the engine streams to its callers (CLI, GUI, benchmarks).

Plain frozen dataclasses: no Qt, no MLX. The GUI draws only from these.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProgressEvent:
    """Long work before decoding (model conversion, loading, prefill)."""

    stage: str  # "convert", "load", "prefill", "table", ...
    done: int
    total: int
    message: str
    # "prefill": the chat template ended the prompt with <think>, so the answer starts
    # inside a think block and holds only "…</think>answer"
    thinking: bool = False


@dataclass(frozen=True)
class ModelEvent:
    """Which model answers, and whether speculation is possible for it."""

    name: str
    path: str
    speculation: str  # "on (tree)", "on (one row: why)" or "off (why)"
    details: str = ""  # architecture · size · quantization
    facts: dict = field(default_factory=dict)  # the same as data (``models.model_facts``)


@dataclass(frozen=True)
class TokenLogprob:
    """A token with its log-probability at a position; ``raw``: the token's own bytes (part
    of a character, for byte-level tokens), ``text`` those bytes decoded alone."""

    token: int
    text: str
    logprob: float
    raw: bytes = b""


@dataclass(frozen=True)
class TokenEvent:
    """One emitted token. ``text`` may be empty while a multi-byte character is incomplete."""

    token: int
    text: str
    from_draft: bool
    pass_index: int
    draft_position: int | None  # index in the accepted draft, None for the target's own token
    drafter: str
    # when the request asks for log-probabilities: this token's, and the most likely tokens'
    logprob: TokenLogprob | None = None
    top_logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class PromptEvent:
    """The prompt read with each token's log-probability (asked for by
    ``GenerationRequest.prompt_logprobs``): ``tokens[i]`` is the prompt's token i as a
    TokenEvent whose ``logprob`` follows the tokens before it (None for the first, which
    follows nothing); ``text``: the prompt's tokens decoded."""

    tokens: tuple[TokenEvent, ...]
    text: str


@dataclass(frozen=True)
class EmbeddingEvent:
    """Each input's embedding (``EngineService.embed``), and the tokens read for them."""

    vectors: list[list[float]]
    tokens: int


@dataclass(frozen=True)
class ToolCallEvent:
    """Tool calls that closed in the pass just streamed (its tokens' text leaves them out),
    each {"id", "name", "arguments" (JSON text)}; ``text``: text held back while it might
    open a call, given out at the end of the answer; ``deltas``: the calls' progress in the
    pass, as OpenAI streams it: {"index", "id", "name"} when a call starts, then
    {"index", "arguments"} with the next piece of its arguments' JSON text."""

    calls: list[dict]
    text: str = ""
    deltas: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class PassEvent:
    """One target forward pass after prefill."""

    pass_index: int
    drafted: int
    accepted: int
    emitted: int
    seconds: float
    tokens_per_pass: float  # running mean over the request so far


@dataclass(frozen=True)
class DoneEvent:
    """The request finished. ``stats`` is ``DecodeStats.to_dict()``."""

    finish_reason: str  # "stop", "length", "cancelled"
    text: str
    tokens: list[int]
    from_draft: list[bool]
    stats: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ReplayOutcome:
    """One drafter configuration replayed over a finished answer (``engine.runtime.replay``)."""

    drafter: str
    draft_count: int
    ngram_order: int
    stats: dict  # ``DecodeStats.to_dict()``, as in a DoneEvent
    from_draft: tuple[bool, ...]  # per answer token (the end-of-answer token excluded)
    notes: tuple[str, ...] = ()  # why it is an estimate; empty: exact

    @property
    def exact(self) -> bool:
        return not self.notes

    @property
    def label(self) -> str:
        return f"{self.drafter} k={self.draft_count} n={self.ngram_order}"

    def to_dict(self) -> dict:
        """Plain data for JSON (the command line's ``replay --json``)."""
        return {
            "drafter": self.drafter,
            "draft_count": self.draft_count,
            "ngram_order": self.ngram_order,
            "exact": self.exact,
            "notes": list(self.notes),
            "from_draft": list(self.from_draft),
            "stats": dict(self.stats),
        }


@dataclass(frozen=True)
class ReplayEvent:
    """Drafters replayed over a finished answer (``engine.runtime.replay``), best first."""

    results: list[ReplayOutcome]


@dataclass(frozen=True)
class ErrorEvent:
    """The request failed; ``message`` says what a person can do about it."""

    message: str


Event = (
    ProgressEvent
    | ModelEvent
    | TokenEvent
    | PromptEvent
    | EmbeddingEvent
    | ToolCallEvent
    | PassEvent
    | DoneEvent
    | ReplayEvent
    | ErrorEvent
)
