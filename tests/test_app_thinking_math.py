"""A reasoning model's <think> text folded in its card, and LaTeX shown as Unicode math, with
the accepted-draft highlights kept on both: views fed scripted engine events (no model)."""

from __future__ import annotations

import asyncio
import json

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QTextCursor

from engine.events import ProgressEvent

from app.export import chat_json, chat_markdown, markdown_text
from app.markdown_code import code_ranges
from app.math_text import formula_text, show_math
from app.render import highlighted_positions
from app.store import Store
from app.thinking import split, without_thinking

from .scripted_engine import END, answer_events
from .test_app_views import app, ask, loop  # noqa: F401


# splitting thinking from the answer ---------------------------------------------------------
@pytest.mark.parametrize(
    "text, thinking, closed, answer",
    [
        ("<think>\nStep one.\n</think>\n\nThe answer.", "\nStep one.\n", True, "The answer."),
        ("<think>Still going", "Still going", False, ""),  # streaming, or cut off
        ("<think>Still going</thi", "Still going", False, ""),  # half a closing tag
        ("Opened in the prompt.</think>\nAnswer", "Opened in the prompt.", True, "Answer"),
        ("Sure. <think>hm</think>Yes.", "hm", True, "Sure. Yes."),  # text before <think>
        ("<thi", "", False, ""),  # a block starting
        ("No thinking here.", "", False, "No thinking here."),
        ("a</think>b</think>c", "a", True, "b</think>c"),  # only the first block counts
    ],
)
def test_thinking_and_answer_are_split_in_every_state(text, thinking, closed, answer):
    parts = split(text)
    assert (parts.thinking_text, parts.closed, parts.answer_text) == (thinking, closed, answer)
    assert "".join(text[i] for i in parts.answer_origin) == answer
    if parts.thinking is not None:
        assert text[parts.thinking.start : parts.thinking.stop] == thinking


def test_earlier_answers_go_back_to_the_model_without_their_thinking():
    turns = [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "<think>why</think>\n\nA1"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "<think>partial"},  # being continued: kept
    ]
    assert [t["content"] for t in without_thinking(turns)] == ["Q1", "A1", "Q2", "<think>partial"]


# math -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "latex, shown",
    [
        (r"x_1 \cdot y_2", "x₁ · y₂"),
        (r"\alpha \leq \beta", "α ≤ β"),
        (r"\frac{a+b}{2}", "(a+b)/2"),
        (r"\sum_{i=1}^n i", "∑ᵢ₌₁ⁿ i"),
        (r"e^{-x}", "e^(-x)"),  # no superscript x in the table: the script in parentheses
    ],
)
def test_formulas_read_as_unicode_math(latex, shown):
    assert formula_text(latex) == shown


def test_dollar_amounts_stay_text_and_dollar_math_is_a_formula():
    for money in (
        "It costs $5 and $10.",
        "$5-$10 a day",
        "US$5 or US$6",
        "a \\$x$ sign",
        "$HOME/$USER",
    ):
        assert show_math(money).markdown == money and not show_math(money).formulas
    shown = show_math("Let $x^2$ and $$y_1$$ be")
    assert shown.markdown == "Let x² and y₁ be" and len(shown.formulas) == 2


def test_code_keeps_its_latex_as_written():
    text = "`\\(x_1\\)` and\n```\n$a_1$ \\[b\\]\n```\n"
    assert show_math(text).markdown == text


def test_the_export_and_the_math_view_find_the_same_code_as_commonmark():
    """One definition of code (app.markdown_code); the two used to find it each their own way:
    the math view read an indented code block as prose, and the export took "`a … `" after
    a lone "``" for a code span, where CommonMark has none."""
    block = "Run:\n\n    echo $x_1$ <b>\n\nDone."
    unmatched = "``a $x^2$ <b> `"
    assert code_ranges(block) == [(6, 25)] and code_ranges(unmatched) == []
    assert show_math(block).markdown == block  # the code block stays as written
    assert markdown_text(block) == block
    assert show_math(unmatched).markdown == "``a x² <b> `"
    assert markdown_text(unmatched) == "``a $x^2$ &lt;b> `"
    quoted = "> a `<i>` b\r\n> ```\r\n> <j>\r\n> ```\r\n<k>"  # container marks, Windows lines
    assert markdown_text(quoted) == "> a `<i>` b\r\n> ```\r\n> <j>\r\n> ```\r\n&lt;k>"


# the card -------------------------------------------------------------------------------------
THINKING_ANSWER = [
    (0, [("<think>", False)]),
    (3, [("\nLet me", True), (" add", True), (" them.", False)]),
    (0, [("\n</think>", False)]),
    (2, [("\n\nThe sum", True), (" is 4.", False)]),
    (0, [(END, False)]),
]


def painted(body) -> str:
    text = body.toPlainText()
    return "".join(text[p] for p in highlighted_positions(body.document()))


def test_thinking_folds_under_its_toggle_with_its_highlights_kept(app, qtbot):
    ask(qtbot, app, "2+2?", answer_events(THINKING_ANSWER))
    view = app.window.transcript.views[-1]
    panel = view.thinking
    assert panel.isVisible() and not panel.body.isVisible()  # collapsed at first
    assert panel.toggle.text() == "▸ Thought for 5 tokens"
    assert view.body.toPlainText() == "The sum is 4."
    assert painted(view.body) == "The sum"
    panel.toggle.click()
    assert panel.body.isVisible() and panel.toggle.text().startswith("▾ Thought for")
    assert panel.body.toPlainText() == "Let me add them."
    assert painted(panel.body) == "Let me add"
    first = QTextCursor(panel.body.document())
    first.setPosition(1)
    point = panel.body.cursorRect(first).center() - QPoint(3, 0)  # over "L" of "Let"
    assert "accepted draft token" in panel.body.tooltip_at(point)  # indices of the whole text
    # the stored chat, reopened, shows the same
    app.controller.open_session(app.controller.session.id)
    again = app.window.transcript.views[-1]
    assert again.body.toPlainText() == "The sum is 4." and painted(again.body) == "The sum"
    again.thinking.set_expanded(True)
    assert painted(again.thinking.body) == "Let me add"


def streamed_until(qtbot, app, script, words: str):
    """Ask a question whose answer streams ``script`` (an asyncio.Event in it holds the
    stream there): the answer's card, drawn once its text holds ``words``, and the task."""
    app.scripted.queue(script)
    task = app.window.send("2+2?")
    transcript = app.window.transcript
    qtbot.waitUntil(
        lambda: transcript.streaming_view is not None and words in transcript.streaming_view.text
    )
    view = transcript.streaming_view
    view.refresh()
    return view, task


def test_while_thinking_the_card_says_thinking_and_shows_no_answer(app, qtbot):
    gate = asyncio.Event()
    events = answer_events(THINKING_ANSWER)
    # held after "<think> … Let me add"
    view, task = streamed_until(qtbot, app, events[:4] + [gate] + events[4:], "add")
    assert view.thinking.toggle.text().startswith("▸ Thinking…")
    assert not view.body.isVisible()
    gate.set()
    qtbot.waitUntil(task.done)
    assert view.thinking.toggle.text().startswith("▸ Thought for")


def test_a_think_block_opened_by_the_template_and_one_cut_off(app, qtbot):
    opened_in_prompt = [(0, [("Hmm.", False)]), (0, [("</think>", False), ("Yes.", False)])]
    ask(qtbot, app, "R1?", answer_events(opened_in_prompt + [(0, [(END, False)])]))
    view = app.window.transcript.views[-1]
    assert view.body.toPlainText() == "Yes."
    assert view.thinking.toggle.text() == "▸ Thought for 2 tokens"
    ask(qtbot, app, "Cut?", answer_events([(0, [("<think>", False), ("Long thought", False)])]))
    cut = app.window.transcript.views[-1]
    assert cut.thinking.toggle.text() == "▸ Thought for 2 tokens, cut off before an answer"
    assert not cut.body.isVisible()
    empty = [(0, [("<think>\n\n</think>\n\n", False), ("Hi.", False)]), (0, [(END, False)])]
    ask(qtbot, app, "No thinking?", answer_events(empty))  # Qwen3 with thinking off
    quiet = app.window.transcript.views[-1]
    assert not quiet.thinking.isVisible() and quiet.body.toPlainText() == "Hi."
    sent = app.scripted.requests[-1].messages
    assert [m["content"] for m in sent if m["role"] == "assistant"] == ["Yes.", ""]


def test_thinking_the_template_opened_shows_as_thinking_from_its_first_token(app, qtbot):
    """The prompt ended with <think> (the engine's prompt event says so): the answer holds
    only "…</think>answer", and what comes before </think> is thinking as it streams."""
    gate = asyncio.Event()
    events = answer_events(
        [(0, [("Let me", False), (" add.", True)]), (0, [("</think>", False), ("Four.", False)])]
    )
    opened = ProgressEvent("prefill", 12, 12, "Prompt read", thinking=True)
    # held after " add."
    view, task = streamed_until(qtbot, app, [opened, *events[:3], gate, *events[3:]], "add")
    assert view.thinking.isVisible() and not view.body.isVisible()
    assert view.thinking.toggle.text() == "▸ Thinking… 2 tokens"
    gate.set()
    qtbot.waitUntil(task.done)
    assert view.thinking.toggle.text() == "▸ Thought for 3 tokens"
    assert view.body.toPlainText() == "Four."


def test_thinking_the_template_opened_is_still_thinking_when_the_chat_is_opened_again(app, qtbot):
    """An answer cut off before </think>: only the engine's word says its text is thinking,
    and that word is stored with the answer (the reopened chat, the restarted app) and kept
    by a Continue of it before the engine says it again."""
    opened = ProgressEvent("prefill", 12, 12, "Prompt read", thinking=True)
    cut_off = answer_events([(0, [("Let me", False), (" add.", True)])])  # no </think> yet
    ask(qtbot, app, "2+2?", [opened, *cut_off])
    shown = "▸ Thought for 2 tokens, cut off before an answer"
    assert app.window.transcript.views[-1].thinking.toggle.text() == shown
    app.controller.open_session(app.controller.session.id)  # read again from the store
    again = app.window.transcript.views[-1]
    assert again.thinking.toggle.text() == shown and not again.body.isVisible()
    assert "opened_thinking" not in app.controller.messages[-1].stats  # not a figure
    restarted = Store(app.store.path)
    try:
        (answer,) = [m for m in restarted.messages(app.controller.session.id) if m.stats]
        assert answer.provenance.opened_thinking
    finally:
        restarted.close()
    gate = asyncio.Event()  # Continue: held before the engine says anything of the prompt
    app.scripted.queue([gate, *answer_events([(0, [(" Four", False)])])])
    again.continue_button.click()
    qtbot.waitUntil(lambda: app.window.transcript.streaming_view is not None)
    going_on = app.window.transcript.streaming_view
    going_on.refresh()
    assert not going_on.thinking.isHidden() and going_on.body.isHidden()
    gate.set()
    qtbot.waitUntil(lambda: not app.controller.busy)


def test_latex_renders_as_math_and_a_formula_is_highlighted_only_if_all_drafted(app, qtbot):
    answer = [
        (0, [("Area: ", False)]),
        (2, [("\\(", True), ("\\pi r^2", True), ("\\)", False)]),
        (0, [(" and \\[a_1 * b_2\\]", False)]),
        (2, [(" with $x", True), ("_1$", False)]),
        (0, [(" for $5 and $10 in code `\\(x\\)`.", False)]),
        (0, [(END, False)]),
    ]
    ask(qtbot, app, "latex", answer_events(answer))
    view = app.window.transcript.views[-1]
    shown = view.body.toPlainText()
    assert shown == "Area: πr² and a₁ * b₂ with x₁ for $5 and $10 in code \\(x\\)."
    # "πr²" was all drafted; "x₁" only half (its "_1" was the model's own): not painted
    assert painted(view.body) == "πr² with "


def test_export_marks_the_thinking(app, qtbot):
    ask(qtbot, app, "2+2?", answer_events(THINKING_ANSWER))
    controller = app.controller
    text = chat_markdown(controller.session, controller.messages)
    assert (
        "## Draftless (scripted-model)\n\n> **Thinking**\n>\n> Let me add them.\n\nThe sum is 4.\n"
        in text
    )
    data = json.loads(chat_json(controller.session, controller.messages))
    answer = data["messages"][1]
    assert answer["thinking"] == "\nLet me add them.\n" and answer["answer"] == "The sum is 4."
    assert answer["content"].startswith("<think>")


def test_a_display_formula_on_its_own_is_centred(qapp):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QTextDocument

    from app.render import render

    document = QTextDocument()
    render(document, "Before:\n\n\\[a = b\\]\n\n$$c$$ and more.\n\nLast \\(d\\)", None)
    blocks = []
    block = document.begin()
    while block.isValid():
        blocks.append((block.text(), bool(block.blockFormat().alignment() & Qt.AlignHCenter)))
        block = block.next()
    assert blocks == [
        ("Before:", False),
        ("a = b", True),
        ("c and more.", False),
        ("Last d", False),
    ]
