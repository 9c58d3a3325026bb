"""Which answers can go on where they ended: one cut at its Max tokens limit ("length"), one
the person stopped ("cancelled") and one a failing engine or server cut off ("interrupted",
its stats say why). One rule for the controller and the views."""

from __future__ import annotations

INTERRUPTED = "interrupted"  # the finish reason, and the stats' key for why
CONTINUABLE_REASONS = frozenset({"length", "cancelled", INTERRUPTED})


def can_go_on(finish_reason: str | None) -> bool:
    """Whether an answer that ended for ``finish_reason`` can be continued."""
    return finish_reason in CONTINUABLE_REASONS


def continue_tip(finish_reason: str | None) -> str:
    """The Continue button's tooltip: why this answer stopped, and what the button does."""
    why = {
        "cancelled": "you stopped it",
        INTERRUPTED: "the engine stopped part-way",
    }.get(finish_reason or "", "it stopped at the Max tokens limit")
    return f"Write more of this answer: {why}"
