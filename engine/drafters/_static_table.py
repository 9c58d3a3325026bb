"""A static n-gram table built once from public answers (llama.cpp's lookup static cache,
REST's datastore idea): for each context of 2 or 3 tokens, the token that most often
followed it and its share of the context's followers.

The file is a NumPy ``.npz`` archive (no pickles), shipped for the embedded model's tokenizer
(written by ``python -m engine.bench.static_table``) or built for another tokenizer and cached
(``engine/static_ngrams.py``): ``format``, ``model`` (the model name it was tokenized for),
``tokenizer`` (the digest of the tokenizer it was tokenized with,
``static_ngrams.tokenizer_digest``: how a shipped table is found; a file without it loads,
and no tokenizer finds it), ``vocab_size``, and per context order n in 2..3: ``keys{n}``
(the context's token ids packed ``ID_BITS`` bits each, sorted, unique), ``next{n}`` (the
follower) and ``share{n}`` (its share of the context's followers, in 255ths). A file that
cannot be read, or that breaks any of that, is refused with a ``StaticTableError`` naming the
problem; token ids outside the vocabulary are refused as well, so nothing it holds reaches
the model unchecked.
"""

from __future__ import annotations

import io
from array import array
from bisect import bisect_left
import zipfile
from pathlib import Path

import numpy as np

from ..errors import EngineError
from ..untrusted import read_regular_file, write_atomic

ORDERS = (3, 2)  # context lengths, longest first: the longest known context drafts
# Token ids are packed this many bits each, 3 to a uint64 key (63 bits): vocabularies up to
# 2,097,152 tokens (Llama 3: 128,256; Qwen 2.5: 151,936; Gemma 3: 262,208)
ID_BITS = 21
MAX_VOCAB = 1 << ID_BITS
SHARE_SCALE = 255  # shares are stored in 255ths
FORMAT = "draftless-static-ngrams-2"  # version 1 packed 16 bits an id
MAX_FILE_BYTES = 32 << 20  # a shipped table is a few MB; larger is not one of ours


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


class StaticTable:
    """The table in memory: per order, sorted packed contexts and their followers."""

    def __init__(self, model: str, vocab_size: int, orders: dict[int, tuple], tokenizer: str = ""):
        self.model = model
        self.tokenizer = tokenizer  # ``static_ngrams.tokenizer_digest``; "": not recorded
        self.vocab_size = vocab_size
        # order -> (packed contexts, sorted; followers; shares in 255ths), NumPy arrays
        self.orders = orders
        # per order, the packed contexts and follower << 8 | share, as machine-word arrays
        # searched by bisection: 2-4 microseconds a lookup here, and the shipped
        # 470k-context table loads in 0.08 s into about 13 MB (Python dicts: about 1
        # microsecond, but 62 MB; NumPy's searchsorted on one key: 40 to 500 microseconds)
        self._lookup = {
            n: (
                array("Q", keys.astype(np.uint64).tobytes()),
                array("q", ((nxt.astype(np.int64) << 8) | share).tobytes()),
            )
            for n, (keys, nxt, share) in orders.items()
        }

    def __len__(self) -> int:
        return sum(len(keys) for keys, _, _ in self.orders.values())

    def follower(self, context) -> tuple[int, float] | None:
        """(most frequent follower, its share) of the longest known context ending
        ``context``, or None."""
        for n in ORDERS:
            if len(context) >= n:
                keys, values = self._lookup[n]
                key = pack(context[-n:])
                index = bisect_left(keys, key)
                if index < len(keys) and keys[index] == key:
                    found = values[index]
                    return found >> 8, (found & 0xFF) / SHARE_SCALE
        return None

    def save(self, path) -> None:
        arrays = {"format": np.array(FORMAT), "model": np.array(self.model)}
        arrays["tokenizer"] = np.array(self.tokenizer)
        arrays["vocab_size"] = np.array(self.vocab_size, dtype=np.int64)
        for n, (keys, nxt, share) in self.orders.items():
            arrays[f"keys{n}"], arrays[f"next{n}"], arrays[f"share{n}"] = keys, nxt, share
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
        if str(arrays.get("format", "")) != FORMAT:
            raise StaticTableError(path, f"it is not a {FORMAT} file")
        return str(arrays.get("tokenizer", ""))

    @classmethod
    def _checked(cls, arrays: dict, path: Path) -> "StaticTable":
        def refuse(problem: str):
            raise StaticTableError(path, problem)

        if str(arrays.get("format", "")) != FORMAT:
            refuse(f"it is not a {FORMAT} file")
        vocab = int(arrays["vocab_size"])
        if not 0 < vocab <= MAX_VOCAB:
            refuse(f"its vocabulary size {vocab} is not between 1 and {MAX_VOCAB}")
        orders = {}
        for n in ORDERS:
            keys = np.asarray(arrays[f"keys{n}"], dtype=np.uint64)
            nxt = np.asarray(arrays[f"next{n}"])
            share = np.asarray(arrays[f"share{n}"])
            if not (
                keys.ndim == nxt.ndim == share.ndim == 1 and len(keys) == len(nxt) == len(share)
            ):
                refuse(f"its order-{n} arrays differ in shape")
            if len(keys) and (np.any(keys[1:] <= keys[:-1]) or int(keys[-1]) >> (n * ID_BITS)):
                refuse(f"its order-{n} contexts are not sorted, unique packed contexts")
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
            orders[n] = (keys, nxt.astype(np.uint32), share.astype(np.uint8))
        return cls(str(arrays["model"]), vocab, orders, str(arrays.get("tokenizer", "")))


def _arrays(path: Path, names=None) -> dict:
    """The arrays a table file holds (only those of ``names`` where given);
    StaticTableError when it cannot be read."""
    try:
        data = read_regular_file(path, MAX_FILE_BYTES)
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            return {n: archive[n] for n in archive.files if names is None or n in names}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        raise StaticTableError(path, f"it cannot be read: {error}") from None
