"""Which answers can go on where they ended: one cut at its Max tokens limit ("length")
and one the person stopped ("cancelled"). One rule for the controller and the views."""

from __future__ import annotations

CONTINUABLE_REASONS = frozenset({"length", "cancelled"})


def can_go_on(finish_reason: str | None) -> bool:
    """Whether an answer that ended for ``finish_reason`` can be continued."""
    return finish_reason in CONTINUABLE_REASONS


def continue_tip(finish_reason: str | None) -> str:
    """The Continue button's tooltip: why this answer stopped, and what the button does."""
    why = "you stopped it" if finish_reason == "cancelled" else "it stopped at the Max tokens limit"
    return f"Write more of this answer: {why}"
