"""The drafter registry. Adding a drafter: write its file, add its class to the tuple below."""

from __future__ import annotations

from ..errors import EngineError
from .base import Drafter, DraftRows
from .frequency import FrequencyDrafter
from .none import NoDrafter
from .prompt_lookup import PromptLookupDrafter

DRAFTERS: dict[str, type[Drafter]] = {cls.name: cls for cls in (
    NoDrafter,
    FrequencyDrafter,
    PromptLookupDrafter,
)}

DEFAULT_DRAFTER = "prompt-lookup"


def resolve_drafter_name(name: str | None) -> str:
    if name in (None, "", "default"):
        return DEFAULT_DRAFTER
    if name not in DRAFTERS:
        raise EngineError(f"Unknown drafter {name!r}. Choose one of: {', '.join(DRAFTERS)}.")
    return name


def make_drafter(settings) -> Drafter:
    return DRAFTERS[resolve_drafter_name(settings.drafter)](settings)


__all__ = ["DRAFTERS", "DEFAULT_DRAFTER", "Drafter", "DraftRows", "make_drafter",
           "resolve_drafter_name"]
