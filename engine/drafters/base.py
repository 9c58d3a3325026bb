"""The drafter protocol. A drafter knows tokens, never the model.

Life of a drafter inside one chat:
- ``reset(prompt_tokens)`` when a conversation starts (index the prompt);
- ``extend(tokens)`` when later context arrives that the model did not generate
  (the next user turn);
- each pass: ``propose(history, k)`` returns draft rows (lists of token ids, each at
  most ``k`` long; ``[]`` means "no guess", and the pass decodes plainly), then
  ``observe(emitted, accepted=..., drafted=..., row=..., target_topk=...)`` with the tokens
  the pass emitted (accepted drafts followed by the target's own token). An adaptive
  policy may send fewer tokens than proposed, or none: ``drafted`` says how many went.
- after ``propose``, ``match_length`` may say how many tokens at the end of the history
  the proposal's source matched (0: the drafter does not say). The adaptive policy keeps
  acceptance apart per match-length class, so a long copy is not judged by short guesses.

``history`` is the whole token history (prompt and answer so far); a drafter may keep
its own incremental index instead of scanning it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from ..settings import DraftSettings

DraftRows = list[list[int]]


class Drafter(ABC):
    name: ClassVar[str]
    summary: ClassVar[str]
    multi_row: ClassVar[bool] = False
    match_length: int = 0
    # Options for benchmarks that decode the same prompts again and again: no memory carried
    # in from other chats, so a measurement is of drafting, not of recall.
    measurement_options: ClassVar[dict] = {}

    def __init__(self, settings: DraftSettings):
        self.settings = settings

    @property
    def wants_target_topk(self) -> int:
        """How many of the target's top tokens per verified position ``observe`` wants (0: none)."""
        return 0

    @abstractmethod
    def reset(self, prompt_tokens: Sequence[int]) -> None:
        """Forget the conversation and index ``prompt_tokens``."""

    def extend(self, tokens: Sequence[int]) -> None:
        """Context the model did not generate (e.g. the next user turn)."""
        self.observe(tokens)

    @abstractmethod
    def propose(self, history: Sequence[int], k: int) -> DraftRows:
        """Up to ``k`` guessed next tokens per row."""

    @abstractmethod
    def observe(self, emitted: Sequence[int], *, accepted: int = 0, drafted: int = 0, row: int = 0,
                target_topk: Sequence[Sequence[int]] | None = None) -> None:
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
    while length < cap and start - length - 1 >= 0 and tokens[start - length - 1] == tokens[end - length - 1]:
        length += 1
    return length
