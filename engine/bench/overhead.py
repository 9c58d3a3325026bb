"""Drafter overhead benchmark (not a test): propose + observe per pass at a long history.

    python -m engine.bench.overhead [--history 16000] [--passes 300] [--draft-count 8]

Builds a synthetic 49,152-token-vocabulary history (Zipf-distributed words with copied
passages, like chat text that quotes itself), indexes it with each drafter's ``reset``,
then times ``propose`` + ``observe`` over many passes that append 1-5 tokens each.
Also reports the Python memory the drafter's index holds (tracemalloc).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import tracemalloc

VOCAB = 49152


def synthetic_history(length: int, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(VOCAB)]
    tokens: list[int] = []
    while len(tokens) < length:
        if len(tokens) > 200 and rng.random() < 0.15:  # quote an earlier passage
            start = rng.randrange(0, len(tokens) - 100)
            tokens.extend(tokens[start : start + rng.randrange(10, 100)])
        else:
            tokens.extend(rng.choices(range(VOCAB), weights=weights, k=rng.randrange(5, 40)))
    return tokens[:length]


def measure(name: str, history: list[int], passes: int, draft_count: int) -> dict:
    import numpy as np

    from engine.drafters import make_drafter, measurement_options
    from engine.settings import DraftSettings
    from engine.bench.scratch import FolderStores

    drafter = make_drafter(
        DraftSettings(
            drafter=name, draft_count=draft_count, adaptive=False, options=measurement_options(name)
        )
    )
    table = (
        np.random.default_rng(0).integers(0, VOCAB, size=(VOCAB, 32), dtype=np.int32)
        if drafter.wants_model_bigram
        else None
    )
    drafter.attach_model("synthetic", bigram=table, stores=FolderStores())
    prompt, rest = history[: -passes * 5], history[-passes * 5 :]
    tracemalloc.start()
    began = time.perf_counter()
    drafter.reset(prompt)
    index_s = time.perf_counter() - began
    memory = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    rng = random.Random(1)
    seen = list(prompt)
    times, drafted = [], 0
    cursor = 0
    topk = drafter.wants_target_topk
    for _ in range(passes):
        step = rng.randrange(1, 6)
        emitted = rest[cursor : cursor + step]
        cursor += step
        began = time.perf_counter()
        rows = drafter.propose(draft_count).rows
        drafter.observe(
            emitted,
            accepted=max(0, len(emitted) - 1),
            drafted=len(rows[0]) if rows else 0,
            target_topk=[[t, t + 1, t + 2][:topk] for t in emitted] if topk else None,
        )
        times.append(time.perf_counter() - began)
        seen.extend(emitted)
        drafted += sum(len(r) for r in rows)
    times.sort()
    return {
        "drafter": name,
        "history": len(prompt),
        "mean_ms": statistics.mean(times) * 1e3,
        "p50_ms": times[len(times) // 2] * 1e3,
        "p99_ms": times[int(len(times) * 0.99)] * 1e3,
        "index_s": index_s,
        "memory_mb": memory / 2**20,
        "drafted": drafted,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=16000)
    parser.add_argument("--passes", type=int, default=300)
    parser.add_argument("--draft-count", type=int, default=8)
    parser.add_argument("--drafters", help="comma-separated (default: all)")
    args = parser.parse_args()
    from engine.drafters import DRAFTERS

    names = args.drafters.split(",") if args.drafters else list(DRAFTERS)
    history = synthetic_history(args.history + args.passes * 5)
    print(
        f"{'drafter':15s} {'history':>7s} {'mean ms':>8s} {'p50 ms':>7s} {'p99 ms':>7s} "
        f"{'index s':>8s} {'mem MB':>7s} {'drafted':>8s}"
    )
    for name in names:
        r = measure(name, history, args.passes, args.draft_count)
        print(
            f"{r['drafter']:15s} {r['history']:7d} {r['mean_ms']:8.3f} {r['p50_ms']:7.3f} "
            f"{r['p99_ms']:7.3f} {r['index_s']:8.2f} {r['memory_mb']:7.1f} {r['drafted']:8d}"
        )


if __name__ == "__main__":
    main()
