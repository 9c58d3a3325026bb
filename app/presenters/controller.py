"""The glue between the engine service, the store and the views.

``ChatController`` turns user actions (send, stop, regenerate, continue, replay) into engine
requests, consumes the event streams on the app's asyncio loop (qasync), keeps the store
up to date and tells the views through Qt signals. It holds no widgets. Which engine
answers and which model it has loaded is its ``models`` (``app.presenters.model_control``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sqlite3
from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from engine.api import LocalEngine
from engine.events import (
    DoneEvent,
    ErrorEvent,
    ModelEvent,
    PassEvent,
    ProgressEvent,
    ReplayEvent,
    ReplayOutcome,
    TokenEvent,
)
from engine.formats.stop_strings import StopMatcher, kept_figures
from engine.settings import DraftSettings, configurations
from engine.stats import DecodeStats, tokens_per_pass_of

from ..engines.recorded_replay import replay_recorded
from ..storage.answer_format import AnswerFormat, answer_format
from ..storage.attachments import split_message
from ..storage.provenance import Provenance
from ..storage.settings import AppSettings, SettingsStore
from ..storage.store import Message, Session, Store
from ..views.context_meter import measured_pace
from ..views.thinking import answer_only
from .continuable import INTERRUPTED, can_go_on
from .export import export_text
from .livestats import DRAFT_COUNT, LiveStats, draft_count_of
from .model_control import ModelControl

log = logging.getLogger(__name__)
TITLE_LENGTH = 48
PLAIN_DRAFTER = "none"  # the engine's drafter that drafts nothing: plain decoding
LOADING_STAGES = {"convert", "load", "download"}  # progress of a model load (a dialog)
# seeds drawn for "Regenerate with temperature": nine digits, short enough to read and type
SHOWN_SEED_LIMIT = 10**9


def session_title(text: str) -> str:
    """A chat's default name: the first line of prose of its first message, else the names
    of the files attached to it."""
    text, files = split_message(text)
    for line in text.splitlines():
        line = line.strip().lstrip("#>*-+ ").strip()
        if line and not line.startswith("```"):
            return " ".join(line.split())
    return " ".join(text.split()) or ", ".join(f.name for f in files) or "New chat"


def shortened(title: str) -> str:
    """A chat's title at most ``TITLE_LENGTH`` characters long (cut with "…")."""
    return title if len(title) <= TITLE_LENGTH else title[: TITLE_LENGTH - 1] + "…"


def unsaved(error: Exception, what: str, then: str) -> str:
    """A sentence for ``what`` that could not be saved: the cause, what the person can do
    about it, and ``then`` (what happens to their text)."""
    text = str(error)
    fix = (
        "Free some space on the disk"
        if "full" in text.lower()
        else "Check the free space on the disk and the permissions of the Draftless data folder"
    )
    return f"{what} ({text}). {fix}; {then}"


def chat_turns(messages: list[Message]) -> list[dict]:
    """The chat as the engine gets it: one turn per message with text, a run of messages
    of one role (left by a deleted message or a failed answer) joined into one turn, so a
    template that insists on alternating user and assistant turns takes every chat. Answers
    before the last question go without their thinking (``thinking.answer_only``), each
    split on its own before joining: one cut off while thinking (no ``</think>`` yet, in a
    block it or the chat template opened) is left out when nothing of it is answer."""
    last_question = max(
        (i for i, m in enumerate(messages) if m.role == "user" and m.content.strip()), default=-1
    )
    turns: list[dict] = []
    for i, message in enumerate(messages):
        content = message.content
        if message.role == "assistant" and i < last_question:
            content = answer_only(content, message.opened_thinking)
        if not content.strip():
            continue
        if turns and turns[-1]["role"] == message.role:
            turns[-1]["content"] += "\n\n" + content
        else:
            turns.append({"role": message.role, "content": content})
    return turns


class Answer:
    """The assistant message being written: text with provenance, live numbers, state."""

    def __init__(self, session_id: str, request, stop_strings: tuple[str, ...] = ()):
        self.session_id = session_id
        self.request = request
        self.stop = StopMatcher(stop_strings)  # the server's matcher, on this answer's text
        self.provenance = Provenance()
        self.live = LiveStats()
        self.finish_reason: str | None = None
        self.message: Message | None = None  # set once stored
        self.error: str | None = None
        self.stream = None
        self.parent_id = 0  # the message it answers
        self.discarded = False  # its chat was deleted: nothing of it is stored or reported
        self.continues: Message | None = None  # the stored answer this one goes on with
        self.seed: int | None = None  # a one-off sampled answer's seed, shown to repeat it

    @property
    def text(self) -> str:
        return self.provenance.text

    def take(self, event: TokenEvent) -> bool:
        """Add a token unless a stop string has ended the answer; True once one has (the
        text is then cut before it and the engine should stop)."""
        if self.stop.stopped:
            return False
        start = len(self.provenance.text) - self.stop.returned - len(self.stop.held)
        self.provenance.add_event(event)
        self.stop.feed(event.text)
        if self.stop.stopped:
            self.provenance.cut(start + self.stop.returned)
        return self.stop.stopped

    def ending(self, done: DoneEvent) -> DoneEvent:
        """``done`` as the person sees it: a stop string ends the answer with "stop", the
        text before it, and figures that count only the tokens kept."""
        if not self.stop.stopped:
            return done
        earlier = len(self.continues.content) if self.continues else 0
        kept = len(self.provenance.tokens) - (
            len(self.continues.provenance.tokens) if self.continues else 0
        )
        stats, timing = kept_figures(done.stats, done.timing, self.live.pass_events, kept)
        return replace(
            done,
            finish_reason="stop",
            text=self.provenance.text[earlier:],
            tokens=done.tokens[:kept],
            from_draft=done.from_draft[:kept],
            stats=stats,
            timing=timing,
        )

    @property
    def draft_count(self) -> int:
        return self.request.draft.draft_count

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


class ChatController(QObject):
    sessionsChanged = Signal()
    sessionOpened = Signal(object)  # Session
    messageAdded = Signal(object)  # Message
    messageRemoved = Signal(int)  # message id
    answerStarted = Signal(object)  # Answer
    answerUpdated = Signal(object)  # Answer (new text)
    passRecorded = Signal(object)  # Answer (new numbers)
    answerProgress = Signal(object, object)  # Answer, ProgressEvent (reading the prompt)
    answerFinished = Signal(object)  # Answer
    busyChanged = Signal(bool)
    settingsChanged = Signal(object)  # AppSettings
    systemPromptChanged = Signal(str)  # the open chat's system prompt
    answerFormatChanged = Signal(object)  # the open chat's AnswerFormat
    replayFinished = Signal(int, object)  # message id, list of ReplayOutcome (best first)
    replayFailed = Signal(int, str)  # message id, why
    problem = Signal(str)  # a message for the person (errors, notices)
    solved = Signal(str)  # a message ``problem`` gave that no longer holds
    status = Signal(str)  # quiet engine work during an answer ("" when it is over)

    def __init__(self, service, store: Store, settings_store: SettingsStore, parent=None):
        super().__init__(parent)
        self.store = store
        store.on_notice = self.problem.emit  # e.g. the database was deleted while running
        self.settings_store = settings_store
        self.settings: AppSettings = settings_store.load()
        self.session: Session | None = None
        self.messages: list[Message] = []
        self.system_prompt = self.settings.system_prompt  # the open chat's
        self.answer_format = AnswerFormat()  # the open chat's
        self.answer: Answer | None = None
        self.answer_task: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._unsolved: dict[str, str] = {}  # what failed ("send", "new chat"): its message
        self._paces: dict[str, float] = {}  # prompt tokens a second, by model, measured here
        self.models = ModelControl(  # the engine that answers and its model
            service,
            settings=lambda: self.settings,
            update_settings=self.update_settings,
            is_busy=lambda: self.busy,
            spawn=self._spawn,
            parent=self,
        )
        self.models.problem.connect(self.problem)

    def _failed(self, cause: str, message: str) -> None:
        """Say ``message`` about ``cause``; ``_worked(cause)`` takes it back."""
        self._unsolved[cause] = message
        self.problem.emit(message)

    def _worked(self, cause: str) -> None:
        """``cause`` worked this time: what was said about its failing no longer holds."""
        message = self._unsolved.pop(cause, None)
        if message is not None:
            self.solved.emit(message)

    # notices gathered while starting up ---------------------------------------------------
    def startup_notices(self) -> list[str]:
        return [n for n in (self.store.notice, self.settings_store.message) if n]

    @property
    def busy(self) -> bool:
        return self.answer is not None and not self.answer.finished

    @property
    def answering_here(self) -> bool:
        """The open chat's answer is being written (what Stop stops)."""
        return self.busy and self.session is not None and self.answer.session_id == self.session.id

    # settings ------------------------------------------------------------------------------
    def update_settings(self, settings: AppSettings) -> None:
        if settings == self.settings:
            return
        problems = settings.problems()
        if problems:
            self.problem.emit("Settings not applied: " + "; ".join(problems))
            return
        self.settings = settings
        try:
            self.settings_store.save(settings)
        except OSError as error:
            self.problem.emit(f"Could not save the settings ({error}).")
        self.settingsChanged.emit(settings)

    # sessions -----------------------------------------------------------------------------
    def sessions(self, search: str = "") -> list[Session]:
        return self.store.sessions(search)

    def new_session(self) -> Session | None:
        """Open a new, empty chat (None when it could not be saved; the banner says why)."""
        if self.session is not None and not self.messages:  # already on an empty chat
            self.open_session(self.session.id)
            return self.session
        try:
            session = self.store.create_session(system_prompt=self.settings.system_prompt)
        except (sqlite3.Error, OSError) as error:
            self._failed(
                "new chat",
                unsaved(
                    error,
                    "No new chat was started: the chat history could not be saved",
                    "then try again.",
                ),
            )
            return None
        self._worked("new chat")
        self.sessionsChanged.emit()
        self.open_session(session.id)
        return session

    def open_session(self, session_id: str) -> None:
        session = self.store.session(session_id)
        if session is None:
            return
        self.session = session
        self.messages = self.store.messages(session_id)
        self.system_prompt = self.system_prompt_of(session_id)
        self.systemPromptChanged.emit(self.system_prompt)
        self.answer_format = self._stored_format(session_id)
        self.answerFormatChanged.emit(self.answer_format)
        self.sessionOpened.emit(session)

    def system_prompt_of(self, session_id: str) -> str:
        """The system prompt a chat is answered with: its own, else the settings' default."""
        own = self.store.system_prompt(session_id)
        return self.settings.system_prompt if own is None else own

    def set_system_prompt(self, text: str) -> None:
        """The open chat's system prompt from now on (a new chat is made when none is open);
        the default for new chats stays in the settings."""
        if text == self.system_prompt and self.session is not None:
            return
        if self.session is None and self.new_session() is None:
            return  # the banner says why
        try:
            self.store.set_system_prompt(self.session.id, text)
        except (sqlite3.Error, OSError) as error:
            self.problem.emit(
                unsaved(
                    error,
                    "The chat's system prompt was not saved: the chat history could not be changed",
                    "it applies to this chat until you quit.",
                )
            )
        self.system_prompt = text
        self.systemPromptChanged.emit(text)

    def _stored_format(self, session_id: str) -> AnswerFormat:
        """The chat's answer format, checked again as read; free text where the stored one
        no longer passes (the row stays as it is, and the banner says so)."""
        stored = self.store.answer_format(session_id)
        if stored is None:
            return AnswerFormat()
        try:
            return answer_format(*stored)
        except ValueError as error:
            self.problem.emit(
                f"This chat's answer format could not be used ({error}); its answers are free "
                "text until you choose another format above the chat."
            )
            return AnswerFormat()

    def set_answer_format(self, chosen: AnswerFormat) -> None:
        """The open chat's answer format from now on (a new chat is made when none is open)."""
        if chosen == self.answer_format and self.session is not None:
            return
        if self.session is None and self.new_session() is None:
            return  # the banner says why
        try:
            self.store.set_answer_format(self.session.id, chosen.kind, chosen.text)
        except (sqlite3.Error, OSError) as error:
            self.problem.emit(
                unsaved(
                    error,
                    "The chat's answer format was not saved: the chat history could not be changed",
                    "it applies to this chat until you quit.",
                )
            )
        self.answer_format = chosen
        self.answerFormatChanged.emit(chosen)

    def rename_session(self, session_id: str, title: str) -> None:
        title = " ".join(title.split())
        if title:
            try:
                self.store.rename_session(session_id, title)
            except (sqlite3.Error, OSError) as error:
                self.problem.emit(
                    unsaved(
                        error,
                        "The chat was not renamed: the chat history could not be saved",
                        "then rename it again.",
                    )
                )
                return
            if self.session and self.session.id == session_id:
                self.session.title = title
            self.sessionsChanged.emit()

    def delete_session(self, session_id: str) -> None:
        try:
            self.store.delete_session(session_id)
        except (sqlite3.Error, OSError) as error:
            self.problem.emit(
                unsaved(
                    error,
                    "The chat was not deleted: the chat history could not be changed",
                    "then delete it again.",
                )
            )
            return
        if self.answer and self.answer.session_id == session_id and self.busy:
            self.answer.discarded = True
            self.stop()
        if self.session and self.session.id == session_id:
            self.session = None
            self.messages = []
            remaining = self.store.sessions()
            if remaining:
                self.open_session(remaining[0].id)
            else:
                self.system_prompt = self.settings.system_prompt  # the next chat's
                self.systemPromptChanged.emit(self.system_prompt)
                self.answer_format = AnswerFormat()
                self.answerFormatChanged.emit(self.answer_format)
                self.sessionOpened.emit(None)
        self.sessionsChanged.emit()

    def export_session(self, session_id: str, kind: str, path: str) -> bool:
        """Write a chat to ``path`` as ``kind`` ("markdown" or "json"); False (and the
        banner says why) when it could not be written."""
        session = self.store.session(session_id)
        if session is None:
            return False
        messages = (
            self.messages
            if self.session and self.session.id == session_id
            else self.store.messages(session_id)
        )
        try:
            with open(path, "w", encoding="utf-8", newline="\n") as file:
                file.write(export_text(kind, session, messages, self.system_prompt_of(session_id)))
        except OSError as error:
            self.problem.emit(f"The chat was not exported to {path} ({error}).")
            return False
        return True

    # chatting -----------------------------------------------------------------------------
    def send(self, text: str) -> asyncio.Task | None:
        """Add the user's message and start the answer; None when busy or empty."""
        if self.busy or not text.strip():
            return None
        if self.session is None and self.new_session() is None:
            return None  # the banner says why; the text stays in the box
        try:
            session = self.session
            message = self._add_question(
                Message(id=None, session_id=session.id, role="user", content=text),
                self.messages[-1].id if self.messages else 0,
            )
        except (sqlite3.Error, OSError) as error:
            self._failed(
                "send",
                unsaved(
                    error,
                    "Your message was not sent: the chat history could not be saved",
                    "your message is still in the box: press Send again.",
                ),
            )
            return None
        self._worked("send")
        message.versions = [message.id]
        self.messages.append(message)
        self.messageAdded.emit(message)
        if sum(m.role == "user" for m in self.messages) == 1 and session.title == "New chat":
            title = shortened(session_title(text))
            session.title = title
            try:
                self.store.rename_session(session.id, title)
            except (sqlite3.Error, OSError) as error:
                self.problem.emit(
                    unsaved(error, "The chat's name could not be saved", "rename it later.")
                )
        self.sessionsChanged.emit()
        return self._start_answer()

    def _add_question(self, message: Message, parent_id: int) -> Message:
        """Store a question after ``parent_id``; on failure nothing of it is left behind."""
        self.store.add_message(message)
        try:
            self.store.link(message, parent_id)
        except (sqlite3.Error, OSError):
            try:
                self.store.delete_message(message.id)
            except (sqlite3.Error, OSError):
                pass  # an unlinked message follows the one before it: still the same chat
            raise
        return message

    @property
    def regenerate_repeats(self) -> bool:
        """Regenerating gives the same answer again: greedy decoding (temperature 0)."""
        return self.settings.temperature == 0

    def regenerate(self, temperature: float | None = None) -> asyncio.Task | None:
        """Answer the last user message again; the earlier answer stays as a version.
        ``temperature`` applies to this answer only (the setting stays)."""
        if self.busy or not self.messages:
            return None
        if self.messages[-1].role == "assistant":
            last = self.messages.pop()
            self.messageRemoved.emit(last.id)
        if not self.messages or self.messages[-1].role != "user":
            return None
        return self._start_answer(temperature)

    @property
    def can_continue(self) -> bool:
        """The last answer stopped at its token limit or was stopped, so it can go on."""
        last = self.messages[-1] if self.messages else None
        return (
            last is not None
            and last.role == "assistant"
            and can_go_on(last.finish_reason)
            and last.provenance is not None
            and bool(last.provenance.tokens)
        )

    def continue_answer(self) -> asyncio.Task | None:
        """Go on with the last answer where its token limit or Stop ended it: the new text is
        appended to the same message, with the numbers of the whole."""
        if self.busy or not self.can_continue:
            return None
        last = self.messages[-1]
        if self.models.service is not self.models.local_service:
            self.problem.emit(
                "Continue works with this machine's engine only: a server does not take an "
                "answer's tokens back. Use Regenerate with a higher Max tokens instead."
            )
            return None
        if last.model != self.models.model_name:
            self.problem.emit(
                f"This answer was written by {last.model or 'another model'}, not by the "
                f"loaded {self.models.model_name}: load that model to continue it, or Regenerate."
            )
            return None
        self.messages.pop()
        self.messageRemoved.emit(last.id)
        return self._start_answer(continuing=last)

    def edit(self, message_id: int, text: str) -> asyncio.Task | None:
        """Send an edited question in place of an earlier one: the chat branches there
        (the earlier question and what followed it stay as a version)."""
        index = next((i for i, m in enumerate(self.messages) if m.id == message_id), None)
        if self.busy or index is None or self.messages[index].role != "user" or not text.strip():
            return None
        old = self.messages[index]
        try:
            self._add_question(
                Message(id=None, session_id=old.session_id, role="user", content=text),
                old.parent_id,
            )
        except (sqlite3.Error, OSError) as error:
            self._failed(
                "send",
                unsaved(
                    error,
                    "The edited question was not sent: the chat history could not be saved",
                    "it is still in the box: press Send again.",
                ),
            )
            return None
        self._worked("send")
        self.messages = self.store.messages(old.session_id)
        self.sessionOpened.emit(self.session)
        self.sessionsChanged.emit()
        return self._start_answer()

    def show_version(self, message_id: int, step: int) -> None:
        """Show the previous (-1) or next (+1) version of a message, and its branch."""
        message = next((m for m in self.messages if m.id == message_id), None)
        if self.busy or message is None or message_id not in message.versions:
            return
        index = message.versions.index(message_id) + step
        if 0 <= index < len(message.versions):
            try:
                self.store.choose(message.session_id, message.versions[index])
            except (sqlite3.Error, OSError) as error:
                self.problem.emit(
                    unsaved(
                        error,
                        "The other version is not shown: the chat history could not be saved",
                        "then try again.",
                    )
                )
                return
            self.messages = self.store.messages(message.session_id)
            self.sessionOpened.emit(self.session)

    def stop(self) -> None:
        """Stop the answer being written, wherever it is (quitting, deleting its chat)."""
        if self.busy and self.answer.stream is not None:
            self.answer.stream.cancel()

    def _start_answer(
        self, temperature: float | None = None, continuing: Message | None = None
    ) -> asyncio.Task:
        turns = chat_turns(self.messages)
        settings = self._chat_settings()
        seed = None
        if temperature is not None:  # one sampled answer: its seed is shown, to repeat it
            settings = replace(settings, temperature=temperature)
            seed = secrets.randbelow(SHOWN_SEED_LIMIT)
        request = settings.request(turns, chat_id=self.session.id)
        request = replace(request, json_schema=self.answer_format.schema)
        if seed is not None:
            request = replace(request, sampling=replace(request.sampling, seed=seed))
        if continuing is not None:
            tokens = tuple(t.token for t in continuing.provenance.tokens)
            request = replace(request, continue_tokens=tokens)
        answer = Answer(self.session.id, request, settings.stop_strings)
        answer.seed = seed
        if continuing is not None:
            answer.continues = continuing
            answer.provenance = Provenance.continuing(continuing.provenance)
        answer.parent_id = self.messages[-1].id
        answer.stream = self.models.service.generate(request)
        self.answer = answer
        self.answerStarted.emit(answer)
        self.busyChanged.emit(True)
        self.answer_task = self._spawn(self._consume(answer))
        return self.answer_task

    def _chat_settings(self) -> AppSettings:
        """The settings with the open chat's own system prompt."""
        return replace(self.settings, system_prompt=self.system_prompt)

    def _spawn(self, coroutine) -> asyncio.Task:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _consume(self, answer: Answer) -> None:
        loading = False  # the engine (re)loads the model inside this request
        said = False  # a line about background work is in the status bar
        try:
            async for event in answer.stream:
                if loading and not isinstance(event, (ProgressEvent, ModelEvent)):
                    loading = False
                    self.models.loadFinished.emit(
                        not isinstance(event, ErrorEvent), getattr(event, "message", "")
                    )
                if isinstance(event, TokenEvent):
                    if answer.take(event):
                        answer.stream.cancel()  # a stop string: the rest is not wanted
                    self.answerUpdated.emit(answer)
                elif isinstance(event, PassEvent):
                    answer.live.record(event)
                    self.passRecorded.emit(answer)
                elif isinstance(event, DoneEvent):
                    self._finish(answer, event)
                elif isinstance(event, ErrorEvent):
                    self._fail(answer, event.message)
                elif isinstance(event, ModelEvent):
                    self.models.model_loaded(event)
                elif isinstance(event, ProgressEvent):
                    if event.stage == "prefill":
                        answer.provenance.opened_thinking = event.thinking
                        self.answerProgress.emit(answer, event)
                        continue
                    if event.stage not in LOADING_STAGES:  # background work: one quiet line
                        said = event.done < event.total
                        self.status.emit(event.message if said else "")
                        continue
                    if not loading:
                        loading = True
                        self.models.loadStarted.emit(self.settings.model or "the built-in model")
                    self.models.loadProgress.emit(event)
        except Exception as error:  # never leave the UI busy forever
            log.exception("answer failed")
            self._fail(answer, f"The answer failed: {error}")
        finally:
            if said:  # the line was about this answer (a table it drafted without)
                self.status.emit("")
            if loading:
                self.models.loadFinished.emit(False, answer.error or "")
            if not answer.finished:
                self._fail(answer, "The engine stopped without finishing the answer.")

    def reading_pace(self) -> float | None:
        """Prompt tokens a second the loaded model reads, as last measured: in this session,
        else in the open chat's answers (None: not measured yet)."""
        name = self.models.model_name
        if name in self._paces:
            return self._paces[name]
        answers = (m for m in reversed(self.messages) if m.role == "assistant" and m.model == name)
        return next(filter(None, (measured_pace(m.timing) for m in answers)), None)

    def _finish(self, answer: Answer, done: DoneEvent) -> None:
        done = answer.ending(done)
        if answer.seed is not None:  # kept with the answer's figures: its footer shows it
            done = replace(done, stats={**done.stats, "seed": answer.seed})
        pace = measured_pace(done.timing)
        if pace is not None:
            self._paces[self.models.model_name] = pace
        earlier = answer.continues
        answer.provenance.finish((earlier.content if earlier else "") + done.text)
        answer.live.finish(done.stats, done.timing)
        answer.finish_reason = done.finish_reason
        if earlier is not None:
            if not answer.discarded:
                self._store_continued(earlier, answer, done)
        elif (
            answer.text or answer.provenance.tokens or done.finish_reason == INTERRUPTED
        ) and not answer.discarded:
            message = Message(
                id=None,
                session_id=answer.session_id,
                role="assistant",
                content=answer.text,
                finish_reason=done.finish_reason,
                model=self.models.model_name,
                stats={**done.stats, DRAFT_COUNT: answer.draft_count},
                timing=dict(done.timing),
                provenance=answer.provenance,
            )
            message.versions = [message.id]
            try:
                self.store.add_message(message)
                self.store.link(message, answer.parent_id)
                message.versions = next(
                    (
                        m.versions
                        for m in self.store.messages(answer.session_id)
                        if m.id == message.id
                    ),
                    [message.id],
                )
            except Exception as error:  # a full disk must not lose the on-screen answer
                self.problem.emit(
                    unsaved(
                        error, "Could not save the answer", "it stays on screen until you quit."
                    )
                )
            answer.message = message
            if self.session and self.session.id == answer.session_id:
                self.messages.append(message)
        self.answerFinished.emit(answer)
        self.busyChanged.emit(False)
        self.sessionsChanged.emit()

    def _store_continued(self, earlier: Message, answer: Answer, done: DoneEvent) -> None:
        """The continued answer's message, updated in place: text, tokens, whole numbers."""
        if done.tokens or done.finish_reason == INTERRUPTED:
            whole = DecodeStats.from_dict(earlier.stats, earlier.timing).merged(
                DecodeStats.from_dict(done.stats, done.timing)
            )
            earlier.content, earlier.provenance = answer.text, answer.provenance
            earlier.finish_reason = done.finish_reason
            earlier.stats, earlier.timing = whole.to_dict(), whole.timing_dict()
            earlier.stats[DRAFT_COUNT] = max(answer.draft_count, draft_count_of(earlier.stats))
            if INTERRUPTED in done.stats:
                earlier.stats[INTERRUPTED] = done.stats[INTERRUPTED]
            try:
                self.store.update_message(earlier)
            except Exception as error:  # a full disk must not lose the on-screen answer
                self.problem.emit(
                    unsaved(
                        error, "Could not save the answer", "it stays on screen until you quit."
                    )
                )
        self._restore(answer, earlier)

    def _restore(self, answer: Answer, message: Message) -> None:
        answer.message = message
        if self.session and self.session.id == answer.session_id:
            self.messages.append(message)

    def _fail(self, answer: Answer, message: str) -> None:
        """The engine or the server failed mid-answer: what it wrote is kept, marked
        interrupted with ``message`` (Retry and Continue are offered on it); an answer that
        had written nothing yet still gets its card, so the question does not hang."""
        answer.error = message
        if answer.discarded:
            answer.finish_reason = INTERRUPTED
            self.answerFinished.emit(answer)
            self.busyChanged.emit(False)
            return
        earlier = answer.continues
        written = answer.provenance.tokens[len(earlier.provenance.tokens) if earlier else 0 :]
        stats = {**answer.live.stats.to_dict(), INTERRUPTED: message}
        self._finish(
            answer,
            DoneEvent(
                INTERRUPTED,
                answer.text[len(earlier.content) if earlier else 0 :],
                [t.token for t in written],
                [t.from_draft for t in written],
                stats,
                answer.live.stats.timing_dict(),
            ),
        )
        self.problem.emit(message)

    # replay -------------------------------------------------------------------------------
    def inspectable_answers(self) -> list[tuple[int, str, dict]]:
        """(message id, label, stats) of the open chat's answers, for the inspector:
        '#2 · suffix · 2.4 tokens/pass' (the answer's number in the chat: each its own, also
        where a deleted question left two answers in a row)."""
        answers, number = [], 0
        for message in self.messages:
            if message.role == "assistant" and message.stats.get("passes"):  # one that ran
                number += 1
                label = (
                    f"#{number} · {message.stats.get('drafter', '?')} · "
                    f"{tokens_per_pass_of(message.stats):.1f} tokens/pass"
                )
                answers.append((message.id, label, message.stats))
        return answers

    def replay_grid(
        self, message_id: int, draft_counts: list[int], ngram_orders: list[int]
    ) -> asyncio.Task | None:
        """Replay an answer with every drafter at each draft count and n-gram order."""
        names = [n for n in self.models.local_service.drafters() if n != "default"]
        base = DraftSettings(ngram_min=self.settings.ngram_min)
        return self.replay(message_id, configurations(names, draft_counts, ngram_orders, base))

    def use_replayed_settings(self, result: ReplayOutcome) -> str:
        """Answer from now on with a replayed configuration, as it was replayed (a fixed
        draft count); returns what to tell the person."""
        order = result.ngram_order
        self.update_settings(
            replace(
                self.settings,
                drafter=result.drafter,
                draft_count=result.draft_count,
                ngram_order=order,
                ngram_min=min(self.settings.ngram_min, order),
                adaptive=False,
            )
        )
        return (
            f"Next answers use {result.drafter}, {result.draft_count} drafts (fixed), "
            f"n-gram order {order}"
        )

    def use_plain_decoding(self) -> str:
        """Answer from now on without drafting (the inspector found nothing faster)."""
        self.update_settings(replace(self.settings, drafter=PLAIN_DRAFTER))
        return f"Next answers use plain decoding (drafter {PLAIN_DRAFTER})"

    def replays_recorded(self, message: Message) -> bool:
        """Whether ``message`` is replayed from its recorded tokens on this machine: the
        engine cannot tokenize its prompt when it answered on a server or with another
        model than the one loaded."""
        return (
            not isinstance(self.models.service, LocalEngine)
            or (message.model or "") != self.models.model_name
        )

    def replay(self, message_id: int, configs) -> asyncio.Task | None:
        """Replay drafter settings ``configs`` over a stored answer of the open chat. Ends
        with ``replayFinished`` or, when it cannot run, ``replayFailed`` (never silence)."""
        index = next((i for i, m in enumerate(self.messages) if m.id == message_id), None)
        if index is None or self.messages[index].provenance is None:
            self.replayFailed.emit(message_id, "That answer is not in the open chat any more.")
            return None
        message = self.messages[index]
        tokens = [t.token for t in message.provenance.tokens]
        ended = message.finish_reason == "stop"
        greedy = bool(message.stats.get("greedy", True))
        if self.replays_recorded(message):
            earlier = [
                t.token
                for m in self.messages[:index]
                if m.role == "assistant"
                and m.provenance is not None
                and (m.model or "") == (message.model or "")
                for t in m.provenance.tokens
            ]
            return self._spawn(
                self._replay_recorded(message_id, earlier, tokens, ended, configs, greedy)
            )
        turns = chat_turns(self.messages[:index])
        try:
            stream = self.models.service.replay(
                self._chat_settings().request(turns), tokens, ended, configs, greedy
            )
        except Exception as error:
            log.exception("replay failed")
            self.replayFailed.emit(message_id, f"Replay failed: {error}")
            return None
        return self._spawn(self._consume_replay(message_id, stream))

    async def _replay_recorded(
        self, message_id: int, earlier, tokens, ended, configs, greedy
    ) -> None:
        try:  # a worker thread: long answers times many settings take a while
            results = await asyncio.get_running_loop().run_in_executor(
                None, replay_recorded, earlier, tokens, ended, configs, greedy
            )
        except Exception as error:
            log.exception("replay failed")
            self.replayFailed.emit(message_id, f"Replay failed: {error}")
            return
        self.replayFinished.emit(message_id, results)

    async def _consume_replay(self, message_id: int, stream) -> None:
        results, failure = None, ""
        try:
            async for event in stream:
                if isinstance(event, ReplayEvent):
                    results = event.results
                elif isinstance(event, ErrorEvent):
                    failure = f"Replay failed: {event.message}"
        except Exception as error:
            log.exception("replay failed")
            failure = f"Replay failed: {error}"
        if failure or results is None:
            self.replayFailed.emit(
                message_id, failure or "The engine stopped before the replay finished."
            )
        else:
            self.replayFinished.emit(message_id, results)

    async def wait_idle(self) -> None:
        """Wait for every running answer and load (for tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
