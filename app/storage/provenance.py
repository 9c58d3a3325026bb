"""Which characters of an answer came from accepted draft tokens.

The engine streams one ``TokenEvent`` per token; its ``text`` is what the detokenizer
released for it, which may be empty (a multi-byte character still incomplete, a space
held back) and is then released together with a later token. So characters belong to
*groups* of tokens: a group is a run of tokens ending with the one whose event carried
text, and every character of that text belongs to every token of the group.

- one token, several characters: all of them carry that token's provenance;
- one character, several tokens (UTF-8 bytes): the character belongs to all of them,
  and counts as drafted only if every one of those tokens was an accepted draft.

Each token is stored with the character span of its group, which is all that is needed
to rebuild the highlighting when a session is reopened.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace

DRAFT, TARGET, MIXED = "draft", "target", "mixed"


@dataclass(frozen=True)
class TokenInfo:
    token: int
    from_draft: bool
    pass_index: int
    draft_position: int | None
    drafter: str
    start: int = 0  # the character span of the token's group in the answer
    end: int = 0

    def describe(self) -> str:
        where = (
            f"accepted draft token, position {self.draft_position + 1} in the draft"
            if self.from_draft and self.draft_position is not None
            else "accepted draft token"
            if self.from_draft
            else "the target model's own token"
        )
        return f"pass {self.pass_index + 1} · drafter {self.drafter} · {where}"


@dataclass(frozen=True)
class Run:
    start: int
    end: int
    kind: str  # DRAFT, TARGET or MIXED
    first_token: int  # index into Provenance.tokens
    last_token: int


class Provenance:
    """The answer's text and, for every character, the tokens that produced it."""

    def __init__(self):
        self.text = ""
        self.tokens: list[TokenInfo] = []
        self._pending_from = 0  # first token whose text has not been released yet
        self._runs: list[Run] = []
        self._run_starts: list[int] = []

    # building -----------------------------------------------------------------------------
    def add_token(
        self,
        token: int,
        text: str,
        from_draft: bool,
        pass_index: int,
        draft_position: int | None,
        drafter: str,
    ) -> None:
        self.tokens.append(TokenInfo(token, from_draft, pass_index, draft_position, drafter))
        if text:
            self._release(text)

    @classmethod
    def continuing(cls, earlier: "Provenance") -> "Provenance":
        """A copy of ``earlier`` that a continuation of the answer appends to (its passes
        numbered after ``earlier``'s)."""
        copy = cls()
        copy.text = earlier.text
        copy.tokens = list(earlier.tokens)
        copy._pending_from = len(copy.tokens)
        copy._runs = list(earlier._runs)
        copy._run_starts = list(earlier._run_starts)
        copy.pass_offset = 1 + max((t.pass_index for t in earlier.tokens), default=-1)
        copy.opened_thinking = earlier.opened_thinking  # its text still starts in the block
        return copy

    pass_offset = 0  # added to the pass index of tokens added by ``add_event``
    # the chat template opened a <think> block the text starts inside (the engine's
    # "prefill" ProgressEvent says so): thinking until "</think>" (``thinking.split``)
    opened_thinking = False

    def add_event(self, event) -> None:
        """Add an ``engine.events.TokenEvent``."""
        self.add_token(
            event.token,
            event.text,
            event.from_draft,
            event.pass_index + self.pass_offset,
            event.draft_position,
            event.drafter,
        )

    def finish(self, final_text: str) -> None:
        """The engine's final text: what it flushed after the last token joins the last group."""
        if final_text.startswith(self.text):
            rest = final_text[len(self.text) :]
            if rest:
                if self._pending_from < len(self.tokens):
                    self._release(rest)
                elif self._runs:  # nothing pending: the tail belongs to the last group
                    last = self._runs[-1]
                    self._pending_from = last.first_token
                    self._runs.pop()
                    self._run_starts.pop()
                    self.text = self.text[: last.start]
                    self._release(final_text[last.start :])
                else:
                    self.text = final_text

    def cut(self, length: int) -> None:
        """Keep the first ``length`` characters and the tokens that wrote them (a stop
        string ended the answer there); tokens whose text is still pending go."""
        kept = [
            replace(t, end=min(t.end, length))
            for t in self.tokens[: self._pending_from]
            if t.start < length
        ]
        cut = Provenance.from_tokens(self.text[:length], kept)
        self.text, self.tokens, self._pending_from = cut.text, cut.tokens, cut._pending_from
        self._runs, self._run_starts = cut._runs, cut._run_starts

    def _release(self, text: str) -> None:
        start, end = len(self.text), len(self.text) + len(text)
        first, last = self._pending_from, len(self.tokens) - 1
        if first > last:  # text without a token (cannot happen with engine events)
            self.text += text
            return
        for i in range(first, last + 1):
            info = self.tokens[i]
            self.tokens[i] = TokenInfo(
                info.token,
                info.from_draft,
                info.pass_index,
                info.draft_position,
                info.drafter,
                start,
                end,
            )
        self.text += text
        self._append_run(Run(start, end, self._kind(first, last), first, last))
        self._pending_from = last + 1

    def _kind(self, first: int, last: int) -> str:
        flags = {self.tokens[i].from_draft for i in range(first, last + 1)}
        return MIXED if len(flags) == 2 else DRAFT if True in flags else TARGET

    def _append_run(self, run: Run) -> None:
        self._runs.append(run)
        self._run_starts.append(run.start)

    # reading ------------------------------------------------------------------------------
    @property
    def runs(self) -> list[Run]:
        return list(self._runs)

    def run_at(self, index: int) -> Run | None:
        i = bisect_right(self._run_starts, index) - 1
        if i >= 0 and self._runs[i].start <= index < self._runs[i].end:
            return self._runs[i]
        return None

    def kind_at(self, index: int) -> str | None:
        run = self.run_at(index)
        return run.kind if run else None

    def tokens_at(self, index: int) -> list[TokenInfo]:
        run = self.run_at(index)
        return self.tokens[run.first_token : run.last_token + 1] if run else []

    def draft_mask(self) -> list[bool]:
        """For each character: did it come only from accepted draft tokens?"""
        mask = [False] * len(self.text)
        for run in self._runs:
            if run.kind == DRAFT:
                mask[run.start : run.end] = [True] * (run.end - run.start)
        return mask

    def draft_spans(self) -> list[tuple[int, int]]:
        """Maximal character spans that came from accepted drafts."""
        spans: list[tuple[int, int]] = []
        for run in self._runs:
            if run.kind != DRAFT:
                continue
            if spans and spans[-1][1] == run.start:
                spans[-1] = (spans[-1][0], run.end)
            else:
                spans.append((run.start, run.end))
        return spans

    def tooltip(self, index: int) -> str:
        tokens = self.tokens_at(index)
        if not tokens:
            return ""
        if len(tokens) == 1:
            return tokens[0].describe()
        lines = [f"{len(tokens)} tokens make these characters:"]
        lines += [f"• {t.describe()}" for t in tokens]
        return "\n".join(lines)

    def with_flags(self, from_draft: list[bool], drafter: str) -> "Provenance":
        """The same text and token groups with other accepted-draft flags (a replay's)."""
        if len(from_draft) != len(self.tokens):
            raise ValueError(f"{len(from_draft)} flags for {len(self.tokens)} tokens")
        tokens = [
            TokenInfo(t.token, flag, t.pass_index, None, drafter, t.start, t.end)
            for t, flag in zip(self.tokens, from_draft)
        ]
        return Provenance.from_tokens(self.text, tokens)

    # persistence --------------------------------------------------------------------------
    @classmethod
    def from_tokens(cls, text: str, tokens: list[TokenInfo]) -> "Provenance":
        """Rebuild from stored tokens (each with its group's span)."""
        provenance = cls()
        provenance.text = text
        provenance.tokens = list(tokens)
        i = 0
        while i < len(tokens):
            j = i
            while j + 1 < len(tokens) and (tokens[j + 1].start, tokens[j + 1].end) == (
                tokens[i].start,
                tokens[i].end,
            ):
                j += 1
            if tokens[i].end > tokens[i].start:
                provenance._append_run(
                    Run(tokens[i].start, tokens[i].end, provenance._kind(i, j), i, j)
                )
            i = j + 1
        provenance._pending_from = len(tokens)
        return provenance
