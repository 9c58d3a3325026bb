"""Help ▸ How Draftless works, and Help ▸ About Draftless."""

from __future__ import annotations

from importlib import metadata

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QMessageBox, QTextBrowser, QVBoxLayout

from . import theme

HELP = """\
# How Draftless works

A language model writes one token (a word or a piece of one) per *forward pass*, and
each pass costs about the same whether it checks one token or several. Draftless guesses
the next few tokens before the model runs, from n-gram tables: short runs of tokens
already seen in this chat (and, for some drafters, earlier chats or the model's own
statistics). No second model is involved. The model then checks all the guesses in a
single pass, keeps the ones that match what it would have written itself, and adds one
token of its own. The answer is exactly the one the model would have given without any
guessing; only the number of passes changes.

## The highlights

Characters that came from a guess the model accepted are **tinted and underlined**.
Everything else the model wrote itself. Rest the pointer on a character to see which
pass made it, which drafter guessed it, and where in the guess it stood. Copying and
repeated text (code you are editing, a document you pasted, lists) is where guesses
hold most often. The *Highlight* switch above the chat, or View ▸ Highlight accepted
drafts, turns the painting off.

## The gauge

The dial shows **tokens per pass**: how many tokens each forward pass produced. 1 means
no guess was kept (the end of the answer counts as a token, so it never reads below 1);
its scale ends at the answer's draft count plus one, the most a pass of it could give.
Beside it, for the answer being written (or the chat's latest one):

- *this pass*: the tokens the latest pass produced;
- *tok/s*: tokens per second;
- *drafts accepted*: the share of guessed tokens the model kept;
- *faster than plain (est.)*: an estimate of the speed-up over answering one token per
  pass, from this machine's measured cost of a pass of each length. Longer passes cost a
  little more, so tokens per pass is an upper bound on it; guesses that fail cost time, and
  an answer that came out slower says so (*≈10% slower than plain*). Within 2% of plain it
  reads *about as fast as plain*. Until that cost is measured (in the background, between
  answers) it reads *speed-up not measured yet*.

Under each answer, its speed-up, tokens per pass and drafts accepted; hover there for every
figure (passes, drafts, tokens per second, time to the first token, the drafter).

## Going further

- **Inspect** on an answer shows how far into its guesses each pass held, and
  **Replay** runs every drafter over that answer's own tokens without the model, to find
  the settings that would have guessed best (**Use settings** applies them).
- **Settings** choose the drafter, how many tokens it may guess (the draft count, or an
  adaptive count that follows the cost of passes) and the n-gram order.
- **Model ▸ Connect to server…** lets answers come from a Draftless server on another
  machine; highlights, gauge and inspector work the same, and the status bar names it.
"""


def version() -> str:
    try:
        return metadata.version("draftless")
    except metadata.PackageNotFoundError:
        return "development copy"


ABOUT = (
    "<h3>Draftless {version}</h3>"
    "<p>A desktop chat whose engine answers faster with lossless n-gram speculative "
    "decoding: no draft model, the same answer as plain decoding, fewer passes of "
    "the model.</p><p>Apache License 2.0.</p>"
)


class HelpDialog(QDialog):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("helpDialog")
        self.setWindowTitle("How Draftless works")
        self.resize(620, 640)
        layout = QVBoxLayout(self)
        self.text = QTextBrowser()
        self.text.setOpenExternalLinks(True)
        self.text.setMarkdown(HELP)
        layout.addWidget(self.text)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)


def show_about(parent) -> QMessageBox:
    box = QMessageBox(
        QMessageBox.NoIcon,
        "About Draftless",
        ABOUT.format(version=version()),
        QMessageBox.Ok,
        parent,
    )
    box.setObjectName("aboutBox")
    box.setIconPixmap(theme.app_icon().pixmap(64, 64))
    box.setAttribute(Qt.WA_DeleteOnClose)
    box.open()
    return box
