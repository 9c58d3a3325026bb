"""Live speculation numbers for the answer being written, and the per-message footer.

No formula lives here: while streaming, each ``PassEvent`` is counted into the engine's own
``engine.stats.DecodeStats``; when the answer is done the engine's final figures replace
them. The footer shows the figures that matter at a glance (``footer_text``) and every
figure of the engine's ``summary_parts`` on hover (``footer_details``).
"""

from __future__ import annotations

from engine.stats import (
    DecodeStats,
    estimate_is_guess,
    estimate_label,
    finish_text,
    speed_words,
    stored_figures,
    summary_parts,
    tokens_per_pass_of,
)

from .continuable import INTERRUPTED

DRAFT_COUNT = "draft_count"  # the app's key in an answer's stats: the draft count it asked for


def draft_count_of(stats: dict, fallback: int = 1) -> int:
    """The most tokens an answer could guess a pass: the draft count it was asked with, else
    (older answers, damaged figures) its longest draft sent, else ``fallback``."""
    asked = stats.get(DRAFT_COUNT)
    if isinstance(asked, int) and not isinstance(asked, bool) and asked >= 1:
        return asked
    longest = stats.get("position_drafted")
    if isinstance(longest, list) and longest:
        return len(longest)
    return fallback


NOT_MEASURED = "speed-up not measured yet"
EDITED = "edited"  # the finish reason of an answer whose text the person changed
EDITED_DETAILS = (
    "You edited this answer. Its highlights and speed figures belonged to the text the "
    "model wrote, so they were dropped."
)


class LiveStats:
    """One answer's numbers: the engine's ``DecodeStats`` plus the last pass."""

    def __init__(self):
        self.stats = DecodeStats()
        self.last_emitted = 0  # tokens the most recent pass added to the answer
        self.last_drafted = 0
        self.final: dict = {}  # the engine's published figures once the answer is done
        self.timing: dict = {}
        self.pass_events: list = []  # in order (a stop string's cut counts them)

    def record(self, event) -> None:
        """Add an ``engine.events.PassEvent`` (its counts already follow engine/stats.py)."""
        self.stats.record_pass(event.drafted, event.accepted, event.emitted, event.seconds)
        self.pass_events.append(event)
        self.last_emitted = event.emitted
        self.last_drafted = event.drafted

    def finish(self, stats: dict, timing: dict) -> None:
        """Take the engine's final figures (a stored answer's: untrusted, ``stored_figures``)."""
        stats, timing = stored_figures(stats, timing)
        if stats:
            self.stats = DecodeStats.from_dict(stats, timing)
            self.final = dict(stats)
            self.timing = dict(timing)

    @classmethod
    def of_message(cls, stats: dict, timing: dict) -> "LiveStats":
        """The numbers of a stored answer (no 'last pass')."""
        live = cls()
        live.finish(stats, timing)
        return live

    @property
    def passes(self) -> int:
        return self.stats.passes

    @property
    def drafted(self) -> int:
        return self.stats.drafted

    @property
    def tokens_per_pass(self) -> float:
        return tokens_per_pass_of(self.final) if self.final else self.stats.tokens_per_pass

    @property
    def acceptance_rate(self) -> float:
        return self.final.get("acceptance_rate", self.stats.acceptance_rate)

    @property
    def tokens_per_s(self) -> float:
        return self.timing.get("tokens_per_s", self.stats.tokens_per_s)

    @property
    def estimated_speedup(self) -> float | None:
        return self.stats.estimated_speedup


def speedup_phrase(stats: dict) -> str:
    """'≈2.1× faster than plain', '≈10% slower than plain', 'about as fast as plain' (naming a
    device curve other than this machine's), 'speed-up not measured yet' for an estimate on a
    guessed curve, '' without an estimate."""
    speedup, curve = stats.get("estimated_speedup"), stats.get("estimate_curve")
    if not speedup:
        return ""
    if estimate_is_guess(curve):
        return NOT_MEASURED
    named = f" ({estimate_label(curve)})" if curve and curve != "measured" else ""
    return f"{speed_words(speedup)}{named}"


def footer_text(tokens: int, stats: dict, timing: dict, finish_reason: str | None = None) -> str:
    """The answer's line under it, to read at a glance: '≈2.1× faster than plain · 3.4
    tokens/pass · 62% of drafts accepted', then 'stopped' or 'max tokens reached' when so.
    Every other figure is in ``footer_details``. An edited answer says 'edited' only."""
    if finish_reason == EDITED:
        return EDITED
    stats, _ = stored_figures(stats)
    if finish_reason == INTERRUPTED and not tokens:
        return f"Not answered: {interruption(stats)}"
    if not stats.get("passes"):  # no figures (or damaged ones): 'N tokens' and no more
        parts = [summary_parts(stats, timing, None, tokens)[0]]
    elif not stats.get("drafted"):
        parts = [f"{tokens_per_pass_of(stats):.1f} tokens/pass", "no drafts"]
    else:
        parts = [
            speedup_phrase(stats),
            f"{tokens_per_pass_of(stats):.1f} tokens/pass",
            f"{stats.get('acceptance_rate', 0.0):.0%} of drafts accepted",
        ]
    parts.append(ending(finish_reason, stats))
    parts.append(seed_text(stats))
    return " · ".join(part for part in parts if part)


def seed_text(stats: dict) -> str:
    """'seed 123456789' for an answer sampled with a seed the app chose, else ''."""
    seed = stats.get("seed")
    return f"seed {seed}" if isinstance(seed, int) and not isinstance(seed, bool) else ""


def interruption(stats: dict) -> str:
    """Why an interrupted answer stopped, as the engine or the server said it."""
    return str(stats.get(INTERRUPTED) or "the engine stopped part-way")


def ending(finish_reason: str | None, stats: dict) -> str:
    """'stopped', 'max tokens reached', 'interrupted: why', or '' for an answer that ended by
    itself."""
    if finish_reason == INTERRUPTED:
        return f"interrupted: {interruption(stats)}"
    return finish_text(finish_reason)


def footer_details(tokens: int, stats: dict, timing: dict, finish_reason: str | None = None) -> str:
    """Every figure of the answer, one a line (the footer's tooltip): the engine's
    ``summary_parts``."""
    if finish_reason == EDITED:
        return EDITED_DETAILS
    lines = summary_parts(stats, timing, finish_reason, tokens)
    if finish_reason == INTERRUPTED:
        lines.append(ending(finish_reason, stored_figures(stats)[0]))
    seed = seed_text(stats if isinstance(stats, dict) else {})
    if seed:
        lines.append(f"{seed}: the same seed and settings write this answer again")
    return "\n".join(lines)
