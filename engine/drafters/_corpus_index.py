"""A suffix array over the corpus of public answers (REST's datastore): the longest match of
the history's last tokens anywhere in the corpus, and what most often followed it.

The corpus's token ids (each answer followed by ``END``) are kept as one ``bytes`` of
fixed-width big-endian ids (``width`` bytes each), so that comparing two byte strings
compares their token sequences in order; the suffix array holds every position, sorted by
the ``DEPTH`` tokens from it (``suffix_array``; ties beyond that in position order). A
pattern of up to ``DEPTH`` tokens then has its occurrences in one range of the array,
found by bisection (``suffix_range``), and the range of the pattern plus one more token is
a sub-range of it: the search narrows as the match extends (``continue_match``).

The file (``save``, ``load``: a NumPy ``.npz`` archive, no pickles) holds ``format``,
``tokenizer`` (``static_ngrams.tokenizer_digest``), ``vocab_size``, ``width``, ``text``
(uint8) and ``order`` (int32); a file that breaks any of that is refused with a
``CorpusIndexError``: every position is checked to be in the text exactly once and every id
to be below the vocabulary size (or ``END``), so nothing it holds reaches the model
unchecked. How well it is sorted is not checked (a badly sorted file drafts badly, never
wrongly: every draft is verified).
"""

from __future__ import annotations

import io
import zipfile
from bisect import bisect_left, bisect_right
from pathlib import Path

import numpy as np

from ..errors import EngineError
from ..untrusted import read_regular_file, write_atomic

FORMAT = "draftless-corpus-index-1"
# Suffixes are sorted by this many tokens (prefix doubling: 5 sorting rounds for 16-bit ids). Matches and
# the context a continuation is counted after are capped one below it; on the tuning
# corpus, 31 tokens already match only where an answer repeats a stretch of another.
DEPTH = 32
MAX_TOKENS = 16 << 20  # the embedded tokenizer makes 4.28M tokens of the shipped corpus
MAX_FILE_BYTES = 160 << 20  # 7 bytes a token at most (3-byte ids and int32 positions)
# The next tokens after a range of more occurrences than this are counted on this many of
# them, evenly spaced over the range (sorted by what follows, so each follower keeps about
# its share); the share of the one chosen is then counted exactly by bisection
SAMPLE = 256


class CorpusIndexError(EngineError):
    """A corpus index file that cannot be used (``problem``: what is wrong)."""

    def __init__(self, path, problem: str):
        super().__init__(f"The corpus index {path} is not usable ({problem}).")
        self.problem = problem


def id_width(vocab_size: int) -> int:
    """Bytes an id takes: room for the vocabulary and ``END`` (``vocab_size`` itself)."""
    return 2 if vocab_size < 0xFFFF else 3


def encode(tokens, width: int) -> bytes:
    """``tokens`` as big-endian ids of ``width`` bytes each (byte order = token order)."""
    big = np.asarray(tokens, dtype=">u4").view(np.uint8).reshape(-1, 4)
    return big[:, 4 - width :].tobytes()


def suffix_array(tokens: np.ndarray, depth: int = DEPTH) -> np.ndarray:
    """Every position of ``tokens`` (non-negative ids), sorted by the ``depth`` tokens from
    it (a suffix shorter than that sorts before its extensions; ties in position order), by
    prefix doubling: each round sorts by (rank of the first h tokens, rank of the next h).

    >>> suffix_array(np.array([2, 1, 2, 1, 3])).tolist()  # 1 2 1 3 < 1 3 < 2 1 2 .. < 2 1 3 < 3
    [1, 3, 0, 2, 4]
    """
    order = rank = None
    for order, rank in doubling_rounds(tokens, depth):
        pass
    return order if order is not None else np.empty(0, np.int32)


def doubling_rounds(tokens: np.ndarray, depth: int = DEPTH):
    """``suffix_array``'s rounds: yields (order, rank) after each sort. A suffix's rank is 1 +
    where its group (the suffixes that share its first h tokens) starts in ``order``; each
    round sorts only the groups of two or more, by (rank, rank h tokens on), in their slots."""
    n = len(tokens)
    values = np.asarray(tokens, np.int64) + 1  # 0: past the end
    bits = int(values.max()).bit_length() if n else 1
    h = max(1, min(depth, 63 // bits))  # the first sort: by as many tokens as pack in 63 bits
    packed = np.zeros(n, np.int64)
    for j in range(min(h, n)):
        packed[: n - j] |= values[j:] << (bits * (h - 1 - j))
    del values
    order = np.argsort(packed, kind="stable").astype(np.int32)
    packed = packed[order]
    starts = np.r_[True, packed[1:] != packed[:-1]] if n else np.zeros(0, np.bool_)
    del packed
    rank = np.empty(n, np.int32)
    rank[order] = np.maximum.accumulate(np.where(starts, np.arange(n), 0)) + 1
    yield order, rank
    while h < depth:
        tied = ~(starts & np.r_[starts[1:], True])  # slots of groups of two or more
        slots = np.flatnonzero(tied)
        if not len(slots):
            break
        members = order[slots]
        after = np.zeros(len(members), np.int64)  # 0: the suffix ends within h tokens
        inside = members + h < n
        after[inside] = rank[members[inside] + h]
        key = rank[members].astype(np.int64) * (n + 1) + after
        by_key = np.argsort(key, kind="stable")
        key, members = key[by_key], members[by_key]
        fresh = np.r_[True, key[1:] != key[:-1]]
        order[slots], starts[slots] = members, fresh
        rank[members] = np.maximum.accumulate(np.where(fresh, slots, 0)) + 1
        h *= 2
        yield order, rank


def suffix_range(text: bytes, order, width: int, pattern: bytes, lo: int, hi: int):
    """(first, end): the positions of ``order[lo:hi]`` (sorted suffixes of ``text``, each
    id ``width`` bytes) whose suffix begins with ``pattern`` (encoded ids) are
    ``order[first:end]``; first == end where none does.

    >>> text = encode([2, 1, 2, 1, 3], 2)
    >>> suffix_range(text, [1, 3, 0, 2, 4], 2, encode([2, 1], 2), 0, 5)  # at 0 and 2
    (2, 4)
    """
    size = len(pattern)

    def key(p):
        return text[p * width : p * width + size]

    first = bisect_left(order, pattern, lo, hi, key=key)
    return first, bisect_right(order, pattern, first, hi, key=key)


def longest_match(text: bytes, order, width: int, tail: list[int], longest: int, buckets=None):
    """(L, first, end): the most tokens at the end of ``tail`` (up to ``longest``) that occur
    in ``text``, and their range of ``order``; L is 0 (the whole range) when not even the
    last token does. A suffix that occurs has every shorter one occur: bisection on L.
    ``buckets[t]``: where the suffixes beginning with id t start in ``order`` (a shortcut).

    >>> longest_match(encode([2, 1, 2, 1, 3], 2), [1, 3, 0, 2, 4], 2, [5, 1, 2, 1], 8)
    (3, 0, 1)
    """
    found = (0, 0, len(order))
    low, high = 1, min(longest, len(tail))
    encoded = encode(tail[-high:], width) if high else b""
    while low <= high:
        middle = (low + high) // 2
        lo, hi = 0, len(order)
        if buckets is not None:
            lo, hi = buckets[tail[-middle]], buckets[tail[-middle] + 1]
        first, end = suffix_range(text, order, width, encoded[-middle * width :], lo, hi)
        if first < end:
            found, low = (middle, first, end), middle + 1
        else:
            high = middle - 1
    return found


def usual_next(tokens: np.ndarray, order: np.ndarray, offset: int, first: int, end: int):
    """(token, first, end): the most frequent of the tokens ``offset`` after the positions
    ``order[first:end]`` (the larger id among equal counts), and the sub-range of those it
    follows, where the range holds ``SAMPLE`` or fewer (sorted by what follows, so the
    sub-range is where it sits); where it holds more, the token counted on ``SAMPLE`` of
    them evenly spaced, and no sub-range (-1, -1: the caller bisects).

    >>> usual_next(np.array([2, 1, 2, 1, 3]), np.array([1, 3, 0, 2, 4]), 1, 0, 2)  # 1 2, 1 3
    (3, 1, 2)
    """
    step = -(-(end - first) // SAMPLE)
    after = tokens[order[first:end:step] + offset]
    if after[0] == after[-1]:  # sorted by what follows: one follower (of those counted)
        token = int(after[0])
    else:
        ids, counts = np.unique(after, return_counts=True)
        token = int(ids[len(counts) - 1 - np.argmax(counts[::-1])])
    if step > 1:
        return token, -1, -1
    return (
        token,
        first + int(np.searchsorted(after, token)),
        first + int(np.searchsorted(after, token, "right")),
    )


class CorpusIndex:
    """The corpus's ids and suffix array in memory (``draft``)."""

    def __init__(self, tokens: np.ndarray, order: np.ndarray, vocab_size: int, tokenizer: str = ""):
        self.vocab_size, self.tokenizer = vocab_size, tokenizer
        self.end = vocab_size  # END: after every answer
        self.width = id_width(vocab_size)
        self.text = encode(tokens, self.width)
        # the ids again, to gather followers with NumPy: a view of the text where ids take 2
        # bytes (no copy), else int32
        self.tokens = (
            np.frombuffer(self.text, ">u2") if self.width == 2 else np.asarray(tokens, np.int32)
        )
        self.order = np.ascontiguousarray(order, dtype=np.int32)
        self._order = memoryview(self.order).cast("B").cast("i")  # Python ints when indexed
        # where the suffixes beginning with each id start in ``order`` (ids and END)
        counts = np.bincount(self.tokens, minlength=vocab_size + 1)
        self._buckets = memoryview(np.r_[0, np.cumsum(counts)].astype(np.int32)).cast("B").cast("i")

    @classmethod
    def build(cls, answers, vocab_size: int, tokenizer: str = "") -> "CorpusIndex":
        """The index of ``answers`` (token id lists) in one go (tests, small corpora)."""
        tokens = np.array([t for answer in answers for t in (*answer, vocab_size)], np.int32)
        return cls(tokens, suffix_array(tokens), vocab_size, tokenizer)

    @property
    def nbytes(self) -> int:
        extra = 0 if self.tokens.base is not None else self.tokens.nbytes
        return len(self.text) + extra + self.order.nbytes

    def match(self, history: list[int]) -> tuple[int, int, int]:
        """(L, first, end) of ``longest_match`` for the end of ``history``."""
        tail = [t if 0 <= t < self.vocab_size else self.end for t in history[-(DEPTH - 1) :]]
        if tail and tail[-1] == self.end:  # nothing follows an id the corpus cannot hold
            return 0, 0, 0
        return longest_match(self.text, self._order, self.width, tail, DEPTH - 1, self._buckets)

    def draft(self, history: list[int], k: int, min_match: int, min_prob: float):
        """(match length, row, [(share, occurrences)] per token of it): up to ``k`` tokens,
        each the usual follower of the longest match of everything before it (at least
        ``min_match`` tokens), while the product of their shares is ``min_prob`` or more."""
        length, first, end = self.match(history)
        if length < min_match:
            return length, [], []
        matched, context = length, list(history[-length:])
        row, shares, prob = [], [], 1.0
        while len(row) < k:
            if end - first == 1:  # one occurrence: its continuation, as far as it goes
                start = int(self.order[first]) + len(context)
                after = self.tokens[start : start + k - len(row)].tolist()
                after = after[: after.index(self.end)] if self.end in after else after
                row += after
                shares += [(1.0, 1)] * len(after)
                break
            nxt, *sub = usual_next(self.tokens, self.order, len(context), first, end)
            if nxt == self.end:
                break
            if sub[0] < 0:
                pattern = encode([*context, nxt], self.width)
                sub = suffix_range(self.text, self._order, self.width, pattern, first, end)
            share = (sub[1] - sub[0]) / (end - first)
            prob *= share
            if prob < min_prob:
                break
            row.append(nxt)
            shares.append((share, end - first))
            context.append(nxt)
            first, end = sub
            if len(context) >= DEPTH:  # sorted no deeper: the range of the last DEPTH - 1
                length, first, end = self.match(context)
                context = context[-length:] if length else []
                if length < min_match:
                    break
        return matched, row, shares

    def save(self, path) -> None:
        arrays = {
            "format": np.array(FORMAT),
            "tokenizer": np.array(self.tokenizer),
            "vocab_size": np.array(self.vocab_size, dtype=np.int64),
            "tokens": self.tokens.astype(np.uint16 if self.width == 2 else np.uint32),
            "order": self.order,
        }
        with io.BytesIO() as buffer:
            np.savez(buffer, **arrays)  # uncompressed: positions do not compress
            write_atomic(path, buffer.getvalue())

    @classmethod
    def load(cls, path) -> "CorpusIndex":
        path = Path(path)
        try:
            data = read_regular_file(path, MAX_FILE_BYTES)
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
            if str(arrays.get("format", "")) != FORMAT:
                raise CorpusIndexError(path, f"it is not a {FORMAT} file")
            vocab = int(arrays["vocab_size"])
            tokens, order = np.asarray(arrays["tokens"]), np.asarray(arrays["order"])
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
            raise CorpusIndexError(path, f"it cannot be read: {error}") from None
        checked(path, tokens, order, vocab)
        return cls(tokens, order, vocab, str(arrays.get("tokenizer", "")))


def checked(path, tokens: np.ndarray, order: np.ndarray, vocab: int) -> None:
    """CorpusIndexError unless ``tokens`` are ids below ``vocab`` or END (``vocab``), ending
    with END, and ``order`` holds each of their positions once."""
    if not 0 < vocab < 1 << 21:
        raise CorpusIndexError(path, f"its vocabulary size {vocab} is out of range")
    if tokens.ndim != 1 or order.shape != tokens.shape or len(tokens) > MAX_TOKENS:
        raise CorpusIndexError(path, "its arrays differ in shape or are too long")
    if not (np.issubdtype(tokens.dtype, np.integer) and np.issubdtype(order.dtype, np.integer)):
        raise CorpusIndexError(path, "its arrays are not integers")
    if len(tokens) and (tokens.min() < 0 or tokens.max() > vocab or tokens[-1] != vocab):
        raise CorpusIndexError(path, f"its ids are not all below {vocab} and END-terminated")
    if len(order) and (order.min() < 0 or order.max() >= len(tokens)):
        raise CorpusIndexError(path, "its suffix array points outside the text")
    seen = np.zeros(len(tokens), np.bool_)
    seen[order] = True
    if not seen.all():
        raise CorpusIndexError(path, "its suffix array misses positions")
