"""A reasoning model's <think> text folded in its card, and LaTeX shown as Unicode math, with
the accepted-draft highlights kept on both: views fed scripted engine events (no model)."""

from __future__ import annotations

import asyncio
import json

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QTextCursor

from engine.events import ProgressEvent

from app.presenters.controller import chat_turns
from app.presenters.export import chat_json, chat_markdown, markdown_text
from app.views.markdown_code import code_ranges
from app.views.math_text import formula_text, show_math
from app.views.render import highlighted_positions
from app.storage.provenance import Provenance
from app.storage.store import Message, Store
from app.views.thinking import split

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


def question(text: str) -> Message:
    return Message(None, "chat", "user", text)


def answer(text: str, opened_by_template: bool = False) -> Message:
    """An answer whose text starts inside a think block the chat template opened when
    ``opened_by_template`` (the engine's "prefill" event said so)."""
    provenance = Provenance.from_tokens(text, [])
    provenance.opened_thinking = opened_by_template
    return Message(None, "chat", "assistant", text, provenance=provenance)


def sent(messages: list[Message]) -> list[tuple[str, str]]:
    return [(t["role"], t["content"]) for t in chat_turns(messages)]


def test_earlier_answers_go_back_to_the_model_without_their_thinking():
    chat = [question("Q1"), answer("<think>why</think>\n\nA1"), question("Q2")]
    chat.append(answer("<think>partial"))  # after the last question (being written): kept
    assert sent(chat) == [
        ("user", "Q1"),
        ("assistant", "A1"),
        ("user", "Q2"),
        ("assistant", "<think>partial"),
    ]


@pytest.mark.parametrize(
    "cut_off",
    [
        answer("Let me add 2 and 2", opened_by_template=True),  # stopped before </think>
        answer("<think>Let me add 2 and 2"),
        answer("<think>Let me add 2 and 2</thi"),  # the reply limit, half-way through the tag
    ],
)
def test_an_answer_cut_off_while_thinking_sends_none_of_its_thinking(cut_off):
    """Nothing of it is answer: it is left out, and the questions around it join into one
    turn (templates insist on alternating roles)."""
    assert sent([question("2+2?"), cut_off, question("And 3+3?")]) == [("user", "2+2?\n\nAnd 3+3?")]


def test_an_answer_cut_off_while_thinking_sends_what_it_wrote_before_thinking():
    chat = [question("2+2?"), answer("Let me see. <think>2 and 2"), question("And 3+3?")]
    assert sent(chat) == [
        ("user", "2+2?"),
        ("assistant", "Let me see. "),
        ("user", "And 3+3?"),
    ]


def test_thinking_the_template_opened_is_cut_up_to_its_end_even_where_it_quotes_the_tag():
    """The text starts inside the block: all up to the first </think> is thinking, a
    "<think>" the model wrote inside it included."""
    closed = answer("Should I write <think> here? No.</think>\n\nFour.", opened_by_template=True)
    assert sent([question("2+2?"), closed, question("And 3+3?")]) == [
        ("user", "2+2?"),
        ("assistant", "Four."),
        ("user", "And 3+3?"),
    ]


def test_answers_in_a_row_lose_their_thinking_each_on_its_own():
    """Answers left in a row (the question between them deleted) are one turn: the one cut
    off while thinking does not take the next one's answer for thinking, and the template's
    </think> does not take the one before it for thinking."""
    chat = [
        question("2+2?"),
        answer("<think>Let me add"),
        answer("Four."),
        answer("Let me add again.</think>\n\nStill four.", opened_by_template=True),
        question("And 3+3?"),
    ]
    assert sent(chat) == [
        ("user", "2+2?"),
        ("assistant", "Four.\n\nStill four."),
        ("user", "And 3+3?"),
    ]


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
    """One definition of code (app.views.markdown_code); the two used to find it each their own way:
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
    turns = [(m["role"], m["content"]) for m in app.scripted.requests[-1].messages]
    # the answer cut off while thinking is left out; the questions around it join
    assert turns[-3:] == [("user", "R1?"), ("assistant", "Yes."), ("user", "Cut?\n\nNo thinking?")]


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


def test_the_next_question_sends_no_thinking_of_an_answer_cut_off_in_the_templates_block(
    app, qtbot
):
    """Its text has no tag at all: only the engine's word (stored with the answer) says it
    is thinking, and a reopened chat knows it without reading the answer's tokens."""
    opened = ProgressEvent("prefill", 12, 12, "Prompt read", thinking=True)
    ask(qtbot, app, "2+2?", [opened, *answer_events([(0, [("Let me", False), (" add.", True)])])])
    ask(qtbot, app, "And 3+3?", answer_events([(0, [("Six.", False), (END, False)])]))
    sent = [(m["role"], m["content"]) for m in app.scripted.requests[-1].messages]
    assert [turn for turn in sent if turn[0] != "system"] == [("user", "2+2?\n\nAnd 3+3?")]
    restarted = Store(app.store.path)
    try:
        stored = restarted.messages(app.controller.session.id)
        assert [(t["role"], t["content"]) for t in chat_turns(stored)] == [
            ("user", "2+2?\n\nAnd 3+3?"),
            ("assistant", "Six."),
        ]
        assert "_provenance" not in stored[1].__dict__  # its tokens were not read
        assert stored[1].opened_thinking and stored[1].provenance.opened_thinking
    finally:
        restarted.close()


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

    from app.views.render import render

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
