"""Decoding statistics: the one definition used by the CLI, the GUI and the benchmarks.

``DEFINITIONS`` says what each figure is, in the words the app's tooltips and the CLI show;
below, how the counting treats the cases those words leave open.

- drafted: a multi-row drafter's tree counts every node, so its acceptance_rate is per
  verified token, not per row.
- The end-of-answer token is not part of the answer and is never counted in emitted or
  accepted (an accepted end-of-answer guess saves no pass: the target would have produced
  it in that same pass). It still counts in drafted when it was sent to verify. So
  "N tokens" is always the visible answer.
- tokens_per_pass counts what the passes produced, the end-of-answer token included: every
  pass produces at least one token, so it is never below 1 (plain decoding is exactly 1;
  without that token an answer of 9 tokens and its end in 10 passes read 0.9).
- pass_sizes[j]: the tokens pass j verified (1 + the draft tokens it sent).
- tree_passes: passes that verified several draft rows as one tree.
- queued_passes: one-token passes queued before their input token was read (plain
  decoding's pipelining, and the speculative loop's blind passes).
- estimated_speedup, from a verify-cost curve c(n) (seconds for one pass over n tokens) and
  its pipelined share p (what a queued one-token pass costs of c(1); 1 where not measured):
  (emitted + end) * p * c(1) over the sum of c(pass_sizes[j]) - queued_passes * (1 - p) *
  c(1) + tree_passes * the curve's tree_extra + drafter time. Both sides are predicted.
  estimate_curve names the curve: "measured" (for this model on this machine), a device
  curve's name, or a guess (the model's curve was not measured yet: ``estimate_is_guess``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace


# Each figure in plain words: the app's tooltips and labels, the CLI's notes (one definition).
DEFINITIONS = {
    "emitted": "Tokens of the visible answer.",
    "passes": "Forward passes of the model after reading the prompt; each one produces at "
    "least one token (llama.cpp: calls).",
    "tokens_per_pass": "Tokens the forward passes produced per pass, the end of the answer "
    "included: 1 is plain decoding, more means accepted drafts.",
    "drafted": "Draft tokens the drafter guessed and the model checked (llama.cpp: gen tokens).",
    "accepted": "Draft tokens the model agreed with and kept (llama.cpp: acc tokens).",
    "acceptance_rate": "Share of the draft tokens sent that the model accepted (accepted ÷ sent).",
    "gen_drafts": "Drafts sent: forward passes that checked at least one draft token "
    "(llama.cpp: gen drafts).",
    "acc_drafts": "Drafts accepted: forward passes that kept at least one of their draft "
    "tokens (llama.cpp: acc drafts).",
    "per_position_acceptance": "Of the passes that drafted a token at this position, the "
    "share where it was accepted.",
    "accepted_length_counts": "Share of passes that accepted 0, 1, 2, … drafted tokens.",
    "estimated_speedup": "Plain decoding's predicted time over this answer's, from the "
    "verify cost of this model on this machine (seconds per forward pass of 1, 2, … tokens), "
    "or the device curve named.",
    "tokens_per_s": "Tokens of the answer per second while writing it (after the prompt was read).",
    "first_token_s": "From sending to the first tokens: waiting for the engine, reading the "
    "prompt and the first pass.",
    "waited_s": "The part of the first-token time spent waiting for the engine (another "
    "answer, or background work such as measuring the verify cost).",
}


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_number(value) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _is_list_of(check):
    return lambda value: isinstance(value, list) and all(check(item) for item in value)


# What each stored figure must be; a stored answer's figures are untrusted input.
_STORED_KINDS = {
    **dict.fromkeys(("drafter", "speculation"), lambda v: isinstance(v, str)),
    "estimate_curve": lambda v: v is None or isinstance(v, str),
    **dict.fromkeys(("greedy", "ended"), lambda v: isinstance(v, bool)),
    **dict.fromkeys(
        ("passes", "drafted", "accepted", "emitted", "tree_passes", "queued_passes"), _is_count
    ),
    **dict.fromkeys(("tokens_per_pass", "acceptance_rate"), _is_number),
    "estimated_speedup": lambda v: v is None or _is_number(v),
    "per_position_acceptance": _is_list_of(_is_number),
    **dict.fromkeys(
        ("accepted_length_counts", "position_drafted", "position_accepted", "pass_sizes"),
        _is_list_of(_is_count),
    ),
    "drafter_counters": lambda v: isinstance(v, dict) and all(map(_is_count, v.values())),
    **dict.fromkeys(("prompt_tokens", "prefilled_tokens"), _is_count),
}


def stored_figures(stats, timing=None) -> tuple[dict, dict]:
    """A stored answer's ``to_dict()`` and ``timing_dict()`` with every figure that is not of
    its kind left out (read as absent: 0, empty or unknown), so a damaged history row shows
    what it can instead of raising."""

    def kept(figures, unknown) -> dict:
        if not isinstance(figures, dict):
            return {}
        return {k: v for k, v in figures.items() if _STORED_KINDS.get(k, unknown)(v)}

    return kept(stats, lambda value: True), kept(timing, _is_number)


def _summed(first: list[int], second: list[int]) -> list[int]:
    longer, shorter = (first, second) if len(first) >= len(second) else (second, first)
    return [n + (shorter[i] if i < len(shorter) else 0) for i, n in enumerate(longer)]


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


@dataclass
class DecodeStats:
    drafter: str = "none"
    speculation: str = "on"
    greedy: bool = True  # sampled answers: replays of them are estimates
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
    first_pass_s: float = 0.0
    waited_s: float = 0.0  # from the request until the engine took it up
    ended: bool = False  # the answer ended with the end-of-answer token
    estimated_speedup: float | None = None
    estimate_curve: str | None = None
    pass_sizes: list[int] = field(default_factory=list)
    tree_passes: int = 0
    queued_passes: int = 0

    def record_pass(
        self,
        drafted: int,
        accepted: int,
        emitted: int,
        seconds: float,
        ended: bool = False,
        tree: bool = False,
        queued: bool = False,
    ) -> tuple[int, int]:
        """Count one pass; ``emitted``/``accepted`` include an end-of-answer token when
        ``ended``; ``queued``: a one-token pass queued before its input was read. Returns
        (accepted, emitted) as counted (without that token)."""
        if ended:
            self.ended = True
            emitted -= 1
            accepted = min(accepted, emitted)
        if not self.passes:
            self.first_pass_s = seconds
        self.passes += 1
        self.pass_sizes.append(1 + drafted)
        self.tree_passes += tree
        self.queued_passes += queued
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
        return accepted, emitted

    def draft_sizes(self) -> dict[int, int]:
        """Passes by how many draft tokens they sent (0 = plain)."""
        drafted = self.position_drafted + [0]
        sizes = {0: self.passes - (drafted[0] if self.position_drafted else 0)}
        for d in range(1, len(drafted)):
            sizes[d] = drafted[d - 1] - drafted[d]
        return {d: n for d, n in sizes.items() if n}

    def estimate_speedup(self, cost, source: str | None = None) -> float | None:
        """Set and return ``estimated_speedup`` from a cost curve ``cost(n)`` (seconds);
        ``source`` names the curve (default: the curve's own ``source``)."""
        if not self.passes or cost is None:
            return None
        sizes = self.pass_sizes or [1 + d for d, n in self.draft_sizes().items() for _ in range(n)]
        pipelined = getattr(cost, "pipelined", None) or 1.0
        spent = sum(cost(n) for n in sizes) + self.drafter_s
        spent -= self.queued_passes * (1.0 - pipelined) * cost(1)
        spent += self.tree_passes * max(getattr(cost, "tree_extra", 0.0), 0.0)
        plain = (self.emitted + int(self.ended)) * pipelined * cost(1)
        self.estimated_speedup = plain / spent if spent > 0 else None
        self.estimate_curve = source or getattr(cost, "source", None)
        return self.estimated_speedup

    def merged(self, later: "DecodeStats") -> "DecodeStats":
        """These numbers followed by those of this answer's continuation (``later``): the
        whole answer's. Waiting, prompt reading and the first token stay this part's."""
        speedup = None
        if self.estimated_speedup and later.estimated_speedup:  # spent / c(1) of each part
            spent = (self.emitted + int(self.ended)) / self.estimated_speedup + (
                later.emitted + int(later.ended)
            ) / later.estimated_speedup
            speedup = (self.emitted + later.emitted + int(later.ended)) / spent
        return replace(
            self,
            passes=self.passes + later.passes,
            drafted=self.drafted + later.drafted,
            accepted=self.accepted + later.accepted,
            emitted=self.emitted + later.emitted,
            decode_s=self.decode_s + later.decode_s,
            drafter_s=self.drafter_s + later.drafter_s,
            calls=self.calls + later.calls,
            gen_drafts=self.gen_drafts + later.gen_drafts,
            acc_drafts=self.acc_drafts + later.acc_drafts,
            position_drafted=_summed(self.position_drafted, later.position_drafted),
            position_accepted=_summed(self.position_accepted, later.position_accepted),
            accepted_length_counts=_summed(
                self.accepted_length_counts, later.accepted_length_counts
            ),
            ended=later.ended,
            estimated_speedup=speedup,
            estimate_curve=later.estimate_curve if speedup else None,
            pass_sizes=self.pass_sizes + later.pass_sizes,
            tree_passes=self.tree_passes + later.tree_passes,
            queued_passes=self.queued_passes + later.queued_passes,
        )

    @classmethod
    def from_dict(cls, stats: dict, timing: dict | None = None) -> "DecodeStats":
        """Rebuild from ``to_dict()`` and ``timing_dict()`` (a stored answer's numbers, figures
        not of their kind read as absent: ``stored_figures``)."""
        stats, timing = stored_figures(stats, timing)
        counters = stats.get("drafter_counters", {})
        lengths = [int(n) for n in stats.get("accepted_length_counts", [])]
        passes = int(stats.get("passes", 0))
        tree_passes = stats.get("tree_passes", 0)  # counted in passes, or not trusted
        queued_passes = stats.get("queued_passes", 0)
        rates = stats.get("per_position_acceptance", [])
        drafted_at = [int(n) for n in stats.get("position_drafted", [])]
        accepted_at = [int(n) for n in stats.get("position_accepted", [])]
        if not drafted_at and rates:  # older records: rates only
            drafted_at = [passes] * len(rates)
            accepted_at = [round(r * passes) for r in rates]
        return cls(
            drafter=str(stats.get("drafter", "none")),
            speculation=str(stats.get("speculation", "on")),
            greedy=bool(stats.get("greedy", True)),
            passes=passes,
            drafted=int(stats.get("drafted", 0)),
            accepted=int(stats.get("accepted", 0)),
            emitted=int(stats.get("emitted", 0)),
            prompt_tokens=int(timing.get("prompt_tokens", 0)),
            prefilled_tokens=int(timing.get("prefilled_tokens", 0)),
            prefill_s=float(timing.get("prefill_s", 0.0)),
            decode_s=float(timing.get("decode_s", 0.0)),
            drafter_s=float(timing.get("drafter_s", 0.0)),
            calls=int(counters.get("calls", passes)),
            gen_drafts=int(counters.get("gen_drafts", 0)),
            acc_drafts=int(counters.get("acc_drafts", 0)),
            position_drafted=drafted_at,
            position_accepted=accepted_at,
            accepted_length_counts=lengths,
            first_pass_s=max(
                float(timing.get("first_token_s", 0.0))
                - float(timing.get("prefill_s", 0.0))
                - float(timing.get("waited_s", 0.0)),
                0.0,
            ),
            waited_s=float(timing.get("waited_s", 0.0)),
            ended=bool(stats.get("ended", False)),
            estimated_speedup=stats.get("estimated_speedup"),
            estimate_curve=stats.get("estimate_curve"),
            pass_sizes=[n for n in stats.get("pass_sizes", []) if n > 0],
            tree_passes=tree_passes if tree_passes <= passes else 0,
            queued_passes=queued_passes if queued_passes <= passes else 0,
        )

    @property
    def first_token_s(self) -> float:
        return self.waited_s + self.prefill_s + self.first_pass_s

    @property
    def tokens_per_pass(self) -> float:
        return _ratio(self.emitted + int(self.ended), self.passes)

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
            "greedy": self.greedy,
            "passes": self.passes,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "emitted": self.emitted,
            "tokens_per_pass": round(self.tokens_per_pass, 4),
            "acceptance_rate": round(self.acceptance_rate, 4),
            "per_position_acceptance": [round(x, 4) for x in self.per_position_acceptance],
            "accepted_length_counts": list(self.accepted_length_counts),
            "position_drafted": list(self.position_drafted),
            "position_accepted": list(self.position_accepted),
            "ended": self.ended,
            "estimated_speedup": (
                round(self.estimated_speedup, 3) if self.estimated_speedup is not None else None
            ),
            "estimate_curve": self.estimate_curve,
            "pass_sizes": list(self.pass_sizes),
            "tree_passes": self.tree_passes,
            "queued_passes": self.queued_passes,
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
            "first_token_s": round(self.first_token_s, 4),
            "waited_s": round(self.waited_s, 4),
        }


def tokens_per_pass_of(stats: dict) -> float:
    """An answer's tokens per pass from its ``to_dict()`` counts, by the definition above
    (records stored before the end token counted read 0.9 where it took a pass of its own)."""
    figures, _ = stored_figures(stats)
    if figures.get("passes") and "emitted" in figures:
        return DecodeStats.from_dict(figures).tokens_per_pass
    return float(figures.get("tokens_per_pass", 0.0))


def with_wait(timing: dict, waited_s: float) -> dict:
    """An answer's ``timing_dict()`` once it is known that the request waited ``waited_s``
    for the engine before its answer began: the first token counts from the request."""
    if not timing:
        return timing
    return {
        **timing,
        "waited_s": round(waited_s, 4),
        "first_token_s": round(float(timing.get("first_token_s", 0.0)) + waited_s, 4),
    }


SHOWN_WAIT_S = 0.05  # a shorter wait is not worth a word in the summary


def summary_parts(
    stats: dict,
    timing: dict | None = None,
    finish_reason: str | None = None,
    tokens: int | None = None,
) -> list[str]:
    """['143 tokens', '7 passes', '2.7 tokens/pass', '24 of 40 drafts accepted (61%)',
    '≈1.8× faster than plain (estimate)', '18.4 tok/s', 'first token 0.21 s', 'ngram-cache']:
    every figure of one answer, from ``to_dict()``/``timing_dict()`` alone
    (``stored_figures``)."""
    stats, timing = stored_figures(stats, timing)
    emitted = int(stats["emitted"]) if "emitted" in stats else (tokens or 0)
    parts = [f"{emitted} token{'s' if emitted != 1 else ''}"]
    if stats:
        passes = int(stats.get("passes", 0))
        parts.append(f"{passes} pass{'es' if passes != 1 else ''}")
        parts.append(f"{tokens_per_pass_of(stats):.1f} tokens/pass")
        drafted = int(stats.get("drafted", 0))
        if drafted:
            parts.append(
                f"{stats.get('accepted', 0)} of {drafted} drafts accepted "
                f"({stats.get('acceptance_rate', 0.0):.0%})"
            )
        else:
            parts.append("no drafts")
        if stats.get("estimated_speedup"):
            parts.append(
                f"{speed_words(stats['estimated_speedup'])} "
                f"({estimate_label(stats.get('estimate_curve'))})"
            )
    if "tokens_per_s" in timing:
        parts.append(f"{timing['tokens_per_s']:.1f} tok/s")
    if timing.get("first_token_s"):
        waited = float(timing.get("waited_s", 0.0))
        parts.append(
            f"first token {timing['first_token_s']:.2f} s"
            + (f" ({waited:.2f} s of it waiting)" if waited >= SHOWN_WAIT_S else "")
        )
    if stats.get("drafter"):
        parts.append(str(stats["drafter"]))
    finished = finish_text(finish_reason)
    if finished:
        parts.append(finished)
    return parts


def summary_line(
    stats: dict,
    timing: dict | None = None,
    finish_reason: str | None = None,
    tokens: int | None = None,
) -> str:
    """'143 tokens · 7 passes · 2.7 tokens/pass · …': the CLI's line for one answer, every
    figure of ``summary_parts``."""
    return " · ".join(summary_parts(stats, timing, finish_reason, tokens))


def finish_text(finish_reason: str | None) -> str:
    """How an answer that did not end by itself says so ('' when it did)."""
    return {"cancelled": "stopped", "length": "max tokens reached"}.get(finish_reason or "", "")


# A speed-up this close to 1 claims no gain or loss: plain decoding timed against itself
# differs by about this much between runs (report.md's "no change" cells; results.md,
# "Tree passes": the 135M float32 model within -0.6 to +0.5 ms), and a replay's estimate is no
# finer than the curve it is priced on.
SAME_SPEED = 0.02
TIMES_FROM = 1.1  # from here a speed-up reads "≈1.8×"; below it, "≈6% faster"


def speed_parts(speedup: float) -> tuple[str, str]:
    """('≈1.8×', 'faster than plain'), ('≈6%', 'faster than plain'), ('about', 'as fast as
    plain') or ('≈10%', 'slower than plain'): an estimated speed-up in plain words, always
    marked as an estimate, a slowdown said as one."""
    if abs(speedup - 1.0) < SAME_SPEED:
        return "about", "as fast as plain"
    if speedup < 1.0:
        return f"≈{1.0 - speedup:.0%}", "slower than plain"
    if speedup < TIMES_FROM:
        return f"≈{speedup - 1.0:.0%}", "faster than plain"
    return f"≈{speedup:.1f}×", "faster than plain"


def speed_words(speedup: float) -> str:
    """'≈1.8× faster than plain', 'about as fast as plain', '≈10% slower than plain'."""
    return " ".join(speed_parts(speedup))


def _grow(values: list[int], length: int) -> None:
    if len(values) < length:
        values.extend([0] * (length - len(values)))


# what an estimate on the prior shape names as its curve (``verify_cost.prior_cost_curve``)
GUESS_CURVE = "a guess: not measured for this model yet"


def estimate_is_guess(curve: str | None) -> bool:
    """Whether a speed-up was estimated on a curve never measured for the model: a guess,
    shown as 'not measured yet' rather than as a figure."""
    return curve == GUESS_CURVE


def estimate_label(curve: str | None) -> str:
    """How a speed-up estimate names its curve: 'estimate', 'estimate on the h100-7b-bf16
    curve', or 'a guess: not measured for this model yet'."""
    if not curve or curve == "measured":
        return "estimate"
    if estimate_is_guess(curve):
        return curve
    return f"estimate on the {curve}"
