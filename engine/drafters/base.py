"""The drafter protocol. A drafter knows tokens, never the model.

Life of a drafter inside one chat:
- ``reset(prompt_tokens)`` when a conversation starts (index the prompt);
- ``extend(tokens)`` when later context arrives that the model did not generate
  (the next user turn);
- each pass: ``propose(history, k)`` returns draft rows (lists of token ids, each at
  most ``k`` long; ``[]`` means "no guess", and the pass decodes plainly), then
  ``observe(emitted, accepted=..., row=..., target_topk=...)`` with the tokens the pass
  emitted (accepted drafts followed by the target's own token).

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
    def observe(self, emitted: Sequence[int], *, accepted: int = 0, row: int = 0,
                target_topk: Sequence[Sequence[int]] | None = None) -> None:
        """Tokens appended to the history by the last pass.

        ``accepted``: how many of row ``row``'s draft tokens were kept.
        ``target_topk[i]``: the target's top tokens at the position that produced
        ``emitted[i]`` (only when ``wants_target_topk`` > 0).
        """
