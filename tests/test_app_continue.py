"""Continue: an answer that stopped at its token limit goes on in the same message, with the
numbers of the whole answer. Views fed scripted engine events (no model)."""

from __future__ import annotations

from engine.events import ReplayOutcome

from .scripted_engine import END, answer_events
from .test_app_views import app, ask, loop, wait  # noqa: F401

CUT_SHORT = [(0, [("one", False)]), (1, [(" two", True)])]  # no end token: the limit


def test_continue_appends_to_the_same_message_and_keeps_its_highlights(app, qtbot):
    window, controller = app.window, app.controller
    ask(qtbot, app, "count", answer_events(CUT_SHORT))
    view = window.transcript.views[-1]
    assert view.continue_button.isVisible() and controller.can_continue
    first = controller.messages[-1]
    tokens = [t.token for t in first.provenance.tokens]
    app.scripted.queue(answer_events([(0, [(" three", False)]), (0, [(END, False)])]))
    view.continue_button.click()
    wait(qtbot, controller.answer_task)
    assert list(app.scripted.requests[-1].continue_tokens) == tokens
    views = window.transcript.views
    assert len(views) == 2 and views[-1].text == "one two three"
    assert not views[-1].continue_button.isVisible()  # it ended this time
    message = controller.messages[-1]
    assert message.id == first.id and message.finish_reason == "stop"
    stored = app.store.messages(controller.session.id)[-1]
    assert (stored.id, stored.content, stored.finish_reason) == (first.id, "one two three", "stop")
    assert (stored.stats["passes"], stored.stats["emitted"]) == (4, 3)
    assert [t.from_draft for t in stored.provenance.tokens] == [False, True, False]
    assert stored.provenance.text == "one two three"


def test_continue_is_refused_for_a_server_or_another_models_answer(app, qtbot):
    window, controller = app.window, app.controller
    problems = []
    controller.problem.connect(problems.append)
    ask(qtbot, app, "count", answer_events(CUT_SHORT))
    sent = len(app.scripted.requests)
    controller.messages[-1].model = "some-other-model"
    assert controller.continue_answer() is None
    assert "some-other-model" in problems[-1] and "load that model" in problems[-1]
    controller.models.service = object()  # connected to a server
    assert controller.continue_answer() is None
    assert "this machine's engine" in problems[-1]
    assert len(app.scripted.requests) == sent  # nothing was asked of any engine
    assert window.transcript.views[-1].text == "one two"  # the answer is still shown
    controller.models.service = controller.models.local_service


def test_an_answer_that_ended_offers_no_continue(app, qtbot):
    ask(qtbot, app, "count", answer_events(CUT_SHORT + [(0, [(END, False)])]))
    assert not app.window.transcript.views[-1].continue_button.isVisible()
    assert not app.controller.can_continue


def test_a_continuation_that_fails_leaves_the_answer_as_it_was(app, qtbot):
    from engine.events import ErrorEvent

    window, controller = app.window, app.controller
    ask(qtbot, app, "count", answer_events(CUT_SHORT))
    first = controller.messages[-1]
    app.scripted.queue([ErrorEvent("The engine could not go on.")])
    window.transcript.views[-1].continue_button.click()
    wait(qtbot, controller.answer_task)
    assert controller.messages[-1] is first and first.content == "one two"
    assert window.transcript.views[-1].text == "one two"
    assert window.transcript.views[-1].continue_button.isVisible()  # it can be tried again
    assert app.store.messages(controller.session.id)[-1].content == "one two"


def test_the_window_leaves_rules_to_the_controller(app, qtbot):
    """Inspector labels, the replay grid and replayed settings are the controller's."""
    from .test_app_views import SIMPLE

    controller = app.controller
    ask(qtbot, app, "first", answer_events(SIMPLE))
    ask(qtbot, app, "second", answer_events(CUT_SHORT, drafter="suffix"))
    labels = [label for _, label, _ in controller.inspectable_answers()]
    assert labels == ["#1 · ngram-cache · 1.5 tokens/pass", "#2 · suffix · 1.0 tokens/pass"]
    wait(qtbot, controller.replay_grid(controller.messages[-1].id, [2, 6], [3]))
    grid = {(c.drafter, c.draft_count, c.ngram_order) for c in app.scripted.replays[-1]}
    assert grid == {
        (d, k, 3)
        for d in ("ngram-cache", "prompt-lookup", "suffix", "suffix-static")
        for k in (2, 6)
    }
    said = controller.use_replayed_settings(
        ReplayOutcome(drafter="suffix", draft_count=6, ngram_order=3, stats={}, from_draft=())
    )
    settings = controller.settings
    assert (settings.drafter, settings.draft_count, settings.adaptive) == ("suffix", 6, False)
    assert settings.ngram_min <= 3 and "6 drafts (fixed)" in said
