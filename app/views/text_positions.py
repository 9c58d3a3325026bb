"""Document positions of Python text.

QTextDocument counts UTF-16 units, so a character beyond U+FFFF (most emoji, some CJK) is
two positions, while Python strings count it as one. Positions given to cursors come from
here.
"""

from __future__ import annotations


def utf16_len(text: str) -> int:
    """How many document positions ``text`` takes."""
    return len(text) + sum(ord(c) > 0xFFFF for c in text)


def utf16_positions(text: str, start: int = 0) -> list[int]:
    """The document position of each character of ``text`` placed at ``start``."""
    positions = []
    for char in text:
        positions.append(start)
        start += 2 if ord(char) > 0xFFFF else 1
    return positions
