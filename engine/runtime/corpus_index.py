"""The corpus index of a model's tokenizer (``suffix-static``'s ``source: index``; the index
itself: ``drafters/_corpus_index.py``), built from the shipped corpus of public answers
(``static_ngrams.CORPUS_PATH``, the tuning split only) by the static table's rules: per
tokenizer digest, in short steps (``CorpusIndexBuild.step``: tokenize a chunk of the
corpus, or one sorting round) between requests or inline with progress, and cached in the
cache dir under the tokenizer's digest, the vocabulary size and the corpus's digest. A
cached file that cannot be read is kept aside, named once, and built again.

None is shipped: for the embedded tokenizer it holds 4.28M positions (int32) and ids
(2 bytes each), 25.7 MB, which does not compress (a permutation); the corpus it is built
from is 3.6 MB. Built here on the shared 2-core CPU in about 20 s (tokenizing about 9 s,
5 sorting rounds of about 2 s each); read from the cache in about 0.5 s.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..drafters._corpus_index import (
    DEPTH,
    MAX_TOKENS,
    CorpusIndex,
    CorpusIndexError,
    doubling_rounds,
)
from ..paths import cache_dir
from .static_ngrams import (
    CORPUS_PATH,
    INPUT_CHUNK,
    corpus_answers,
    corpus_digest,
    encode_plain,
    read_corpus,
    StaticTableBuild,
    tokenizer_digest,
)
from ..tokens import output_size

log = logging.getLogger(__name__)

VERSION = 1  # the cache file's name changes with the index's format
ROUNDS = DEPTH.bit_length()  # prefix doubling: a first sort, then one per doubling


def corpus_index_cache_path(tokenizer: str, vocab_size: int, corpus: str) -> Path:
    name = f"tokenizer-{tokenizer}-{vocab_size}-{corpus}-v{VERSION}.npz"
    return cache_dir() / "corpus-index" / name


class CorpusIndexBuild(StaticTableBuild):
    """The corpus index of a model's tokenizer: its cache file, or built from the corpus in
    short ``step``s; ``table`` once finished (None when it cannot be had: said once)."""

    what = "corpus index"
    refused = CorpusIndexError

    def __init__(self, loaded, corpus=None):
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        self.name = str(loaded.name)
        self.vocab_size = output_size(loaded.model)
        self.corpus = Path(corpus or CORPUS_PATH)
        self.table: CorpusIndex | None = None
        self.unavailable = False
        self.done = self.total = 0
        self._steps: Iterator | None = None
        self.digest = self.tokenizer_digest = "none"
        problem = None
        try:
            self.tokenizer_digest = tokenizer_digest(loaded.path)
            self.digest = corpus_digest(self.corpus)
        except (OSError, ValueError) as error:
            problem = f"its tokenizer or the corpus cannot be read ({error})"
        if problem is None and self.vocab_size >= 1 << 21:
            problem = f"its vocabulary of {self.vocab_size:,} tokens is too large"
        self.path = corpus_index_cache_path(self.tokenizer_digest, self.vocab_size, self.digest)
        if problem is not None:
            self._give_up(problem)
            return
        self.total = -(-self.corpus.stat().st_size // INPUT_CHUNK) + ROUNDS + 3

    @staticmethod
    def _load(path):
        return CorpusIndex.load(path)

    def _build(self) -> Iterator[None]:
        data = read_corpus(self.corpus)
        if hashlib.sha256(data).hexdigest()[:16] != self.digest:
            raise ValueError("it changed while the index was being built")
        end, pieces, size = self.vocab_size, [], 0
        for answer in corpus_answers(data):
            if answer is None:
                yield
                continue
            ids = np.asarray(encode_plain(self.tokenizer, answer), np.int64)
            ids[(ids < 0) | (ids >= end)] = end  # an id the model cannot make ends a match
            pieces.append(np.append(ids, end).astype(np.int32))
            size += len(pieces[-1])
            if size > MAX_TOKENS:
                raise ValueError(f"it makes more than {MAX_TOKENS:,} tokens")
        tokens = np.concatenate(pieces) if pieces else np.array([end], np.int32)
        del pieces
        order = None
        for order, _ in doubling_rounds(tokens, DEPTH):
            yield
        index = CorpusIndex(tokens, order, self.vocab_size, self.tokenizer_digest)
        yield
        try:
            index.save(self.path)
        except OSError as error:
            log.warning("Could not cache the corpus index in %s: %s", self.path, error)
        self.use(index)
