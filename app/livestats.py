"""Live speculation numbers for the answer being written, and the per-message footer.

No formula lives here: while streaming, each ``PassEvent`` is counted into the engine's own
``engine.stats.DecodeStats``; when the answer is done the engine's final figures replace
them, and the footer is the engine's ``summary_line``.
"""

from __future__ import annotations

from engine.stats import DecodeStats, stored_figures, summary_line


class LiveStats:
    """One answer's numbers: the engine's ``DecodeStats`` plus the last pass."""

    def __init__(self):
        self.stats = DecodeStats()
        self.last_emitted = 0  # tokens the most recent pass added to the answer
        self.last_drafted = 0
        self.final: dict = {}  # the engine's published figures once the answer is done
        self.timing: dict = {}

    def record(self, event) -> None:
        """Add an ``engine.events.PassEvent`` (its counts already follow engine/stats.py)."""
        self.stats.record_pass(event.drafted, event.accepted, event.emitted, event.seconds)
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
        return self.final.get("tokens_per_pass", self.stats.tokens_per_pass)

    @property
    def acceptance_rate(self) -> float:
        return self.final.get("acceptance_rate", self.stats.acceptance_rate)

    @property
    def tokens_per_s(self) -> float:
        return self.timing.get("tokens_per_s", self.stats.tokens_per_s)

    @property
    def estimated_speedup(self) -> float | None:
        return self.stats.estimated_speedup


def footer_text(tokens: int, stats: dict, timing: dict, finish_reason: str | None = None) -> str:
    """The answer's line under it: the engine's ``summary_line``."""
    return summary_line(stats, timing, finish_reason, tokens)
