"""Cost-curve tools (measurement, not a test).

    python -m engine.bench.costs [--remeasure]            # this machine's verify cost c(n)
    python -m engine.bench.costs --compare prompt-lookup,suffix [--adaptive-only]
    python -m engine.bench.costs --tree-vs-batch 512     # multi-row verification both ways

The curve itself (measurement, interpolation, the on-disk cache) lives in
``engine.adaptive``; this file only drives it and prints.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from ..adaptive import AdaptiveMemory
from ..verify_cost import cost_path
from ..decode import DraftTree, Target
from ..drafters import measurement_options
from ..events import DoneEvent
from ..model_ngrams import model_key
from ..models import load_model
from ..session import ChatSession
from ..settings import DraftSettings, GenerationRequest

COPY_PROMPT = (
    "Repeat the following paragraph exactly, word for word:\n\n"
    "The lighthouse stood at the end of the rocky point, its white tower streaked "
    "with rust. Every evening the keeper climbed the spiral stairs, trimmed the wick, "
    "polished the great lens and watched the beam sweep across the dark water. Ships "
    "passed far out at sea, and none of them ever knew his name."
)
NOVEL_PROMPT = "Invent a new board game and describe how to play it."


def compare(
    loaded,
    memory: AdaptiveMemory,
    drafters: list[str],
    max_tokens: int,
    repeats: int,
    modes=(False, True),
    prompts=("copy", "novel"),
) -> None:
    """Speed of each drafter (fixed draft count 8, and adaptive) relative to ``none``.

    Paired runs: every configuration runs right after its own ``none`` run on the same
    prompt, and the speed-up is the median over repeats of (config tok/s) / (that none
    run's tok/s), which cancels most of the drift of a shared, loaded machine.
    """

    def once(prompt, drafter, adaptive_on):
        memory.forget_acceptance()  # every run starts from the prior: the learning cost is included
        request = GenerationRequest(
            messages=[{"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            draft=DraftSettings(
                drafter=drafter,
                draft_count=8,
                adaptive=adaptive_on,
                options=measurement_options(drafter),
            ),
        ).validated()
        for event in ChatSession(loaded, memory).generate(request):
            if isinstance(event, DoneEvent):
                stats, timing = event.stats, event.timing
        return (
            stats["emitted"] / timing["decode_s"],
            stats["tokens_per_pass"],
            stats["acceptance_rate"],
        )

    configs = [(d, a) for d in drafters for a in modes]
    print(
        f"{'prompt':6s} {'drafter':14s} {'mode':9s} {'speed-up (median, runs)':>28s} "
        f"{'tok/pass':>8s} {'accept':>7s}",
        flush=True,
    )
    for prompt_name, prompt in (("copy", COPY_PROMPT), ("novel", NOVEL_PROMPT)):
        if prompt_name not in prompts:
            continue
        for drafter, adaptive_on in configs:
            ratios = []
            for _ in range(repeats):
                base, _, _ = once(prompt, "none", False)
                rate, per_pass, accept = once(prompt, drafter, adaptive_on)
                ratios.append(rate / base)
            runs = " ".join(f"{r:.2f}" for r in ratios)
            print(
                f"{prompt_name:6s} {drafter:14s} {'adaptive' if adaptive_on else 'fixed 8':9s} "
                f"{statistics.median(ratios):7.3f} ({runs:>18s}) {per_pass:8.2f} {accept:7.2f}",
                flush=True,
            )


def batched_rows_forward(target, root: int, rows: list[list[int]]):
    """The paper's naive layout, for measurement: k copies of the context, one row each."""
    width = max(len(r) for r in rows)
    inputs = mx.array([[root] + r + [r[-1]] * (width - len(r)) for r in rows], dtype=mx.uint32)
    offset = target.offset
    caches = []
    for c in target.cache:
        copy = KVCache()
        copy.keys = mx.repeat(c.keys[..., :offset, :], len(rows), axis=0)
        copy.values = mx.repeat(c.values[..., :offset, :], len(rows), axis=0)
        copy.offset = offset
        caches.append(copy)
    return target.model(inputs, cache=caches)


def tree_vs_batch(loaded, context: int, shapes, repeats: int = 5) -> None:
    """Seconds per verify pass of k rows x w tokens: tree mask over one copy vs k copies."""
    target = Target(loaded.model)
    rng = random.Random(0)
    target.prefill([rng.randrange(100, 40000) for _ in range(context)])
    print(f"context {context} tokens; best of {repeats} (ms)")
    print(f"{'k x w':>7s} {'tree nodes':>10s} {'tree':>8s} {'batch':>8s} {'chain 1+w':>9s}")
    for k, w in shapes:
        rows = [[rng.randrange(100, 40000) for _ in range(w)] for _ in range(k)]
        tree = DraftTree(7, rows)
        times = {"tree": [], "batch": [], "chain": []}
        for _ in range(repeats):
            for kind in times:
                start = target.offset
                began = time.perf_counter()
                if kind == "tree":
                    out = target.forward_tree(tree)
                elif kind == "batch":
                    out = batched_rows_forward(target, 7, rows)
                else:
                    out = target.forward([7] + rows[0])
                mx.eval(out)
                times[kind].append(time.perf_counter() - began)
                target.trim(target.offset - start)
        print(
            f"{k:3d} x {w:<3d} {len(tree):10d} {min(times['tree']) * 1e3:8.1f} "
            f"{min(times['batch']) * 1e3:8.1f} {min(times['chain']) * 1e3:9.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.costs", description=__doc__)
    parser.add_argument("--model", help="mlx-lm model folder (default: the embedded model)")
    parser.add_argument("--compare", help="comma-separated drafters to compare with none")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--adaptive-only", action="store_true", help="compare adaptive mode only")
    parser.add_argument("--prompts", default="copy,novel", help="which of copy,novel to run")
    parser.add_argument("--remeasure", action="store_true", help="measure c(n) again")
    parser.add_argument(
        "--tree-vs-batch",
        type=int,
        metavar="CONTEXT",
        help="time multi-row verification both ways at this context length",
    )
    args = parser.parse_args()
    loaded = load_model(args.model)
    if args.tree_vs_batch:
        tree_vs_batch(loaded, args.tree_vs_batch, [(2, 4), (5, 4), (10, 4), (10, 10)])
        return
    key = model_key(loaded)
    memory = AdaptiveMemory()
    if args.remeasure or not memory.measured(key):
        target = Target(loaded.model)
        target.prefill(
            list(loaded.tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 20))
        )
        memory.measure(key, target)
    curve = memory.curve(key)
    print(f"verify cost c(n) for {loaded.name} (cached in {cost_path(key)}):")
    for n in curve.lengths:
        print(
            f"  n={n:4d}  {curve.base(n) * 1000:8.1f} ms  ({curve.base(n) / curve.base(1):.2f}x one token)"
        )
    if args.compare:
        compare(
            loaded,
            memory,
            args.compare.split(","),
            args.max_tokens,
            args.repeats,
            (True,) if args.adaptive_only else (False, True),
            args.prompts.split(","),
        )


if __name__ == "__main__":
    main()
