"""Measure a running server: ``python -m engine.server.loadgen --url http://127.0.0.1:8080``.

Runs C concurrent streaming clients (for each C in ``--clients``), each sending
``--requests`` chat requests one after another, with speculation off (drafter ``none``)
and on (the given drafter). Prints one Markdown row per run: requests/s, time to first
token (median and worst), output tokens/s over the run, and the engine's mean tokens per
pass. A measurement tool: nothing else imports it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

PROMPTS = [
    "List the days of the week, then list them again in the same order.",
    "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox",
    "Write the numbers from one to twenty in words, separated by commas.",
    "Explain in two sentences what a KV cache is.",
]


async def one(client, prompt, drafter, max_tokens):
    started = time.perf_counter()
    first = None
    stats = {}
    stream = await client.chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": prompt}],
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"draftless": {"drafter": drafter}},
    )
    async for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - started
        if chunk.usage is not None:
            stats = (chunk.usage.model_extra or {}).get("draftless") or {}
    return first, time.perf_counter() - started, stats


async def run(url, api_key, clients, requests, drafter, max_tokens):
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key=api_key or "none", max_retries=0, timeout=600)
    results = []

    async def worker(index):
        for r in range(requests):
            results.append(
                await one(client, PROMPTS[(index + r) % len(PROMPTS)], drafter, max_tokens)
            )

    began = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(clients)))
    elapsed = time.perf_counter() - began
    await client.close()
    ttft = sorted(r[0] for r in results if r[0] is not None)
    emitted = sum(r[2].get("emitted", 0) for r in results)
    passes = sum(r[2].get("passes", 0) for r in results)
    return {
        "clients": clients,
        "requests": len(results),
        "seconds": elapsed,
        "requests_per_s": len(results) / elapsed,
        "ttft_median": statistics.median(ttft),
        "ttft_max": ttft[-1],
        "tokens_per_s": emitted / elapsed,
        "tokens_per_pass": emitted / passes if passes else 0.0,
        "engine_tokens_per_s": statistics.median(r[2]["timing"]["tokens_per_s"] for r in results),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.server.loadgen", description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--api-key")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--requests", type=int, default=1, help="per client, one after another")
    parser.add_argument("--drafter", default="default")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--off-only", action="store_true")
    parser.add_argument("--on-only", action="store_true")
    args = parser.parse_args(argv)
    modes = [("off", "none"), ("on", args.drafter)]
    modes = [
        m
        for m in modes
        if not (args.off_only and m[0] == "on") and not (args.on_only and m[0] == "off")
    ]
    print(
        "| speculation | clients | requests | req/s | TTFT median s | TTFT max s | "
        "tokens/s (all clients) | engine tok/s (median) | tokens/pass | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, drafter in modes:
        for clients in args.clients:
            row = asyncio.run(
                run(args.url, args.api_key, clients, args.requests, drafter, args.max_tokens)
            )
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(
                f"| {label} ({drafter}) | {clients} | {row['requests']} | "
                f"{row['requests_per_s']:.2f} | {row['ttft_median']:.2f} | {row['ttft_max']:.2f} | "
                f"{row['tokens_per_s']:.1f} | {row['engine_tokens_per_s']:.1f} | "
                f"{row['tokens_per_pass']:.2f} | {load} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
