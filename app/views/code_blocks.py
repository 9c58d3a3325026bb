"""Code blocks in a rendered message: syntax colours (Pygments), a language label and a
Copy link above each block.

Works on the QTextDocument that Qt's Markdown importer built: a fenced block is a run of
blocks carrying ``BlockCodeFence``/``BlockCodeLanguage``. Colours are foreground only, so
the accepted-draft background and underline painted afterwards stay on top of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from PySide6.QtGui import QColor, QFont, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextFormat
from pygments.lexers import get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.util import ClassNotFound

from .text_positions import utf16_len

LIGHT_STYLE, DARK_STYLE = "default", "github-dark"
COPY_SCHEME = "copy-code"


@dataclass
class CodeBlock:
    first: int  # document position of its first character
    end: int  # position after its last character
    language: str
    text: str


def is_code_block(block) -> bool:
    fmt = block.blockFormat()
    return fmt.hasProperty(QTextFormat.BlockCodeFence) or fmt.hasProperty(
        QTextFormat.BlockCodeLanguage
    )


def code_blocks(document) -> list[CodeBlock]:
    """Fenced code blocks, in document order."""
    found: list[CodeBlock] = []
    block = document.begin()
    while block.isValid():
        if is_code_block(block):
            language = block.blockFormat().stringProperty(QTextFormat.BlockCodeLanguage)
            first, lines = block.position(), []
            last = block
            while (
                block.isValid()
                and is_code_block(block)
                and block.blockFormat().stringProperty(QTextFormat.BlockCodeLanguage) == language
            ):
                lines.append(block.text())
                last = block
                block = block.next()
            found.append(
                CodeBlock(
                    first,
                    last.position() + utf16_len(last.text()),
                    language.strip(),
                    "\n".join(lines),
                )
            )
            continue
        block = block.next()
    return found


@lru_cache(maxsize=64)
def _lexer(language: str):
    """The Pygments lexer for a fence's language; None for none or an unknown one (guessing
    is slow on every re-render of a streaming answer, and often wrong)."""
    try:
        return get_lexer_by_name(language) if language else None
    except ClassNotFound:
        return None


@lru_cache(maxsize=4)
def _formats(style_name: str) -> dict:
    """Pygments token type → QTextCharFormat (foreground, bold, italic)."""
    formats = {}
    for token, style in get_style_by_name(style_name):
        fmt = QTextCharFormat()
        if style["color"]:
            fmt.setForeground(QColor("#" + style["color"]))
        if style["bold"]:
            fmt.setFontWeight(QFont.Bold)
        if style["italic"]:
            fmt.setFontItalic(True)
        formats[token] = fmt
    return formats


def colour(document, blocks: list[CodeBlock], dark: bool) -> None:
    """Syntax-colour each block's characters (positions as in ``blocks``)."""
    formats = _formats(DARK_STYLE if dark else LIGHT_STYLE)
    cursor = QTextCursor(document)
    for block in blocks:
        lexer = _lexer(block.language)
        if lexer is None:
            continue
        position = block.first
        for token, value in lexer.get_tokens(block.text):
            if position >= block.end:
                break
            length = min(utf16_len(value), block.end - position)
            while token not in formats and token.parent is not None:
                token = token.parent
            fmt = formats.get(token)
            if fmt is not None and fmt.foreground().style() and value.strip():
                cursor.setPosition(position)
                cursor.setPosition(position + length, QTextCursor.KeepAnchor)
                cursor.mergeCharFormat(fmt)
            position += length  # a newline in the code is the block separator: one position


def label_name(block: CodeBlock) -> str:
    return block.language or "code"


def add_headers(
    document, blocks: list[CodeBlock], header_background: QColor, muted: QColor, link: QColor
) -> list[tuple[int, int]]:
    """Put 'python · Copy' above each block (Copy links to ``copy-code:<index>``).
    Returns (position, length) of each insertion, last block first."""
    inserted = []
    for index in range(len(blocks) - 1, -1, -1):
        block = blocks[index]
        cursor = QTextCursor(document)
        cursor.setPosition(block.first)
        code_format = cursor.blockFormat()
        cursor.insertBlock(code_format)  # the code moves down one block; the header goes here
        cursor.movePosition(QTextCursor.PreviousBlock)
        header_format = QTextBlockFormat(code_format)
        header_format.setBackground(header_background)
        header_format.clearProperty(QTextFormat.BlockCodeFence)
        header_format.clearProperty(QTextFormat.BlockCodeLanguage)
        cursor.setBlockFormat(header_format)
        label = QTextCharFormat()
        label.setForeground(muted)
        label.setFontPointSize(document.defaultFont().pointSizeF() * 0.85)
        name = label_name(block)
        cursor.insertText(f"{name}   ", label)
        anchor = QTextCharFormat(label)
        anchor.setAnchor(True)
        anchor.setAnchorHref(f"{COPY_SCHEME}:{index}")
        anchor.setForeground(link)
        anchor.setFontUnderline(False)
        cursor.insertText("Copy", anchor)
        inserted.append((block.first, utf16_len(f"{name}   Copy") + 1))
    return inserted
