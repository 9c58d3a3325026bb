"""Decoding statistics: the one definition used by the CLI, the GUI and the benchmarks.

- passes: target forward passes after prefill.
- drafted: draft tokens sent to verify (a multi-row drafter's tree counts every node, so
  its acceptance_rate is per verified token, not per row). accepted: draft tokens kept.
- tokens_per_pass = emitted / passes (mean acceptance length).
- acceptance_rate = accepted / drafted.
- per_position_acceptance[i]: share of passes with a draft at position i where it was accepted.
- llama.cpp-style drafter counters: calls, gen_drafts, acc_drafts, gen_tokens, acc_tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


@dataclass
class DecodeStats:
    drafter: str = "none"
    speculation: str = "on"
    passes: int = 0
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    prompt_tokens: int = 0
    prefilled_tokens: int = 0  # prompt tokens actually run (the rest came from a reused cache)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    drafter_s: float = 0.0  # time spent in propose + observe
    calls: int = 0  # propose() calls
    gen_drafts: int = 0  # passes that sent at least one draft token
    acc_drafts: int = 0  # passes where at least one draft token was accepted
    position_drafted: list[int] = field(default_factory=list)
    position_accepted: list[int] = field(default_factory=list)
    accepted_length_counts: list[int] = field(default_factory=list)  # [n] = passes accepting n

    def record_pass(self, drafted: int, accepted: int, emitted: int, seconds: float) -> None:
        self.passes += 1
        self.calls += 1
        self.drafted += drafted
        self.accepted += accepted
        self.emitted += emitted
        self.decode_s += seconds
        if drafted:
            self.gen_drafts += 1
        if accepted:
            self.acc_drafts += 1
        _grow(self.position_drafted, drafted)
        _grow(self.position_accepted, drafted)
        _grow(self.accepted_length_counts, accepted + 1)
        for i in range(drafted):
            self.position_drafted[i] += 1
        for i in range(accepted):
            self.position_accepted[i] += 1
        self.accepted_length_counts[accepted] += 1

    @property
    def tokens_per_pass(self) -> float:
        return _ratio(self.emitted, self.passes)

    @property
    def acceptance_rate(self) -> float:
        return _ratio(self.accepted, self.drafted)

    @property
    def per_position_acceptance(self) -> list[float]:
        return [_ratio(a, d) for a, d in zip(self.position_accepted, self.position_drafted)]

    @property
    def tokens_per_s(self) -> float:
        return _ratio(self.emitted, self.decode_s)

    def to_dict(self) -> dict:
        return {
            "drafter": self.drafter,
            "speculation": self.speculation,
            "passes": self.passes,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "emitted": self.emitted,
            "tokens_per_pass": round(self.tokens_per_pass, 4),
            "acceptance_rate": round(self.acceptance_rate, 4),
            "per_position_acceptance": [round(x, 4) for x in self.per_position_acceptance],
            "accepted_length_counts": list(self.accepted_length_counts),
            "drafter_counters": {
                "calls": self.calls,
                "gen_drafts": self.gen_drafts,
                "acc_drafts": self.acc_drafts,
                "gen_tokens": self.drafted,
                "acc_tokens": self.accepted,
            },
        }

    def timing_dict(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "prefilled_tokens": self.prefilled_tokens,
            "prefill_s": round(self.prefill_s, 4),
            "decode_s": round(self.decode_s, 4),
            "drafter_s": round(self.drafter_s, 4),
            "tokens_per_s": round(self.tokens_per_s, 2),
        }

    def llama_cpp_line(self) -> str:
        """The counters as llama.cpp prints them."""
        return (f"draft acceptance rate = {self.acceptance_rate:.5f} ({self.accepted} accepted / "
                f"{self.drafted} generated)\nstatistics {self.drafter}: #calls = {self.calls}, "
                f"#gen drafts = {self.gen_drafts}, #acc drafts = {self.acc_drafts}, "
                f"#gen tokens = {self.drafted}, #acc tokens = {self.accepted}")


def _grow(values: list[int], length: int) -> None:
    if len(values) < length:
        values.extend([0] * (length - len(values)))
