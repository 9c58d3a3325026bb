"""The drafter protocol. A drafter knows tokens, never the model.

Life of a drafter inside one chat:
- ``reset(prompt_tokens)`` when a conversation starts (index the prompt);
- ``extend(tokens)`` when later context arrives that the model did not generate
  (the next user turn);
- each pass: ``propose(k)`` returns a ``Proposal``: draft rows (lists of token ids, each
  at most ``k`` long; no rows means "no guess", and the pass decodes plainly) and how many
  tokens at the end of the history the rows' source matched (``match_length``; 0: the
  drafter does not say; the adaptive policy keeps acceptance apart per match-length class,
  so a long copy is not judged by short guesses), then
  ``observe(emitted, accepted=..., drafted=..., row=..., target_topk=...)`` with the tokens
  the pass emitted (accepted drafts followed by the target's own token). An adaptive
  policy may send fewer tokens than proposed, or none: ``drafted`` says how many went.

A drafter keeps the history it needs from ``reset``, ``extend`` and ``observe``.

Around that, with defaults here, so nobody probes a drafter for optional parts:
- ``attach_model(model_key, bigram=..., static_table=..., stores=..., vocab_size=...)``: the
  session calls it once per model, before the first proposal, with token data only: the
  model's identity (names files), its bigram table when ``wants_model_bigram`` says so, its
  tokenizer's static n-gram table when ``wants_static_table`` says so, and the service's
  ``DrafterStores`` (memory that outlives a chat). ``attached_model`` says which model a
  drafter has, ``attached_bigram`` / ``attached_static_table`` whether it got the table (one
  still being built comes in a later call); a drafter keeps what it needs in ``use_model``
  and ``use_static_table``; likewise the corpus index of public answers
  (``corpus_index``, ``wants_corpus_index``, ``attached_corpus_index``, ``use_corpus_index``).
- ``multi_row`` / ``rows_per_pass``: whether proposals may hold several rows (verified as
  a tree) and at most how many, so an adaptive policy pays for every row.
- ``drafts``: False for a drafter that never proposes (``none``), so the loop may run
  plain decoding pipelined.
- ``flush()``: save persistent memory now. The service flushes its stores on shutdown;
  no drafter registers exit hooks of its own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from ._options import Option, read_options
from .stores import DrafterStores

DraftRows = list[list[int]]
# How the first row's first token follows the match (``Proposal.follows``)
USUAL = "usual"  # it followed at least 60% of the match's earlier occurrences, two or more
ONCE = "once"  # the match occurred once before, followed by it
AT_CURSOR = "cursor"  # ``Proposal.source``: the first row goes on where the last copy was


@dataclass(frozen=True)
class Proposal:
    """What ``propose`` returns: the draft rows, and the match they rest on."""

    rows: DraftRows = field(default_factory=list)
    match_length: int = 0
    # ``USUAL``, ``ONCE`` or "" (a drafter that counts continuations says so): how the first
    # row's first token follows the match. A short match that says either is judged apart
    # from the other short matches.
    follows: str = ""
    # per token of the first row, as far as the drafter counted (a drafter that counts
    # continuations says so): (the share of the earlier occurrences of everything before it
    # that it followed, how many occurrences that share rests on)
    continuation: tuple[tuple[float, int], ...] = ()
    # where the first row was copied from, where the drafter says (``AT_CURSOR``: right after
    # the place the last accepted draft was copied from)
    source: str = ""
    # how many of the last rows are a second source's guesses beside the drafter's own (the
    # static table's other usual followers): the policy learns their worth apart and sends
    # them only where it pays. Never all the rows: a proposal of such rows alone says 0.
    alternatives: int = 0

    def sendable(self, rows: DraftRows, alternatives: int | None = None) -> "Proposal":
        """This proposal with the rows actually sent (``alternatives`` of them the second
        source's; default: as many as it had): what speaks of its first row (``follows``,
        ``continuation``) only while the first row sent still begins with it."""
        extra = self.alternatives if alternatives is None else alternatives
        extra = extra if extra < len(rows) else 0
        if self._same_first(rows):
            return replace(self, rows=rows, alternatives=extra)
        return replace(self, rows=rows, follows="", continuation=(), source="", alternatives=extra)

    def _same_first(self, rows: DraftRows) -> bool:
        return bool(rows and rows[0]) and rows[0][0] == self.rows[0][0]


class DraftConfig(Protocol):
    """What a drafter reads of its settings (``engine.settings.DraftSettings``)."""

    drafter: str
    draft_count: int
    ngram_order: int
    ngram_min: int
    options: Mapping[str, Any]


class Drafter(ABC):
    name: ClassVar[str]
    summary: ClassVar[str]
    multi_row: ClassVar[bool] = False
    # False only for ``none``: the loop may then queue each pass before the last is read.
    drafts: ClassVar[bool] = True
    # Options for benchmarks that decode the same prompts again and again: no memory carried
    # in from other chats, so a measurement is of drafting, not of recall.
    measurement_options: ClassVar[dict] = {}
    # the ``options`` a request may set for this drafter (see _options.py)
    options: ClassVar[dict[str, Option]] = {}

    attached_model: str | None = None
    attached_bigram: bool = False
    attached_static_table: bool = False
    attached_corpus_index: bool = False

    def __init__(self, settings: DraftConfig):
        self.settings = settings
        self.option = self.check_options(settings.options if settings is not None else {})

    @classmethod
    def check_options(cls, given: Mapping) -> dict:
        """``given`` checked against ``options`` (EngineError naming a bad one), defaults filled in."""
        return read_options(cls.name, cls.options, given)

    @property
    def wants_target_topk(self) -> int:
        """How many of the target's top tokens per verified position ``observe`` wants (0: none)."""
        return 0

    @property
    def wants_model_bigram(self) -> bool:
        """Whether ``attach_model`` should bring the model's bigram table (costly once per model)."""
        return False

    @property
    def wants_static_table(self) -> bool:
        """Whether ``attach_model`` should bring the static n-gram table of the model's
        tokenizer (built once per tokenizer where none is shipped)."""
        return False

    @property
    def wants_corpus_index(self) -> bool:
        """Whether ``attach_model`` should bring the corpus index of the model's tokenizer
        (``engine/runtime/corpus_index.py``: built once per tokenizer)."""
        return False

    @property
    def rows_per_pass(self) -> int:
        """The most draft rows one proposal holds."""
        return 1

    def attach_model(
        self,
        model_key: str,
        *,
        bigram=None,
        static_table=None,
        stores: DrafterStores | None = None,
        vocab_size: int | None = None,
        corpus_index=None,
    ) -> None:
        """The session hands over the model's token data (see the module docstring)."""
        self.attached_model = model_key
        self.attached_bigram = bigram is not None
        self.attached_static_table = static_table is not None
        self.attached_corpus_index = corpus_index is not None
        self.use_model(model_key, bigram=bigram, stores=stores, vocab_size=vocab_size)
        if static_table is not None:
            self.use_static_table(static_table)
        if corpus_index is not None:
            self.use_corpus_index(corpus_index)

    def use_model(
        self,
        model_key: str,
        *,
        bigram=None,
        stores: DrafterStores | None = None,
        vocab_size: int | None = None,
    ) -> None:
        """Keep what this drafter needs of ``attach_model``'s data (default: nothing)."""

    def use_static_table(self, table) -> None:
        """Keep the static n-gram table ``attach_model`` brought (default: not wanted)."""

    def use_corpus_index(self, index) -> None:
        """Keep the corpus index ``attach_model`` brought (default: not wanted)."""

    def flush(self) -> None:
        """Save persistent memory now (default: there is none)."""

    @abstractmethod
    def reset(self, prompt_tokens: Sequence[int]) -> None:
        """Forget the conversation and index ``prompt_tokens``."""

    def extend(self, tokens: Sequence[int]) -> None:
        """Context the model did not generate (e.g. the next user turn)."""
        self.observe(tokens)

    @abstractmethod
    def propose(self, k: int) -> Proposal:
        """Up to ``k`` guessed next tokens per row, and the match they rest on."""

    @abstractmethod
    def observe(
        self,
        emitted: Sequence[int],
        *,
        accepted: int = 0,
        drafted: int = 0,
        row: int = 0,
        target_topk: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Tokens appended to the history by the last pass.

        ``accepted``: how many of row ``row``'s draft tokens were kept, of ``drafted`` sent.
        ``target_topk[i]``: the target's top tokens at the position that produced
        ``emitted[i]`` (only when ``wants_target_topk`` > 0).
        """


MATCH_LOOKBACK = 32


def matched_before(tokens: Sequence[int], start: int, known: int, cap: int = MATCH_LOOKBACK) -> int:
    """Length of the match between the tokens ending just before ``start`` and the end of
    ``tokens``, given that the last ``known`` already match (counted up to ``cap``)."""
    end = len(tokens)
    length = known
    while (
        length < cap
        and start - length - 1 >= 0
        and tokens[start - length - 1] == tokens[end - length - 1]
    ):
        length += 1
    return length
