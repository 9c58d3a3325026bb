"""Memory of the two growing drafter indexes at 100k and 1M tokens of history.

    python -m tests.measure_drafter_memory [100000 1000000]

- ngram-cache's cross-chat memory (the dynamic store), fed n-grams of 1-4 tokens as the
  drafter feeds it with generated tokens, 64 at a time (its per-chat context cache is
  not included: it is bounded by the chat, i.e. by the model's context window);
- the suffix drafter's automaton (per chat), fed the same way.

The history is a fixed pseudo-random stream (Zipf 1.2 over a 49,152-token vocabulary,
seed 0): more varied than real text, so more distinct n-grams than a real chat. Memory
is what ``tracemalloc`` counts for Python objects (current after feeding, and peak).
"""

from __future__ import annotations

import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

CHUNK = 64
VOCAB = 49152


def history(length: int) -> list[int]:
    import numpy as np

    return (np.random.default_rng(0).zipf(1.2, length) % VOCAB).tolist()


def measure(name: str, tokens: list[int], folder: Path) -> dict:
    from engine.drafters import make_drafter, ngram_cache
    from engine.settings import DraftSettings

    tracemalloc.start()
    started = time.perf_counter()
    if name == "ngram-cache":  # the cross-chat store, fed as ngram-cache feeds it
        store = ngram_cache._DynamicStore(folder / "memory.json")
        seen: list[int] = []
        for start in range(0, len(tokens), CHUNK):
            seen.extend(tokens[start : start + CHUNK])
            store.counts.update(seen, start, 1, ngram_cache.NGRAM_MAX)
            store.bound(CHUNK)
        size = f"{len(store.counts):,} n-grams kept (budget {store.max_entries:,} + 25 %)"
    else:
        drafter = make_drafter(DraftSettings(drafter=name, adaptive=False))
        drafter.reset(tokens[:CHUNK])
        for start in range(CHUNK, len(tokens), CHUNK):
            drafter.observe(tokens[start : start + CHUNK])
        size = f"{len(drafter.sam):,} tokens indexed (budget {drafter.max_tokens:,})"
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "drafter": name,
        "history": len(tokens),
        "current_mb": current / 2**20,
        "peak_mb": peak / 2**20,
        "size": size,
        "seconds": time.perf_counter() - started,
    }


def main(lengths: list[int]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for length in lengths:
            tokens = history(length)
            for name in ("ngram-cache", "suffix"):
                r = measure(name, tokens, Path(folder))
                print(
                    f"{r['drafter']:12} {r['history']:>9,} tokens of history: "
                    f"{r['current_mb']:6.1f} MB now, {r['peak_mb']:6.1f} MB peak; {r['size']} "
                    f"[{r['seconds']:.0f} s]",
                    flush=True,
                )


if __name__ == "__main__":
    main([int(n) for n in sys.argv[1:]] or [100_000, 1_000_000])
