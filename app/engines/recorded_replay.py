"""Replay over an answer's recorded tokens, on this machine, without any model.

The engine's replay tokenizes the answer's prompt with the loaded model. That is not
possible for an answer that came from a server (its model is not here) or from another
model than the one loaded (another tokenizer). What the app does have is the answer's own
tokens, streamed with their provenance, and the tokens of the chat's earlier answers from
the same model. Drafters are replayed over those (``engine.runtime.replay.replay_many``): the
prompt's own words are missing, so every result is marked as an estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from engine.events import ReplayOutcome
from engine.runtime.replay import replay_many

NO_PROMPT = "prompt not recorded: replayed after this chat's earlier answers only"


def replay_recorded(
    earlier: Sequence[int], answer: Sequence[int], ended: bool, configs, greedy: bool
) -> list[ReplayOutcome]:
    """Replay ``configs`` over ``answer`` after ``earlier`` (best-effort prompt tokens).

    ``ended``: the answer stopped at its end-of-answer token. Which token that was is not
    recorded, so it stands for an id no drafter has seen (it can only come from the
    target, as in a run whose drafter never guessed the end). Results are best first by
    tokens per pass (no verify-cost curve: the machine that answered is not this one)."""
    end = max([*earlier, *answer], default=0) + 1 if ended else None
    results = replay_many(
        list(earlier),
        list(answer),
        configs,
        end_token=end,
        max_tokens=None if ended else len(answer),
        greedy=greedy,
    )
    return [replace(result.outcome(), notes=(NO_PROMPT, *result.notes)) for result in results]
