"""Model-derived n-gram tables (engine side: the only place they touch the model).

The bigram table: for every token x, the model's top next tokens given x alone
(``p_M(·|x)``, "The N-Grammys" section 4.1), a numpy int32 array [vocab, top], best first,
that the session hands to drafters that want it. It is computed once per model and cached
on disk ($DRAFTLESS_CACHE_DIR or the user cache dir):

- ``BigramBuild`` computes one table ``BUILD_ROWS`` tokens per ``step`` (one short forward
  pass each) and saves it when the last step is done;
- ``read_bigram_file`` reads a cached table only if its file is a plain ``.npy`` array of
  exactly int32 [vocab, top] with every id inside the vocabulary; any other file (an
  ``.npz``, a pickle, a truncated file, another dtype or shape) is kept aside, named once
  in a warning, and the table is computed again;
- ``ModelTables`` holds the tables one owner keeps in memory (the service's
  ``EngineMemory``) and the builds it owes. Its owner either builds a missing table inline
  in the request that asks (``inline``: nobody else waits, as for the command line's one
  answer or a benchmark), or in the background between requests (the service), while the
  requests go without the table.

"x alone" is fed after one neutral start token (``prefix``, the session passes the
tokenizer's newline token): a token at position 0 is the model's attention sink and its
prediction does not depend on it (measured on SmolLM2-135M: every x predicted '-', ',',
'\\n' first), while after one start token the table is the real bigram (' United' ->
' States', 'import' -> ' numpy', ' of' -> ' the').
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..paths import cache_dir
from .corpus_index import CorpusIndexBuild
from .static_ngrams import StaticTableBuild, encode_plain
from ..tokens import output_size
from ..untrusted import read_regular_file, set_aside, write_atomic
from ..policy.verify_cost import COST_LENGTHS

log = logging.getLogger(__name__)

BIGRAM_TOP = 32
BIGRAM_VERSION = 2
# Rows per step: each row is two tokens (the start token and x), so one step is one forward
# pass over as many tokens as the longest pass the verify-cost measurement times (96): a
# request that arrives during a background step waits no longer than such a pass (measured
# on SmolLM2-135M on the shared 2-core CPU: 0.2-0.7 s a step, 1,024 steps a table).
BUILD_ROWS = max(COST_LENGTHS) // 2
NPY_HEADER_BYTES = 4096  # a .npy header is 64-byte aligned and a few hundred bytes at most


def model_key(loaded) -> str:
    """A file-name-safe identity for a loaded model: name + config + weight files."""
    digest = hashlib.sha256()
    digest.update(str(loaded.name).encode())
    digest.update(json.dumps(loaded.config, sort_keys=True, default=str).encode())
    path = Path(loaded.path)
    for weights in sorted(path.glob("*.safetensors")):
        stat = weights.stat()
        digest.update(f"{weights.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(loaded.name))[:48]
    return f"{safe}-{digest.hexdigest()[:16]}"


def bigram_path(key: str, top: int = BIGRAM_TOP) -> Path:
    return cache_dir() / "bigram" / f"{key}-top{top}-v{BIGRAM_VERSION}.npy"


def start_prefix(tokenizer) -> list[int]:
    """The neutral start token the bigram is computed after (the newline token)."""
    ids = encode_plain(tokenizer, "\n")
    return ids[-1:] if ids else [0]


def read_npy(data: bytes, dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The array in ``data`` if it is a plain ``.npy`` file holding exactly ``dtype`` and
    ``shape`` (and nothing after it); ValueError saying what it is otherwise. Only the
    header is parsed before the checks: nothing in the file picks what is read."""
    stream = io.BytesIO(data)
    version = np.lib.format.read_magic(stream)  # ValueError: not a .npy file (an .npz, a pickle)
    if version == (1, 0):
        found, fortran, kind = np.lib.format.read_array_header_1_0(stream)
    elif version == (2, 0):
        found, fortran, kind = np.lib.format.read_array_header_2_0(stream)
    else:
        raise ValueError(f".npy format version {version} is not one this engine writes")
    if kind != np.dtype(dtype) or tuple(found) != tuple(shape) or fortran:
        order = ", Fortran order" if fortran else ""
        raise ValueError(f"it holds {kind} {tuple(found)}{order}, not {np.dtype(dtype)} {shape}")
    body = data[stream.tell() :]
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if len(body) != size:
        raise ValueError(f"it holds {len(body):,} bytes of data where {size:,} belong")
    return np.frombuffer(body, dtype=dtype).reshape(shape)


def read_bigram_file(path: Path, vocab: int, top: int) -> np.ndarray | None:
    """The cached table in ``path``, or None: missing, or not a good table (then kept
    aside and named once, to be computed again)."""
    if not path.exists():
        return None
    try:
        data = read_regular_file(path, vocab * top * 4 + NPY_HEADER_BYTES)
        table = read_npy(data, np.int32, (vocab, top))
        if table.size and not 0 <= table.min() <= table.max() < vocab:
            raise ValueError(f"token ids outside 0..{vocab - 1}")
    except (OSError, ValueError) as error:
        set_aside(path, "bigram table", error, "it will be computed again")
        return None
    return table


class BigramBuild:
    """One model's bigram table, computed a few rows per ``step``; ``table`` once finished."""

    what = "bigram table"

    def __init__(self, model, key: str, top: int = BIGRAM_TOP, prefix: list[int] | None = None):
        self.model = model
        self.total = output_size(model)  # rows: one per token of the vocabulary
        self.top = min(top, self.total)
        self.prefix = list(prefix or [])
        lead = "-p" + "_".join(map(str, self.prefix)) if self.prefix else ""
        self.path = bigram_path(key + lead, self.top)
        self.done = 0
        self.table: np.ndarray | None = None
        self._rows: np.ndarray | None = None

    @property
    def finished(self) -> bool:
        return self.table is not None

    def read_cached(self) -> bool:
        """Take the table from its cache file if that holds a good one."""
        table = read_bigram_file(self.path, self.total, self.top)
        if table is not None:
            self._finish(table)
        return self.finished

    def step(self, rows: int = BUILD_ROWS) -> bool:
        """Compute the next ``rows`` rows (one forward pass); after the last, save the table.
        Returns whether the table is finished."""
        import mlx.core as mx

        if self.finished:
            return True
        if self._rows is None:
            self._rows = np.empty((self.total, self.top), dtype=np.int32)
        start, stop = self.done, min(self.total, self.done + rows)
        tokens = mx.arange(start, stop, dtype=mx.uint32)[:, None]
        if self.prefix:
            lead = mx.broadcast_to(
                mx.array(self.prefix, dtype=mx.uint32)[None], (stop - start, len(self.prefix))
            )
            tokens = mx.concatenate([lead, tokens], axis=1)
        logits = self.model(tokens)[:, -1, :].astype(mx.float32)
        best = mx.argpartition(-logits, kth=self.top - 1, axis=-1)[:, : self.top]
        values = mx.take_along_axis(logits, best, axis=-1)
        order = mx.argsort(-values, axis=-1)
        self._rows[start:stop] = np.array(mx.take_along_axis(best, order, axis=-1), dtype=np.int32)
        self.done = stop
        if stop == self.total:
            self._finish(self._rows)
            self._save(self.table)
        return self.finished

    def _save(self, table: np.ndarray) -> None:
        try:
            buffer = io.BytesIO()
            np.save(buffer, table, allow_pickle=False)
            write_atomic(self.path, buffer.getvalue())
        except OSError as error:
            log.warning("Could not cache the bigram table in %s: %s", self.path, error)

    def _finish(self, table: np.ndarray) -> None:
        self.table, self.done, self._rows = table, self.total, None
        self.model = None  # a finished table does not keep its model alive


def wanted_tables(drafter) -> list[str]:
    """The tables ``drafter`` wants, by the name ``attach_model`` takes each under (its
    ``attached_<name>`` says whether it got it)."""
    wants = {
        "bigram": drafter.wants_model_bigram,
        "static_table": drafter.wants_static_table,
        "corpus_index": drafter.wants_corpus_index,
    }
    return [name for name, wanted in wants.items() if wanted]


class ModelTables:
    """The model-derived tables one owner keeps, by file, and the builds still owed (the
    bigram, ``BigramBuild``; the static n-gram table, ``static_ngrams.StaticTableBuild``).

    ``inline``: a request that needs a missing table builds it itself (with progress and
    its stop checks between steps); otherwise the owner builds ``pending`` ones between
    requests and a request goes without the table meanwhile.
    """

    def __init__(self, inline: bool = True):
        self.inline = inline
        self._builds: dict[Path, BigramBuild] = {}

    def bigram(self, loaded, key: str) -> BigramBuild:
        """The bigram table of ``loaded`` (whose ``model_key`` is ``key``): finished when
        it is kept or its cache file is good, else a build that is now owed."""
        return self._kept_or_owed(
            loaded, BigramBuild(loaded.model, key, prefix=start_prefix(loaded.tokenizer))
        )

    def static(self, loaded, key: str) -> StaticTableBuild:
        """The static n-gram table of ``loaded``'s tokenizer (whatever its ``model_key``
        ``key``: models of one tokenizer share it): finished when it is kept, shipped
        (``static_ngrams.shipped_table``) or its cache file is good, else a build from the
        shipped corpus that is now owed."""
        return self._kept_or_owed(loaded, StaticTableBuild(loaded))

    def index(self, loaded, key: str) -> CorpusIndexBuild:
        """The corpus index of ``loaded``'s tokenizer (``corpus_index.CorpusIndexBuild``):
        finished when it is kept or its cache file is good, else a build now owed."""
        return self._kept_or_owed(loaded, CorpusIndexBuild(loaded))

    def builds(self, names, loaded, key: str) -> dict:
        """The tables ``names`` (``wanted_tables``) of ``loaded``, each kept, or a build now
        owed."""
        make = {"bigram": self.bigram, "static_table": self.static, "corpus_index": self.index}
        return {name: make[name](loaded, key) for name in names}

    def _kept_or_owed(self, loaded, build):
        kept = self._builds.get(build.path)
        if kept is not None and (kept.finished or kept.model is loaded.model):
            return kept
        build.read_cached()
        self._builds[build.path] = build
        return build

    def pending(self, model) -> BigramBuild | StaticTableBuild | None:
        """A build of ``model``'s tables still owed (builds for other models are dropped)."""
        for path, build in list(self._builds.items()):
            if build.finished:
                continue
            if build.model is not model:
                del self._builds[path]
                continue
            return build
        return None

    def drop(self, build: BigramBuild | StaticTableBuild) -> None:
        """Forget an unfinished build (it failed); the next request that needs it asks again."""
        if self._builds.get(build.path) is build and not build.finished:
            del self._builds[build.path]


def bigram_table(
    model,
    key: str,
    top: int = BIGRAM_TOP,
    batch: int = 256,
    progress: Callable[[int, int], None] | None = None,
    prefix: list[int] | None = None,
) -> np.ndarray:
    """[vocab, top] int32: the model's ``top`` most likely next tokens after each token alone
    (read from its cache file when that is good, else computed ``batch`` rows a step)."""
    build = BigramBuild(model, key, top, prefix)
    build.read_cached()
    while not build.finished:
        build.step(batch)
        if progress:
            progress(build.done, build.total)
    return build.table
