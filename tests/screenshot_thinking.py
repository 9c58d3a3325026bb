"""Screenshots of a reasoning model's answer (its thinking collapsed, then expanded) with
LaTeX math in it, in light and dark at 600 and 1280 px, from a scripted engine (no model):

    QT_QPA_PLATFORM=offscreen python -m tests.screenshot_thinking --out /tmp/shots
"""

from __future__ import annotations

import sys

from .scripted_engine import END, ScriptedService, answer_events
from .screenshot_matrix import main, settle

SIZES = (600, 1280)
THEMES = ("light", "dark")
THINKING = [
    (0, [("<think>", False)]),
    (4, [("\nThe user wants", True), (" the area", True), (" of a circle", True), (".", False)]),
    (0, [(" Area is \\(\\pi r^2\\)", False)]),
    (3, [(" with r = 2", True), (", so", True), (" 4π.", False)]),
    (0, [(" Check: `r**2` is 4.\n</think>", False)]),
    (3, [("\n\nThe area of a circle", True), (" is \\(A = \\pi r^2\\)", True), (".", False)]),
    (0, [(" For \\(r = 2\\):\n\n\\[A = \\pi \\cdot 2^2 = 4\\pi \\approx 12.57\\]", False)]),
    (2, [("\n\nThe sum \\(\\sum_{i=1}^n i\\)", True), (" is \\(\\frac{n(n+1)}{2}\\)", False)]),
    (0, [(", and a pizza costs $5 or $10.", False)]),
    (0, [(END, False)]),
]


async def capture(width: int, theme: str, out: str) -> None:
    from app.__main__ import Application, _save

    service = ScriptedService()
    application = Application(service=service, theme_name=theme)
    window = application.window
    window.show()
    window.resize(width, 800)
    await settle(1)
    await application.start("scripted")
    service.queue(answer_events(THINKING))
    await window.send("What is the area of a circle of radius 2?")
    await settle()
    _save(window, f"{out}/{width}-{theme}-thinking-collapsed.png")
    window.transcript.views[-1].thinking.set_expanded(True)
    await settle()
    _save(window, f"{out}/{width}-{theme}-thinking-expanded.png")
    await application.close()


if __name__ == "__main__":
    sys.exit(main("tests.screenshot_thinking", SIZES, capture))
