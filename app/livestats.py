"""Live speculation numbers for the answer being written, and the per-message footer.

While streaming, the numbers come from ``PassEvent``s (the same sums the engine keeps);
when the answer is done the engine's own ``stats``/``timing`` replace them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LiveStats:
    passes: int = 0
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    seconds: float = 0.0
    last_emitted: int = 0  # tokens the most recent pass produced
    last_drafted: int = 0
    mean: float = 0.0  # running tokens per pass (the engine's figure)
    final_rate: float | None = None  # the engine's figures once the answer is done
    final_tokens_per_s: float | None = None

    def record(self, event) -> None:
        """Add an ``engine.events.PassEvent``."""
        self.passes += 1
        self.drafted += event.drafted
        self.accepted += event.accepted
        self.emitted += event.emitted
        self.seconds += event.seconds
        self.last_emitted = event.emitted
        self.last_drafted = event.drafted
        self.mean = event.tokens_per_pass

    def finish(self, stats: dict, timing: dict) -> None:
        """Take the engine's final figures."""
        if not stats:
            return
        self.passes = stats.get("passes", self.passes)
        self.drafted = stats.get("drafted", self.drafted)
        self.accepted = stats.get("accepted", self.accepted)
        self.emitted = stats.get("emitted", self.emitted)
        self.mean = stats.get("tokens_per_pass", self.mean)
        self.seconds = timing.get("decode_s", self.seconds)
        self.final_rate = stats.get("acceptance_rate")
        self.final_tokens_per_s = timing.get("tokens_per_s")

    @property
    def tokens_per_pass(self) -> float:
        return self.mean

    @property
    def acceptance_rate(self) -> float:
        if self.final_rate is not None:
            return self.final_rate
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_s(self) -> float:
        if self.final_tokens_per_s is not None:
            return self.final_tokens_per_s
        return self.emitted / self.seconds if self.seconds else 0.0


def footer_text(tokens: int, stats: dict, timing: dict, finish_reason: str | None = None) -> str:
    """'143 tokens · 2.7 tokens/pass · 61% drafts accepted · 18.4 tok/s' from engine numbers."""
    parts = [f"{tokens} token{'s' if tokens != 1 else ''}"]
    if stats:
        parts.append(f"{stats.get('tokens_per_pass', 0.0):.1f} tokens/pass")
        if stats.get("drafted"):
            parts.append(f"{stats.get('acceptance_rate', 0.0):.0%} drafts accepted")
        else:
            parts.append("no drafts")
    if timing and "tokens_per_s" in timing:
        parts.append(f"{timing['tokens_per_s']:.1f} tok/s")
    if stats and stats.get("drafter"):
        parts.append(stats["drafter"])
    if finish_reason == "cancelled":
        parts.append("stopped")
    elif finish_reason == "length":
        parts.append("max tokens reached")
    return " · ".join(parts)
