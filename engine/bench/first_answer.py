"""The first answer on a new machine (not a test): how long it waits, and what the footer says.

    python -m engine.bench.first_answer [--runs 3] [--after 0.5]

Each run is a fresh process with empty cache and data folders (converted models are shared),
so the engine has never measured the model's verify cost and calibrates it in the
background, as on a new machine. The run loads the built-in model, waits ``--after``
seconds (a person starting to type), sends one message and reports the time from sending
to the first token as the caller saw it, and the first-token time the answer's statistics
report (the footer's figure), with the part of it spent waiting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from ..paths import models_dir


async def _first_answer(after: float) -> dict:
    from ..events import DoneEvent, TokenEvent
    from ..service import EngineService
    from ..settings import GenerationRequest

    service = EngineService()
    async for _ in service.load():
        pass
    await asyncio.sleep(after)
    request = GenerationRequest(messages=[{"role": "user", "content": "Say hello."}], max_tokens=8)
    sent, first, timing = time.perf_counter(), None, {}
    async for event in service.generate(request):
        if isinstance(event, TokenEvent) and first is None:
            first = time.perf_counter() - sent
        elif isinstance(event, DoneEvent):
            timing = event.timing
    service.shutdown()
    return {
        "seen_s": first,
        "footer_s": timing.get("first_token_s"),
        "waited_s": timing.get("waited_s", 0.0),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.first_answer")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--after", type=float, default=0.5, help="seconds from load to sending")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(asyncio.run(_first_answer(args.after))))
        return 0
    seen = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="draftless-first-answer-") as folder:
            env = dict(
                os.environ,
                DRAFTLESS_CACHE_DIR=f"{folder}/cache",
                DRAFTLESS_DATA_DIR=f"{folder}/data",
                DRAFTLESS_MODELS_DIR=str(models_dir()),
            )
            command = [sys.executable, "-m", "engine.bench.first_answer", "--child"]
            output = subprocess.run(
                [*command, "--after", str(args.after)], env=env, capture_output=True, text=True
            )
        if output.returncode:
            raise SystemExit(output.stderr)
        result = json.loads(output.stdout.strip().splitlines()[-1])
        seen.append(result["seen_s"])
        print(
            f"run {run + 1}: first token {result['seen_s']:.2f} s after sending; the answer's "
            f"statistics say {result['footer_s']:.2f} s ({result['waited_s']:.2f} s of it "
            f"waiting); load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    print(f"median first token after sending: {statistics.median(seen):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
