"""LaTeX in answers, shown as readable Unicode text.

A formula delimited by ``\\( … \\)``, ``\\[ … \\]``, ``$$ … $$`` or ``$ … $`` is shown as
Unicode text made by pylatexenc's ``LatexNodes2Text`` (``\\alpha \\leq \\beta`` shows as
"α ≤ β"), with simple sub- and superscripts as Unicode scripts (``x_1 \\cdot y^2`` shows as
"x₁ · y²") and a fraction of longer parts with its parentheses (``\\frac{a+b}{2}`` shows as
"(a+b)/2"). The delimiters are not shown. The text is backslash-escaped before the Markdown
importer sees it, so ``*`` or ``_`` in it stay as they are.

Single dollars follow Pandoc's rule, so that prices stay text: the opening ``$`` has a
non-space character right after it and no word character or backslash right before it,
the closing ``$`` has a non-space character right before it and no digit right after it,
and both are on one line. And what is between them must look like math: one character, or
one of ``\\ ^ _ { } = + < > ( )`` in it (so that "$HOME/$USER" outside code stays text).
"$5 and $10" and "$5-$10" are text; "$x$" and "$x^2$" are formulas.

Code spans and code blocks (``app.views.markdown_code``) are left alone: they are shown verbatim.

A rendered formula is not a subsequence of its source (``\\pi`` shows as "π"), so render.py
treats each formula as one unit when it paints accepted drafts: see ``Formula`` and
``ShownMath.text_index``.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache

from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db

from .markdown_code import outside_code

FORMULA = re.compile(
    r"\\\((?P<inline>.+?)\\\)"
    r"|\\\[(?P<display>.+?)\\\]"
    r"|(?<!\\)\$\$(?P<display_dollars>.+?)(?<!\\)\$\$"
    r"|(?<![\\$\w])\$(?=[^\s$])(?P<dollars>[^$\n]+?)(?<=\S)(?<!\\)\$(?![\d$])",
    re.DOTALL,
)
LOOKS_LIKE_MATH = re.compile(r"^\S$|[\\^_{}=+<>()]")  # what single dollars must hold
PUNCTUATION = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
SCRIPT = re.compile(r"(?<!\\)([_^])(\{[^{}]*\}|\\[A-Za-z]+|[^\s{}\\])")
# relations and binary operators are set with space around them, as TeX sets them
SPACED = {
    "approx": "≈", "leq": "≤", "le": "≤", "geq": "≥", "ge": "≥", "neq": "≠", "ne": "≠",
    "equiv": "≡", "sim": "∼", "to": "→", "rightarrow": "→", "Rightarrow": "⇒", "mapsto": "↦",
    "in": "∈", "cdot": "·", "times": "×", "pm": "±",
}  # fmt: skip
SUPERSCRIPTS = dict(zip("0123456789+-=()ni", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ"))
SUBSCRIPTS = dict(zip("0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"))


@dataclass(frozen=True)
class Formula:
    """One formula: where its shown text lies in the Markdown given to Qt, and where its
    content (the LaTeX between the delimiters) lies in the source."""

    shown_start: int
    shown_end: int
    source_start: int
    source_end: int
    shift_after: int  # shown index minus source index for the text after this formula
    display: bool = False  # \\[ … \\] or $$ … $$: centred when it is a paragraph of its own


@dataclass
class ShownMath:
    """The Markdown to render and the formulas in it."""

    markdown: str
    formulas: list[Formula] = field(default_factory=list)

    def text_index(self, shown_index: int) -> int | Formula:
        """The source index of a character of ``markdown``, or the formula it is part of."""
        at = bisect_right(self.formulas, shown_index, key=lambda f: f.shown_start) - 1
        if at < 0:
            return shown_index
        formula = self.formulas[at]
        if shown_index < formula.shown_end:
            return formula
        return shown_index - formula.shift_after


def _fraction(node, l2tobj) -> str:
    parts = []
    for argument in node.nodeargd.argnlist[-2:]:
        text = l2tobj.nodelist_to_text([argument]).strip() if argument is not None else ""
        parts.append(f"({text})" if len(text) > 1 and not text.isalnum() else text)
    return "/".join(parts)


@lru_cache(maxsize=1)
def _converter() -> LatexNodes2Text:
    context = get_default_latex_context_db()
    spaced = [MacroTextSpec(name, f" {symbol} ") for name, symbol in SPACED.items()]
    context.add_context_category(
        "draftless",
        prepend=True,
        macros=[MacroTextSpec("frac", simplify_repl=_fraction), *spaced],
    )
    return LatexNodes2Text(latex_context=context, math_mode="text", strict_latex_spaces=False)


def _script(match: re.Match) -> str:
    mark, body = match.group(1), match.group(2)
    text = _converter().latex_to_text(body[1:-1] if body.startswith("{") else body).strip()
    table = SUPERSCRIPTS if mark == "^" else SUBSCRIPTS
    if text and all(c in table for c in text):
        scripted = "".join(table[c] for c in text)
    else:
        scripted = mark + (f"({text})" if len(text) > 1 else text)
    return "{}" + scripted  # "{}" ends a command before it: \sum_i is \sum then ᵢ


@lru_cache(maxsize=4096)  # a streaming answer is re-rendered often: each formula read once
def formula_text(latex: str) -> str:
    """``latex`` (a formula's content) as Unicode text; as written if it cannot be read."""
    try:
        text = _converter().latex_to_text(SCRIPT.sub(_script, latex))
        return " ".join(text.split()) or latex
    except Exception:  # pylatexenc is tolerant; anything it still rejects shows as written
        return latex


def _escaped(text: str) -> str:
    return "".join("\\" + c if c in PUNCTUATION else c for c in text)


def show_math(markdown: str) -> ShownMath:
    """``markdown`` with its formulas as escaped Unicode text, and where they are."""
    if "\\(" not in markdown and "\\[" not in markdown and "$" not in markdown:
        return ShownMath(markdown)
    out, formulas, last, length = [], [], 0, 0
    for start, end in outside_code(markdown):
        for match in FORMULA.finditer(markdown, start, end):
            if match.group("dollars") and not LOOKS_LIKE_MATH.search(match.group("dollars")):
                continue
            content = next(name for name, value in match.groupdict().items() if value)
            shown = _escaped(formula_text(match.group(content)))
            out.append(markdown[last : match.start()])
            length += match.start() - last
            formulas.append(
                Formula(
                    length,
                    length + len(shown),
                    match.start(content),
                    match.end(content),
                    length + len(shown) - match.end(),
                    content.startswith("display"),
                )
            )
            out.append(shown)
            length += len(shown)
            last = match.end()
    out.append(markdown[last:])
    return ShownMath("".join(out), formulas)
