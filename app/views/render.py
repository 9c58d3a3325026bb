"""Render a message as Markdown (or plain text) and paint its accepted-draft characters.

Provenance is kept against the raw answer text (the Markdown source). The message is
rendered with Qt's own Markdown importer, then each character of the rendered document
is aligned back to its source character: Markdown only removes syntax (``**``, ``#``,
fences, link targets), reflows whitespace and decodes entities, so the rendered text is
almost a subsequence of the source. Characters that align get their source character's
highlight; syntax characters have none; a character that does not align (a decoded
entity) is left plain. Streaming and finished messages go through the same path, so the
highlighting does not change when the answer completes or the session is reopened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from PySide6.QtCore import Qt
from PySide6.QtGui import (
    QColor,
    QFontDatabase,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
)

from .code_blocks import add_headers, code_blocks, colour
from .math_text import Formula, ShownMath, show_math
from .text_positions import utf16_len, utf16_positions
from ..storage.provenance import DRAFT, Provenance

# GitHub Markdown without HTML: `List<String>`, `a<b` or `<div>` are text to show, not tags
MARKDOWN = QTextDocument.MarkdownDialectGitHub | QTextDocument.MarkdownNoHTML
WHITESPACE = str.maketrans(
    {"\n": " ", "\t": " ", "\r": " ", "\u2028": " ", "\u2029": " ", "\xa0": " "}
)
NEAR = 16  # a skip this short over source syntax is taken without checking
FAR = 4000  # how far ahead a rendered character is looked for (long link targets)
CONFIRM = 4  # up to this many following characters (to the next space) must agree after a far skip


def align(source: str, rendered: str) -> list[int | None]:
    """For each rendered character, the index of its source character (or None)."""
    src = source.translate(WHITESPACE)
    out = rendered.translate(WHITESPACE)
    mapping: list[int | None] = [None] * len(out)
    i = 0
    for j, char in enumerate(out):
        if i < len(src) and src[i] == char:
            mapping[j] = i
            i += 1
            continue
        if char == " ":  # reflowed or added whitespace: map to source whitespace if close
            k = src.find(" ", i, i + NEAR + 1)
            if k >= 0:
                mapping[j] = k
                i = k + 1
            continue
        k = src.find(char, i, i + NEAR + 1)
        if k < 0:
            k = _far_match(src, out, i, j)
        if k is not None and k >= 0:
            mapping[j] = k
            i = k + 1
    return mapping


def _far_match(src: str, out: str, i: int, j: int) -> int | None:
    want = out[j : j + CONFIRM].split(" ", 1)[0]
    reach = FAR if len(want) > 1 or j + 1 == len(out) else 4 * NEAR
    k = src.find(want, i, i + reach + len(want))
    return k if k >= 0 else None


@dataclass
class Palette:
    draft: QColor
    code_background: QColor
    mixed: QColor | None = None
    mark: QColor | None = None  # underline under accepted drafts: a cue beyond colour fill
    dark: bool = False
    header_background: QColor | None = None  # code block label line
    muted: QColor | None = None
    link: QColor | None = None


@dataclass
class RenderMap:
    """Document position → source character index, for tooltips."""

    by_position: dict[int, int] = field(default_factory=dict)
    code: list[str] = field(default_factory=list)  # each code block's text, for its Copy link

    def source_index(self, position: int) -> int | None:
        return self.by_position.get(position)


def render(
    document: QTextDocument,
    text: str,
    provenance: Provenance | None,
    *,
    markdown: bool = True,
    highlight: bool = True,
    palette: Palette | None = None,
    origin: Sequence[int] | None = None,
) -> RenderMap:
    """Render ``text`` into ``document``. ``origin[i]`` is the index in the provenance's
    text of ``text[i]`` (a part of the answer shown on its own); None: ``text`` is all of it."""
    document.clear()
    shown = show_math(text) if markdown else ShownMath(text)
    if markdown:
        document.setMarkdown(shown.markdown, MARKDOWN)
    else:
        document.setPlainText(text)
    chars, positions = [], []
    block = document.begin()
    while block.isValid():
        if chars:
            chars.append("\n")  # a paragraph separator (never painted)
            positions.append(None)
        block_text = block.text()
        chars.extend(block_text)
        positions.extend(utf16_positions(block_text, block.position()))
        block = block.next()
    rendered = "".join(chars)
    shown_indices = align(shown.markdown, rendered)
    if any(f.display for f in shown.formulas):
        _centre_display_math(document, shown, dict(zip(positions, shown_indices)))
    mapping = _source_indices(shown_indices, shown, provenance, origin)
    result = RenderMap(
        {p: s for p, s in zip(positions, mapping) if p is not None and s is not None}
    )
    widths = {p: utf16_len(c) for p, c in zip(positions, rendered) if p is not None}
    if palette is not None:
        batch = QTextCursor(document)
        batch.beginEditBlock()  # one relayout for all the formatting below, not one per range
        _style_code(document, palette)
        blocks = code_blocks(document) if markdown else []
        colour(document, blocks, palette.dark)
        if highlight and provenance is not None:
            _paint(document, provenance, result, widths, palette)
        if blocks:
            result.code = [b.text for b in blocks]
            inserted = add_headers(
                document,
                blocks,
                palette.header_background or palette.code_background,
                palette.muted or QColor("gray"),
                palette.link or QColor("blue"),
            )
            result.by_position = _shifted(result.by_position, inserted)
        batch.endEditBlock()
    return result


def _centre_display_math(
    document: QTextDocument, shown: ShownMath, by_position: dict[int | None, int | None]
) -> None:
    """Centre each paragraph that is one display formula and nothing else."""
    cursor, centred = QTextCursor(document), QTextBlockFormat()
    centred.setAlignment(Qt.AlignHCenter)
    block = document.begin()
    while block.isValid():
        found = {
            shown.text_index(by_position[p])
            for p in range(block.position(), block.position() + block.length() - 1)
            if by_position.get(p) is not None and not document.characterAt(p).isspace()
        }
        formula = found.pop() if len(found) == 1 else None
        if isinstance(formula, Formula) and formula.display:
            cursor.setPosition(block.position())
            cursor.mergeBlockFormat(centred)
        block = block.next()


def _source_indices(
    mapping: list[int | None],
    shown: ShownMath,
    provenance: Provenance | None,
    origin: Sequence[int] | None,
) -> list[int | None]:
    """Rendered character → index in the provenance's text. Every character of a formula
    maps to one index of its content: the first that was not an accepted draft, or the
    first if all were, so a formula is highlighted only if all of it was drafted."""

    def place(index: int) -> int:
        return origin[index] if origin is not None else index

    units: dict[Formula, int] = {}
    out: list[int | None] = []
    for index in mapping:
        where = None if index is None else shown.text_index(index)
        if isinstance(where, Formula):
            if where not in units:
                content = [place(i) for i in range(where.source_start, where.source_end)]
                units[where] = next(
                    (i for i in content if provenance and provenance.kind_at(i) != DRAFT),
                    content[0],
                )
            out.append(units[where])
        else:
            out.append(None if where is None else place(where))
    return out


def _shifted(by_position: dict[int, int], inserted: list[tuple[int, int]]) -> dict[int, int]:
    """Document positions after inserting ``(position, length)`` runs of text."""
    cuts = sorted(inserted)

    def shift(position: int) -> int:
        return position + sum(length for at, length in cuts if at <= position)

    return {shift(p): s for p, s in by_position.items()}


def _paint(
    document: QTextDocument,
    provenance: Provenance,
    result: RenderMap,
    widths: dict[int, int],
    palette: Palette,
) -> None:
    draft = QTextCharFormat()
    draft.setBackground(palette.draft)
    if palette.mark is not None:
        draft.setUnderlineStyle(QTextCharFormat.SingleUnderline)
        draft.setUnderlineColor(palette.mark)
    draft.setProperty(QTextFormat.UserProperty, DRAFT)
    ranges: list[list[int]] = []
    for position, source in result.by_position.items():
        if provenance.kind_at(source) == DRAFT:
            end = position + widths[position]  # an emoji is two positions: never split it
            if ranges and ranges[-1][1] == position:
                ranges[-1][1] = end
            else:
                ranges.append([position, end])
    cursor = QTextCursor(document)
    for start, end in ranges:
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.KeepAnchor)
        cursor.mergeCharFormat(draft)


def highlighted_positions(document: QTextDocument) -> list[int]:
    """Document positions painted as accepted drafts (for tests and checks)."""
    found = []
    block = document.begin()
    while block.isValid():
        iterator = block.begin()
        while not iterator.atEnd():
            fragment = iterator.fragment()
            if fragment.charFormat().property(QTextFormat.UserProperty) == DRAFT:
                found.extend(range(fragment.position(), fragment.position() + fragment.length()))
            iterator += 1
        block = block.next()
    return found


def _style_code(document: QTextDocument, palette: Palette) -> None:
    """Code blocks and inline code: monospace; blocks on a tinted background."""
    mono = QFontDatabase.systemFont(QFontDatabase.FixedFont)
    cursor = QTextCursor(document)
    block = document.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if (
            fmt.hasProperty(QTextFormat.BlockCodeFence)
            or fmt.hasProperty(QTextFormat.BlockCodeLanguage)
            or (block.text() and block.charFormat().fontFixedPitch() and _all_fixed(block))
        ):
            cursor.setPosition(block.position())
            block_format = QTextBlockFormat()
            block_format.setBackground(palette.code_background)
            block_format.setLeftMargin(6)
            block_format.setRightMargin(6)
            block_format.setNonBreakableLines(False)  # wrap long lines rather than cut them off
            cursor.mergeBlockFormat(block_format)
            cursor.setPosition(
                block.position() + max(block.length() - 1, 0), QTextCursor.KeepAnchor
            )
            char_format = QTextCharFormat()
            char_format.setFontFamilies([mono.family()])
            char_format.setFontFixedPitch(True)
            cursor.mergeCharFormat(char_format)
        else:
            iterator = block.begin()
            while not iterator.atEnd():
                fragment = iterator.fragment()
                if fragment.charFormat().fontFixedPitch():
                    cursor.setPosition(fragment.position())
                    cursor.setPosition(
                        fragment.position() + fragment.length(), QTextCursor.KeepAnchor
                    )
                    char_format = QTextCharFormat()
                    char_format.setFontFamilies([mono.family()])
                    char_format.setBackground(palette.code_background)
                    cursor.mergeCharFormat(char_format)
                iterator += 1
        block = block.next()


def _all_fixed(block) -> bool:
    iterator = block.begin()
    while not iterator.atEnd():
        if not iterator.fragment().charFormat().fontFixedPitch():
            return False
        iterator += 1
    return True
