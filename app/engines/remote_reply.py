"""What a Draftless server sends, checked before any of it reaches the app.

A server is another program, perhaps on another machine: every piece of its reply is
untrusted input. ``Lines`` cuts the byte stream into lines no longer than a bound;
``json_value`` reads one JSON value (a nesting bomb is a bad reply, not a crash);
``checked_pass``, ``checked_final`` and ``checked_model`` take a chunk's fields and return
them with the types, sizes and ranges the app relies on, or raise ``BadReply`` saying which
field was wrong and how, in words the app can show.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from engine.stats import stored_figures
from engine.tokens import is_token_id

# One chunk is one forward pass: its tokens are at most the longest draft the engine sends
# (DRAFT_COUNT_RANGE's 64) plus the target's own token, so 4,096 is 60 times what a pass can
# give. The reported attack sent 2 million tokens in one chunk.
MAX_TOKENS_PER_CHUNK = 4096
# A token's text is a few characters; the longest pieces in real vocabularies (runs of
# spaces or dashes) are under 256. 4,096 leaves room for a byte-level tokenizer's oddities.
MAX_TOKEN_TEXT = 4096
# The last chunk carries the answer's statistics, with one entry per pass in ``pass_sizes``:
# a 32,768-token answer (MAX_TOKENS_RANGE's top) of single-token passes is about 200 KB of
# JSON. 8 MB is 40 times that, and a bound on what one line can make the app hold.
MAX_LINE_BYTES = 8 << 20
# When the server does not name its vocabulary: four times the largest in use (Gemma 3's
# 262,144 ids), so a real id always passes and -1, 10**30 or "x" never do.
VOCABULARY_CEILING = 1 << 20
# Names the app shows or keeps (a model id, a drafter, a chat id, a finish reason)
MAX_NAME = 256
MAX_INDEX = 1 << 31  # pass indices and draft counts: far past any answer, inside SQLite's int


class BadReply(ValueError):
    """The server sent something the app cannot use; the text says what."""


class Lines:
    """The lines of a byte stream read by ``read()`` (None at its end), without their line
    ends; a line longer than ``max_bytes`` is refused before more of it is held."""

    def __init__(self, read, max_bytes: int = MAX_LINE_BYTES):
        self._read = read
        self.max_bytes = max_bytes
        self._pending = bytearray()
        self._scanned = 0  # no line end before this offset of ``_pending``
        self._ended = False

    async def next(self) -> bytes | None:
        while (end := self._pending.find(b"\n", self._scanned)) < 0:
            self._scanned = len(self._pending)
            if self._scanned > self.max_bytes:
                raise BadReply(f"a line longer than {self.max_bytes // (1 << 20)} MB")
            if self._ended:
                line, self._pending = bytes(self._pending), bytearray()
                return line or None
            piece = await self._read()
            if piece is None:
                self._ended = True
            else:
                self._pending += piece
        line = bytes(self._pending[:end]).rstrip(b"\r")
        del self._pending[: end + 1]
        self._scanned = 0
        return line


def json_value(data: bytes) -> object:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise BadReply(f"not JSON ({type(error).__name__})") from None


def shown(value: object) -> str:
    """A value as it can be quoted in a message: at most 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class CheckedPass:
    """One chunk's ``draftless`` provenance (see the server's README section)."""

    index: int
    tokens: list[int]
    texts: list[str]
    from_draft: list[bool]
    draft_position: list[int | None]
    drafter: str
    drafted: int
    accepted: int
    seconds: float
    tokens_per_pass: float
    thinking: bool


def checked_pass(provenance: object, vocabulary: int) -> CheckedPass:
    if not isinstance(provenance, dict):
        raise BadReply(f"its pass figures are {shown(provenance)}, not an object")
    index = count(provenance.get("pass"), "the pass index")
    where = f"pass {index}"
    tokens = sized_list(provenance.get("tokens"), f"the tokens of {where}")
    for position, token in enumerate(tokens):
        if not is_token_id(token, vocabulary):
            raise BadReply(
                f"token {position} of {where} is {shown(token)}, not a token id of its model "
                f"(0 to {vocabulary - 1:,})"
            )
    texts = sized_list(provenance.get("texts"), f"the texts of {where}", len(tokens))
    for text in texts:
        if not isinstance(text, str) or len(text) > MAX_TOKEN_TEXT:
            raise BadReply(f"a token text of {where} is {shown(text)}, not a short string")
    flags = sized_list(provenance.get("from_draft"), f"the draft flags of {where}", len(tokens))
    if not all(isinstance(flag, bool) for flag in flags):
        raise BadReply(f"the draft flags of {where} are not all true or false")
    positions = sized_list(
        provenance.get("draft_position"), f"the draft positions of {where}", len(tokens)
    )
    for position in positions:
        if position is not None:
            count(position, f"a draft position of {where}")
    drafted = count(provenance.get("drafted"), f"the drafted count of {where}")
    accepted = count(provenance.get("accepted"), f"the accepted count of {where}")
    if accepted > drafted:
        raise BadReply(f"{where} accepted {accepted:,} of {drafted:,} drafted tokens")
    thinking = provenance.get("thinking")
    if thinking not in (None, True, False):
        raise BadReply(f"the thinking flag of {where} is {shown(thinking)}")
    return CheckedPass(
        index,
        list(tokens),
        list(texts),
        list(flags),
        list(positions),
        name(provenance.get("drafter"), f"the drafter of {where}", allow_none=True) or "",
        drafted,
        accepted,
        number(provenance.get("seconds"), f"the seconds of {where}"),
        number(provenance.get("tokens_per_pass"), f"the tokens per pass of {where}"),
        thinking is True,
    )


def checked_final(usage: object, fallback_reason: object) -> tuple[str, dict, dict]:
    """The finish reason, statistics and timing of the usage chunk (figures of the wrong
    kind are left out, as for a stored answer: ``engine.stats.stored_figures``)."""
    if not isinstance(usage, dict):
        raise BadReply(f"its usage is {shown(usage)}, not an object")
    final = usage.get("draftless") or {}
    if not isinstance(final, dict):
        raise BadReply(f"its statistics are {shown(final)}, not an object")
    final = dict(final)
    timing = final.pop("timing", {})
    reason = final.pop("finish_reason", None) or fallback_reason
    stats, timing = stored_figures(final, timing)
    return name(reason, "the finish reason"), stats, timing


def checked_model(payload: object) -> tuple[str, str, int]:
    """The served model's id, its speculation line and its vocabulary (the ceiling when the
    card does not say) from ``GET /v1/models``; BadReply when it serves none."""
    models = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(models, list):
        raise BadReply("its model list is not a list")
    if not models:
        raise BadReply("it serves no model")
    card = models[0] if isinstance(models[0], dict) else {}
    extra = card.get("draftless") if isinstance(card.get("draftless"), dict) else {}
    speculation = name(extra.get("speculation", "on"), "the model's speculation")
    vocabulary = extra.get("vocab_size")
    if not is_token_id(vocabulary, MAX_INDEX) or vocabulary == 0:
        vocabulary = VOCABULARY_CEILING
    return name(card.get("id"), "the model's name"), speculation, vocabulary


def checked_chat_id(value: object) -> str | None:
    return None if value is None else name(value, "the chat id")


def sized_list(value: object, what: str, length: int | None = None) -> list:
    if not isinstance(value, list):
        raise BadReply(f"{what} are {shown(value)}, not a list")
    if len(value) > MAX_TOKENS_PER_CHUNK:
        raise BadReply(f"{what} are {len(value):,}, more than one pass can give")
    if length is not None and len(value) != length:
        raise BadReply(f"{what} are {len(value):,} for {length:,} tokens")
    return value


def count(value: object, what: str) -> int:
    if not is_token_id(value, MAX_INDEX):
        raise BadReply(f"{what} is {shown(value)}, not a count")
    return int(value)


def number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadReply(f"{what} is {shown(value)}, not a number")
    try:
        figure = float(value)
    except OverflowError:  # an integer past any float
        figure = math.inf
    if not math.isfinite(figure) or figure < 0:
        raise BadReply(f"{what} is {shown(value)}")
    return figure


def name(value: object, what: str, allow_none: bool = False) -> str | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME or not value.isprintable():
        raise BadReply(f"{what} is {shown(value)}, not a name")
    return value
