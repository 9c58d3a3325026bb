"""Which side panels fit beside the chat at a given window width.

The chat keeps a usable width (``CHAT_MIN``); side panels fold first, in order (the chat
list, then the settings/inspector column), and come back when the window grows. A panel
the person has just asked for stays; the others fold to make room for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CHAT_MIN = 480  # the transcript's cards and the composer stay readable from here


@dataclass
class Panel:
    name: str
    width: int  # the width it needs to show its content unclipped
    wanted: bool  # the person wants it shown (View menu, shortcuts)


def fitting(window_width: int, panels: Sequence[Panel], keep: str | None = None) -> set[str]:
    """The names of the wanted ``panels`` to show at ``window_width``: wanted ones fold in
    the given order until the rest fit beside ``CHAT_MIN``; ``keep`` never folds."""
    shown = [p for p in panels if p.wanted or p.name == keep]
    room = window_width - CHAT_MIN
    total = sum(p.width for p in shown)
    for panel in list(shown):
        if total <= room:
            break
        if panel.name != keep:
            shown.remove(panel)
            total -= panel.width
    return {p.name for p in shown}
