"""LaTeX in answers, shown as the model wrote it.

Markdown reads ``\\(`` as an escaped ``(``, and ``_`` or ``*`` inside a formula as emphasis,
so ``\\(x_1 * y_2\\)`` would lose its backslashes and half its symbols. Before the Markdown
importer sees an answer, every ASCII punctuation character of a ``\\( … \\)`` or
``\\[ … \\]`` formula is backslash-escaped, so the formula shows character for character
(delimiters included). Code spans and fenced code blocks are left alone: they are shown
verbatim already. The rendered text stays a subsequence of the source, as render.py's
alignment needs.
"""

from __future__ import annotations

import re

FORMULA = re.compile(r"\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.DOTALL)
PUNCTUATION = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _escaped(formula: str) -> str:
    return "".join("\\" + c if c in PUNCTUATION else c for c in formula)


def _outside_code_spans(text: str) -> str:
    out, last = [], 0
    for span in CODE_SPAN.finditer(text):
        out.append(FORMULA.sub(lambda m: _escaped(m.group(0)), text[last : span.start()]))
        out.append(span.group(0))
        last = span.end()
    out.append(FORMULA.sub(lambda m: _escaped(m.group(0)), text[last:]))
    return "".join(out)


def protect_math(markdown: str) -> str:
    """``markdown`` with its LaTeX formulas escaped to show as written."""
    if "\\(" not in markdown and "\\[" not in markdown:
        return markdown
    out, prose, fence = [], [], None
    for line in markdown.splitlines(keepends=True):
        opened = FENCE.match(line)
        if fence is None and opened:
            out.append(_outside_code_spans("".join(prose)))
            prose = []
            fence = opened.group(1)[0] * len(opened.group(1))
            out.append(line)
        elif fence is not None:
            out.append(line)
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
        else:
            prose.append(line)
    out.append(_outside_code_spans("".join(prose)))
    return "".join(out)
