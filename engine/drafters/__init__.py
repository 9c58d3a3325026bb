"""The drafter registry. Adding a drafter: write its file, add its class to the tuple below."""

from __future__ import annotations

from ..errors import EngineError
from .base import Drafter, DraftRows, Proposal
from .frequency import FrequencyDrafter
from .nasd import NasdDrafter
from .ngram_cache import NgramCacheDrafter
from .ngram_map_k import NgramMapKDrafter
from .ngram_map_k4v import NgramMapK4VDrafter
from .ngram_simple import NgramSimpleDrafter
from .ngrammys import NgrammysDrafter
from .none import NoDrafter
from .prompt_lookup import PromptLookupDrafter
from .suffix import SuffixDrafter
from .suffix_static import SuffixStaticDrafter
from .token_recycling import SuffixRecyclingDrafter, TokenRecyclingDrafter

DRAFTERS: dict[str, type[Drafter]] = {
    cls.name: cls
    for cls in (
        NoDrafter,
        FrequencyDrafter,
        PromptLookupDrafter,
        NgramSimpleDrafter,
        NgramMapKDrafter,
        NgramMapK4VDrafter,
        NgramCacheDrafter,
        NasdDrafter,
        NgrammysDrafter,
        SuffixDrafter,
        SuffixStaticDrafter,
        TokenRecyclingDrafter,
        SuffixRecyclingDrafter,
    )
}

# suffix plus the static table's row: on real chat's dev split 5-8% above suffix on the
# M5 Max, H100 and this CPU's curves and level on the M2 Pro estimate, and level with it
# (0.99-1.03x) on the check set's own answers (resources/readme/benchmarks/results.md and
# devices.md); suffix itself was the best on the tuning prompts (engine.bench.tune: 2.44x,
# prompt-lookup 2.40x, ngram-cache 2.36x predicted, cold)
DEFAULT_DRAFTER = "suffix-static"


def resolve_drafter_name(name: str | None) -> str:
    if name in (None, "", "default"):
        return DEFAULT_DRAFTER
    if not isinstance(name, str) or name not in DRAFTERS:
        raise EngineError(f"Unknown drafter {name!r}. Choose one of: {', '.join(DRAFTERS)}.")
    return name


def make_drafter(settings) -> Drafter:
    return DRAFTERS[resolve_drafter_name(settings.drafter)](settings)


def measurement_options(name: str) -> dict:
    """The drafter's options for repeated benchmark runs (see ``Drafter.measurement_options``)."""
    return dict(DRAFTERS[resolve_drafter_name(name)].measurement_options)


__all__ = [
    "DRAFTERS",
    "DEFAULT_DRAFTER",
    "Drafter",
    "DraftRows",
    "Proposal",
    "make_drafter",
    "measurement_options",
    "resolve_drafter_name",
]
