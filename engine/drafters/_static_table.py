"""A static n-gram table built once from public answers (llama.cpp's lookup static cache,
REST's datastore idea): for each context of 2 or 3 tokens, the tokens that most often
followed it, best first, and their shares of the context's followers.

The file is a NumPy ``.npz`` archive (no pickles), shipped for the embedded model's tokenizer
(written by ``python -m engine.bench.static_table``) or built for another tokenizer and cached
(``engine/runtime/static_ngrams.py``): ``format``, ``model`` (the model name it was tokenized for),
``tokenizer`` (the digest of the tokenizer it was tokenized with,
``static_ngrams.tokenizer_digest``: how a shipped table is found; a file without it loads,
and no tokenizer finds it), ``vocab_size``, and per context order n in 2..3: ``keys{n}``
(the context's token ids packed ``ID_BITS`` bits each, sorted, unique), ``count{n}`` (how
many followers each context has, 1 to ``FOLLOWERS``), ``next{n}`` and ``share{n}`` (the
followers of every context, one context after another, best first, and their shares of the
context's followers in 255ths, non-increasing within a context) and ``drafts{n}`` (per
context, whether its first follower took enough of it to draft: ``StaticTable.follower``).
A file that cannot be read, or that breaks any of that, is refused with a
``StaticTableError`` naming the problem; token ids outside the vocabulary are refused as
well, so nothing it holds reaches the model unchecked.
"""

from __future__ import annotations

import io
from bisect import bisect_left
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import EngineError
from ..untrusted import read_regular_file, write_atomic

ORDERS = (3, 2)  # context lengths, longest first: the longest known context drafts
# Token ids are packed this many bits each, 3 to a uint64 key (63 bits): vocabularies up to
# 2,097,152 tokens (Llama 3: 128,256; Qwen 2.5: 151,936; Gemma 3: 262,208)
ID_BITS = 21
MAX_VOCAB = 1 << ID_BITS
SHARE_SCALE = 255  # shares are stored in 255ths
# Followers kept per context: a drafting pass's tree has room for a few rows, and the 4th
# most frequent follower of a context seen 3+ times seldom takes 5% of it
FOLLOWERS = 4
# version 1 packed 16 bits an id; version 2 kept one follower per context
FORMAT = "draftless-static-ngrams-3"
FORMAT_FAMILY = "draftless-static-ngrams-"  # what every version's format starts with
MAX_FILE_BYTES = 32 << 20  # the shipped table is 4.8 MB; larger is not one of ours


class StaticTableError(EngineError):
    """A static table file that cannot be used; the message names the file and the problem
    (``problem``: the problem alone)."""

    def __init__(self, path, problem: str):
        super().__init__(
            f"The static n-gram table {path} is not usable ({problem}); rebuild it with "
            "python -m engine.bench.static_table."
        )
        self.problem = problem


def pack(context) -> int:
    key = 0
    for token in context:
        key = (key << ID_BITS) | int(token)
    return key


class Order(NamedTuple):
    """One context order's contexts and their followers, as NumPy arrays: context ``i``'s
    followers are ``followers[offsets[i]:offsets[i + 1]]``, best first."""

    keys: np.ndarray  # packed contexts, sorted, unique (uint64)
    offsets: np.ndarray  # len(keys) + 1, from 0 to len(followers), each step 1..FOLLOWERS
    followers: np.ndarray  # token ids (uint32)
    shares: np.ndarray  # each follower's share of its context's followers, in 255ths (uint8)
    drafts: np.ndarray  # per context: its first follower took the builder's min share (bool)

    @property
    def counts(self) -> np.ndarray:
        """How many followers each context has (uint8)."""
        return np.diff(self.offsets).astype(np.uint8)


class StaticTable:
    """The table in memory: per order, sorted packed contexts and their followers."""

    def __init__(self, model: str, vocab_size: int, orders: dict[int, Order], tokenizer: str = ""):
        self.model = model
        self.tokenizer = tokenizer  # ``static_ngrams.tokenizer_digest``; "": not recorded
        self.vocab_size = vocab_size
        self.orders = orders
        # per order, the packed contexts, their followers' offsets, follower << 8 | share and
        # the drafting flags, as memoryviews of the arrays (Python ints when indexed) searched
        # by bisection (Python dicts: faster by a microsecond, 5 times the memory; NumPy's
        # searchsorted on one key: 40 to 500 microseconds). Measured here on the shipped
        # table, a lookup of a known 3-token context (of an unknown one): follower() 1.3
        # (1.9) microseconds, followers() 1.7 (1.8); it loads in 0.1 s into about 21 MB
        self._lookup = {
            n: (
                _words(order.keys, np.uint64, "Q"),
                _words(order.offsets, np.int64, "q"),
                _words((order.followers.astype(np.uint32) << 8) | order.shares, np.uint32, "I"),
                _words(order.drafts, np.bool_, "?"),
            )
            for n, order in orders.items()
        }

    def __len__(self) -> int:
        return sum(len(order.keys) for order in self.orders.values())

    def follower(self, context) -> tuple[int, float] | None:
        """(most frequent follower, its share) of the longest context ending ``context``
        whose most frequent follower took the builder's min share (``drafts``), or None."""
        for n in ORDERS:
            index = self._index(n, context)
            if index >= 0:
                _, offsets, values, drafts = self._lookup[n]
                if drafts[index]:
                    value = values[offsets[index]]
                    return value >> 8, (value & 0xFF) / SHARE_SCALE
        return None

    def followers(self, context) -> list[tuple[int, float]]:
        """The followers of the longest known context ending ``context``, best first, each
        with its share (whatever the first one's share), or []."""
        for n in ORDERS:
            index = self._index(n, context)
            if index >= 0:
                _, offsets, values, _ = self._lookup[n]
                return [
                    (value >> 8, (value & 0xFF) / SHARE_SCALE)
                    for value in values[offsets[index] : offsets[index + 1]]
                ]
        return []

    def _index(self, n: int, context) -> int:
        """Where the context of the last ``n`` tokens of ``context`` is among the order-``n``
        contexts; -1 when it is not one (or ``context`` is shorter)."""
        keys = self._lookup[n][0]
        if len(context) < n:
            return -1
        key = pack(context[-n:])
        index = bisect_left(keys, key)
        return index if index < len(keys) and keys[index] == key else -1

    def save(self, path) -> None:
        arrays = {"format": np.array(FORMAT), "model": np.array(self.model)}
        arrays["tokenizer"] = np.array(self.tokenizer)
        arrays["vocab_size"] = np.array(self.vocab_size, dtype=np.int64)
        for n, order in self.orders.items():
            arrays[f"keys{n}"], arrays[f"count{n}"] = order.keys, order.counts
            arrays[f"next{n}"], arrays[f"share{n}"] = order.followers, order.shares
            arrays[f"drafts{n}"] = order.drafts
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        write_atomic(path, buffer.getvalue())

    @classmethod
    def load(cls, path) -> "StaticTable":
        path = Path(path)
        arrays = _arrays(path)
        try:
            return cls._checked(arrays, path)
        except StaticTableError:
            raise
        except (ValueError, KeyError, EngineError) as error:
            raise StaticTableError(path, f"it cannot be read: {error}") from None

    @staticmethod
    def tokenizer_of(path) -> str:
        """The tokenizer digest a table file records ("" when it records none), reading
        none of its other arrays; StaticTableError when it is not a table file."""
        path = Path(path)
        arrays = _arrays(path, ("format", "tokenizer"))
        _check_format(arrays, path)
        return str(arrays.get("tokenizer", ""))

    @classmethod
    def _checked(cls, arrays: dict, path: Path) -> "StaticTable":
        def refuse(problem: str):
            raise StaticTableError(path, problem)

        _check_format(arrays, path)
        vocab = int(arrays["vocab_size"])
        if not 0 < vocab <= MAX_VOCAB:
            refuse(f"its vocabulary size {vocab} is not between 1 and {MAX_VOCAB}")
        orders = {}
        for n in ORDERS:
            keys, counts, nxt, share, drafts = (
                np.asarray(arrays[f"{name}{n}"])
                for name in ("keys", "count", "next", "share", "drafts")
            )
            if not (
                keys.ndim == counts.ndim == nxt.ndim == share.ndim == drafts.ndim == 1
                and len(keys) == len(counts) == len(drafts)
                and len(nxt) == len(share)
            ):
                refuse(f"its order-{n} arrays differ in shape")
            if not all(np.issubdtype(a.dtype, np.integer) for a in (keys, counts, nxt, share)):
                refuse(f"its order-{n} contexts, counts, followers or shares are not integers")
            if drafts.dtype != np.bool_:
                refuse(f"its order-{n} drafting flags are not booleans")
            keys = keys.astype(np.uint64)
            if len(keys) and (np.any(keys[1:] <= keys[:-1]) or int(keys[-1]) >> (n * ID_BITS)):
                refuse(f"its order-{n} contexts are not sorted, unique packed contexts")
            if len(counts) and (int(counts.min()) < 1 or int(counts.max()) > FOLLOWERS):
                refuse(f"its order-{n} contexts do not each have 1 to {FOLLOWERS} followers")
            offsets = np.r_[0, np.cumsum(counts, dtype=np.int64)]
            if offsets[-1] != len(nxt):
                refuse(
                    f"its order-{n} follower counts add up to {offsets[-1]}, "
                    f"not to its {len(nxt)} followers"
                )
            contexts = [
                (keys >> np.uint64(ID_BITS * i)) & np.uint64((1 << ID_BITS) - 1) for i in range(n)
            ]
            if len(keys) and (
                any(int(c.max()) >= vocab for c in contexts)
                or int(nxt.min()) < 0
                or int(nxt.max()) >= vocab
            ):
                refuse(f"its order-{n} token ids are not all below its vocabulary size {vocab}")
            if len(share) and (int(share.min()) < 1 or int(share.max()) > SHARE_SCALE):
                refuse(f"its order-{n} shares are not between 1 and {SHARE_SCALE}")
            rises = np.flatnonzero(np.diff(share.astype(np.int64)) > 0) + 1
            if np.any(np.isin(rises, offsets, invert=True)):
                refuse(f"its order-{n} shares are not best first within each context")
            orders[n] = Order(keys, offsets, nxt.astype(np.uint32), share.astype(np.uint8), drafts)
        return cls(str(arrays["model"]), vocab, orders, str(arrays.get("tokenizer", "")))


def _words(values: np.ndarray, dtype, code: str) -> memoryview:
    """``values`` as ``dtype``, seen as a sequence of Python values of struct ``code``
    (its memory shared where it is already of that type)."""
    return memoryview(np.ascontiguousarray(values, dtype=dtype)).cast("B").cast(code)


def _check_format(arrays: dict, path: Path) -> None:
    """StaticTableError unless ``arrays`` are of a file of this ``FORMAT``."""
    found = str(arrays.get("format", ""))
    if found.startswith(FORMAT_FAMILY) and found != FORMAT:
        raise StaticTableError(
            path, f"it is a {found} file, a format this version no longer reads: {FORMAT}"
        )
    if found != FORMAT:
        raise StaticTableError(path, f"it is not a {FORMAT} file")


def _arrays(path: Path, names=None) -> dict:
    """The arrays a table file holds (only those of ``names`` where given);
    StaticTableError when it cannot be read."""
    try:
        data = read_regular_file(path, MAX_FILE_BYTES)
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            return {n: archive[n] for n in archive.files if names is None or n in names}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        raise StaticTableError(path, f"it cannot be read: {error}") from None
