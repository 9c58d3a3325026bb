"""What the main window shows of speculation: the speculation bar above the chat (live
while an answer is written, else the open chat's latest answer), the inspector's list of
answers, and a replay's highlights laid over an answer."""

from __future__ import annotations

from PySide6.QtCore import QObject

from .livestats import LiveStats, draft_count_of


def on_screen(controller, answer) -> bool:
    """``answer`` belongs to the chat that is open."""
    return controller.session is not None and answer.session_id == controller.session.id


class GaugePresenter(QObject):
    def __init__(self, window, controller):
        super().__init__(window)
        self.window = window
        self.controller = controller
        self.bar = window.speculation_bar
        self.inspector = window.inspector
        controller.answerStarted.connect(self.answer_started)
        controller.passRecorded.connect(self.pass_recorded)
        controller.answerFinished.connect(self.answer_finished)
        controller.replayFinished.connect(self.inspector.replay.show_results)
        controller.replayFailed.connect(self.inspector.replay.show_failure)
        self.inspector.replay.replayRequested.connect(self.replay)
        self.inspector.replay.highlightRequested.connect(self.show_replay_highlights)
        self.inspector.replay.applyRequested.connect(self.apply_replay_settings)
        self.inspector.replay.plainRequested.connect(self.turn_drafting_off)
        window.transcript.inspectRequested.connect(self.inspect_view)

    def show_gauge(self) -> None:
        """The gauge shows the open chat's latest answer: live while it is being written."""
        c = self.controller
        answer = c.answer
        if answer is not None and on_screen(c, answer) and not answer.finished:
            self.bar.show_numbers(answer.live, answer.draft_count, True)
            return
        last = next((m for m in reversed(c.messages) if m.role == "assistant" and m.stats), None)
        self.bar.show_numbers(  # the dial's scale is the answer's, not today's settings
            LiveStats.of_message(last.stats, last.timing) if last else None,
            draft_count_of(last.stats, c.settings.draft_count) if last else c.settings.draft_count,
            False,
        )

    def show_session(self) -> None:
        self.show_gauge()
        self.refresh_inspector()

    def answer_started(self, answer) -> None:
        if on_screen(self.controller, answer):
            self.bar.show_numbers(None, answer.draft_count, True)

    def pass_recorded(self, answer) -> None:
        if on_screen(self.controller, answer):
            self.bar.show_numbers(answer.live, answer.draft_count, True)

    def answer_finished(self, answer) -> None:
        self.show_gauge()
        if answer.message is not None:
            self.refresh_inspector(answer.message.id)

    # inspector ----------------------------------------------------------------------------
    def refresh_inspector(self, newest: int | None = None) -> None:
        answers = self.controller.inspectable_answers()
        checked = self.inspector.checked_ids() & {a[0] for a in answers}
        if newest is not None or not checked:
            checked = {newest if newest is not None else (answers[-1][0] if answers else -1)}
        self.inspector.set_answers(answers, checked)

    def inspect_view(self, view) -> None:
        if view.message_id is not None:
            self.inspector.inspect(view.message_id)
        self.window.panels.open("side", self.window.inspector_dock)

    # replay -------------------------------------------------------------------------------
    def replay(self, message_id: int, draft_counts: list[int], ngram_orders: list[int]):
        return self.controller.replay_grid(message_id, draft_counts, ngram_orders)

    def show_replay_highlights(self, message_id: int, result) -> None:
        view = self.window.transcript.view_of(message_id)
        if view is None or view.provenance is None:
            return
        if result is None:
            view.show_overlay(None)
            self.show_gauge()
            return
        label = result.label
        try:
            overlay = view.provenance.with_flags(result.from_draft, label + " (replay)")
        except ValueError as error:
            self.window.banner.show_message(f"Cannot show that replay on this answer ({error}).")
            return
        view.show_overlay(overlay, label, result.stats)
        self.bar.show_replay(result.stats, result.draft_count, label)

    def apply_replay_settings(self, result) -> None:
        message = self.controller.use_replayed_settings(result)
        self.window.statusBar().showMessage(message, 4000)

    def turn_drafting_off(self) -> None:
        message = self.controller.use_plain_decoding()
        self.window.statusBar().showMessage(message, 4000)

    def restyle(self) -> None:
        self.bar.restyle()
        self.inspector.refresh()
