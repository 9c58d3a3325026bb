"""Model-derived n-gram tables (engine side: the only place they touch the model).

``bigram_table(model, key)``: for every token x, the model's top next tokens given x
alone (``p_M(·|x)``, "The N-Grammys" section 4.1), computed once per model in batches
with a progress callback and cached on disk ($DRAFTLESS_CACHE_DIR or the user cache dir).

"x alone" is fed after one neutral start token (``prefix``, the session passes the
tokenizer's newline token): a token at position 0 is the model's attention sink and its
prediction does not depend on it (measured on SmolLM2-135M: every x predicted '-', ',',
'\n' first), while after one start token the table is the real bigram (' United' ->
' States', 'import' -> ' numpy', ' of' -> ' the').
The result is plain token data (a numpy int32 array [vocab, top], best first) that the
session hands to drafters that want it.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .paths import cache_dir
from .tokens import output_size
from .untrusted import read_regular_file, write_atomic

log = logging.getLogger(__name__)

BIGRAM_TOP = 32
BIGRAM_VERSION = 2


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
    try:
        ids = list(tokenizer.encode("\n", add_special_tokens=False))
    except TypeError:
        ids = list(tokenizer.encode("\n"))
    return ids[-1:] if ids else [0]


def bigram_table(
    model,
    key: str,
    top: int = BIGRAM_TOP,
    batch: int = 256,
    progress: Callable[[int, int], None] | None = None,
    prefix: list[int] | None = None,
) -> np.ndarray:
    """[vocab, top] int32: the model's ``top`` most likely next tokens after each token alone."""
    for done, total, table in bigram_table_steps(model, key, top, batch, prefix):
        if table is not None:
            return table
        if progress:
            progress(done, total)
    raise AssertionError("unreachable")


def bigram_table_steps(
    model, key: str, top: int = BIGRAM_TOP, batch: int = 256, prefix: list[int] | None = None
):
    """Yield (done, total, None) while computing, then (total, total, table)."""
    import mlx.core as mx

    vocab = output_size(model)
    top = min(top, vocab)
    prefix = list(prefix or [])
    path = bigram_path(key + ("-p" + "_".join(map(str, prefix)) if prefix else ""), top)
    if path.exists():
        try:
            # header + table: the size a good file has, with room for the header
            data = read_regular_file(path, vocab * top * 4 + 4096)
            table = np.load(io.BytesIO(data), allow_pickle=False)
            if (
                table.shape == (vocab, top)
                and table.dtype == np.int32
                and (table.size == 0 or 0 <= table.min() <= table.max() < vocab)
            ):
                yield vocab, vocab, table
                return
            raise ValueError(
                f"shape {table.shape} {table.dtype}, or token ids outside 0..{vocab - 1}"
            )
        except (OSError, ValueError, EOFError) as error:
            log.warning("Ignoring the bigram table %s (%s); computing it again.", path, error)
    table = np.empty((vocab, top), dtype=np.int32)
    for start in range(0, vocab, batch):
        stop = min(vocab, start + batch)
        tokens = mx.arange(start, stop, dtype=mx.uint32)[:, None]
        if prefix:
            lead = mx.broadcast_to(
                mx.array(prefix, dtype=mx.uint32)[None], (stop - start, len(prefix))
            )
            tokens = mx.concatenate([lead, tokens], axis=1)
        logits = model(tokens)[:, -1, :].astype(mx.float32)
        best = mx.argpartition(-logits, kth=top - 1, axis=-1)[:, :top]
        values = mx.take_along_axis(logits, best, axis=-1)
        order = mx.argsort(-values, axis=-1)
        table[start:stop] = np.array(mx.take_along_axis(best, order, axis=-1), dtype=np.int32)
        yield stop, vocab, None
    try:
        buffer = io.BytesIO()
        np.save(buffer, table, allow_pickle=False)
        write_atomic(path, buffer.getvalue())
    except OSError as error:
        log.warning("Could not cache the bigram table in %s: %s", path, error)
    yield vocab, vocab, table
