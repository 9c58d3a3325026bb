"""Where a Markdown text's code is: fenced and indented code blocks and code spans, as
markdown-it (a CommonMark parser) finds them. One definition for every part of the app
that leaves code as written (the Markdown export escapes HTML outside code, the math view
reads formulas outside code).

Code blocks come from the block parse's line map. Code spans come from markdown-it's own
code-span rule, run on each paragraph's or heading's lines as written (their container
marks, ``>`` or a list's bullet, hold no backticks), with the position it consumed each
span at recorded.
"""

from __future__ import annotations

import re
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.rules_inline import backtick

CODE_BLOCKS = ("fence", "code_block")


def _record_spans(state, silent: bool) -> bool:
    """markdown-it's code-span rule, noting where each span it makes lies in the source."""
    start, before = state.pos, len(state.tokens)
    taken = backtick(state, silent)
    if taken and not silent and len(state.tokens) > before:  # a span, not a lone run of `
        state.env.setdefault("code_spans", []).append((start, state.pos))
    return taken


@lru_cache(maxsize=1)
def _parsers() -> tuple[MarkdownIt, MarkdownIt]:
    """The block parser (inline parsing off: only lines with backticks need it) and the
    inline parser that records code spans."""
    blocks = MarkdownIt("commonmark").disable(["inline", "text_join"])
    spans = MarkdownIt("commonmark")
    spans.inline.ruler.at("backticks", _record_spans)
    return blocks, spans


def code_ranges(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character ranges of ``text`` that are code, in order."""
    if "`" not in text and "~~~" not in text and "    " not in text and "\t" not in text:
        return []  # no fence, no code span, no indented block: nothing to parse
    blocks, spans = _parsers()
    # markdown-it reads "\r\n" and "\r" as "\n": the same lines, and the same offsets
    text = text.replace("\r\n", " \n").replace("\r", "\n")
    line_starts = [0, *(match.end() for match in re.finditer("\n", text)), len(text)]
    ranges = []
    for token in blocks.parse(text):
        if token.map is None:
            continue
        start, end = line_starts[token.map[0]], line_starts[min(token.map[1], len(line_starts) - 1)]
        if token.type in CODE_BLOCKS:
            ranges.append((start, end))
        elif token.type == "inline" and "`" in token.content:
            env: dict = {}
            spans.parseInline(text[start:end], env)
            ranges += [(start + a, start + b) for a, b in env.get("code_spans", [])]
    return sorted(ranges)


def outside_code(text: str):
    """``(start, end)`` runs of ``text`` that are not code, in order (the last may be
    empty)."""
    start = 0
    for code_start, code_end in code_ranges(text):
        yield start, code_start
        start = code_end
    yield start, len(text)
