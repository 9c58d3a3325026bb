"""Baselines and peers run in the same process as the engine.

- ``mlx_lm_greedy``: mlx-lm's own ``stream_generate`` on the same loaded model, so our
  loop's overhead over plain mlx-lm is visible.
- ``HFPromptLookup``: Hugging Face transformers' prompt lookup decoding
  (``generate(..., prompt_lookup_num_tokens=K)``) on torch CPU with the same weights,
  against transformers' own plain greedy decoding. Its forward calls are counted with a
  forward hook; it is skipped with a clear line when torch/transformers are missing.
  It runs in a child process (``run_hf_jobs``): in the engine's process torch shares the
  cores with MLX's OpenBLAS threads (loaded globally) and ran >10x slower than alone.
- llama.cpp's n-gram modes: ``llamacpp.py`` (built on demand, skipped with a line if not).

Every peer the suite runs is a ``Peer``: it says whether it can run (``status``), runs the
same answers (full prompts as token ids) against its own plain decoding (``run``) and turns
what it measured into its ``results.json`` entry (``collect``); ``run_peer`` does the rest,
the same for every peer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Protocol


@dataclass
class PlainRun:
    tokens: list[int]
    decode_wall_s: float
    passes: int
    cpu_s: float | None = None


def mlx_lm_greedy(loaded, prompt_tokens: list[int], max_tokens: int) -> PlainRun:
    """mlx-lm's stream_generate, greedy, after the same prefill as our loop.

    The prompt but its last token is prefilled into a fresh cache (not timed), so the
    timed part is the same work our loop's decode time covers: a 1-token pass on the
    last prompt token, then one pass per generated token, with detokenizing.
    """
    import mlx.core as mx
    from mlx_lm import stream_generate

    from engine.decode import Target

    target = Target(loaded.model)
    target.prefill(prompt_tokens[:-1])
    tokens: list[int] = []
    cpu_started = time.process_time()
    started = time.perf_counter()
    for response in stream_generate(
        loaded.model,
        loaded.tokenizer,
        mx.array(prompt_tokens[-1:], dtype=mx.uint32),
        max_tokens=max_tokens,
        prompt_cache=target.cache,
    ):
        if response.finish_reason == "stop":
            break  # the end-of-sequence token: our loop does not list it either
        tokens.append(int(response.token))
    wall = time.perf_counter() - started
    return PlainRun(tokens, wall, len(tokens), time.process_time() - cpu_started)


def hf_status() -> str | None:
    """None when torch and transformers are importable, else why the peer is skipped."""
    import importlib.util

    for name in ("torch", "transformers"):
        if importlib.util.find_spec(name) is None:
            return (
                f"skipped: {name} is not installed (pip install torch transformers; "
                "on this machine `pip install torch==2.13.0` takes a local CPU wheel)"
            )
    return None


@dataclass
class HFRun:
    tokens: list[int]  # new tokens, end-of-sequence dropped
    new_tokens: int  # as generate returned them (eos included)
    calls: int  # forward calls, the first one being prefill + first token
    total_s: float
    first_call_s: float

    @property
    def decode_s(self) -> float:
        """Wall time after the first forward call (prefill + first token)."""
        return self.total_s - self.first_call_s

    @property
    def tokens_per_call(self) -> float:
        """Tokens per forward call after the first, comparable to our tokens per pass."""
        return (self.new_tokens - 1) / (self.calls - 1) if self.calls > 1 else 0.0


class HFPromptLookup:
    """transformers + torch CPU on the same weights (the model folder is HF-style)."""

    def __init__(self, model_path):
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.torch = torch
        self.versions = {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "torch_threads": torch.get_num_threads(),
        }
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        self.model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32)
        self.model.eval()
        self.eos = self.model.generation_config.eos_token_id
        if isinstance(self.eos, int):
            self.eos = [self.eos]
        self.eos = set(self.eos or [])
        self._calls = 0
        self._first_end = None
        self.model.register_forward_hook(self._hook)

    def _hook(self, module, args, output):
        self._calls += 1
        if self._calls == 1:
            self._first_end = time.perf_counter()

    def generate(
        self, prompt_tokens: list[int], max_tokens: int, lookup: int = 0, max_ngram: int = 2
    ) -> HFRun:
        torch = self.torch
        ids = torch.tensor([prompt_tokens], dtype=torch.long)
        kwargs = dict(
            max_new_tokens=max_tokens,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            pad_token_id=self.tokenizer.eos_token_id,
            attention_mask=torch.ones_like(ids),
        )
        if lookup:
            kwargs.update(prompt_lookup_num_tokens=lookup, max_matching_ngram_size=max_ngram)
        self._calls = 0
        self._first_end = None
        with torch.inference_mode():
            started = time.perf_counter()
            out = self.model.generate(ids, **kwargs)
            total = time.perf_counter() - started
        new = out[0, ids.shape[1] :].tolist()
        tokens = []
        for token in new:
            if token in self.eos:
                break
            tokens.append(int(token))
        return HFRun(tokens, len(new), self._calls, total, (self._first_end or started) - started)


def run_hf_jobs(
    model_path,
    jobs: list[dict],
    max_tokens: int,
    lookup: int,
    max_ngram: int = 2,
    threads: int | None = None,
    repeats: int = 1,
    timeout: float = 7200,
) -> dict:
    """Run the HF peer in a child process; ``jobs``: [{"id", "tokens"}]. Returns its JSON.
    ``threads``: torch's threads, by default one per core, as MLX's BLAS and llama.cpp get."""
    with tempfile.TemporaryDirectory() as folder:
        spec = Path(folder) / "jobs.json"
        result = Path(folder) / "result.json"
        spec.write_text(
            json.dumps(
                {
                    "model": str(model_path),
                    "jobs": jobs,
                    "max_tokens": max_tokens,
                    "lookup": lookup,
                    "max_ngram": max_ngram,
                    "out": str(result),
                    "threads": threads or os.cpu_count() or 1,
                    "repeats": repeats,
                }
            )
        )
        root = Path(__file__).resolve().parents[2]
        # the child runs torch alone: no OpenBLAS preloaded by the engine package next to it
        env = dict(
            os.environ,
            DRAFTLESS_NO_OPENBLAS="1",
            PYTHONPATH=os.pathsep.join(
                [str(root)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
            ),
        )
        proc = subprocess.run(
            [sys.executable, "-m", "engine.bench.peers", str(spec)],
            env=env,
            cwd=root,
            timeout=timeout,
            stdout=subprocess.DEVNULL,
        )
        if proc.returncode != 0 or not result.exists():
            raise RuntimeError(f"the HF peer process exited with code {proc.returncode}")
        return json.loads(result.read_text())


class Peer(Protocol):
    key: str  # its entry in results.json

    def status(self, loaded) -> str | None:
        """None when it can run, else the line the report prints instead."""

    def describe(self, answers: int, repeats: int) -> str:
        """What it runs, for the log."""

    def run(self, loaded, jobs: list[dict], max_tokens: int, repeats: int, log) -> dict:
        """Every job (``{"id", "tokens"}``) in rounds, with its own plain decoding."""

    def collect(
        self, result: dict, task_of: dict[str, str], reference: dict[str, list[int]]
    ) -> tuple[dict, list[str], list[str]]:
        """(results.json entry, answers that differ from its own plain run, skipped lines)."""


def run_peer(
    peer: Peer,
    loaded,
    jobs: list[dict],
    max_tokens: int,
    repeats: int,
    reference: dict[str, list[int]],
    log: Callable[[str], None],
) -> tuple[dict, list[str], list[str]]:
    """One peer on the jobs (``{"id", "task", "tokens"}``): its entry, differences, skips.
    A peer that cannot run, or fails, is a skip line, never a failure of the run."""
    status = peer.status(loaded)
    if status:
        log(f"  {peer.key}: {status}")
        return {"status": status}, [], []
    log(f"{peer.describe(len(jobs), repeats)}: {len(jobs)} answers x {repeats} rounds")
    try:
        result = peer.run(
            loaded, [{"id": j["id"], "tokens": j["tokens"]} for j in jobs], max_tokens, repeats, log
        )
    except Exception as error:
        status = (
            f"skipped: {peer.describe(len(jobs), repeats)} failed ({type(error).__name__}: {error})"
        )
        log(f"  {status}")
        return {"status": status}, [], []
    return peer.collect(result, {j["id"]: j["task"] for j in jobs}, reference)


class HFPeer:
    key = "hf_prompt_lookup"

    def __init__(self, lookup: int):
        self.lookup = lookup

    def status(self, loaded) -> str | None:
        return hf_status()

    def describe(self, answers: int, repeats: int) -> str:
        return "Hugging Face transformers prompt lookup (torch CPU, same weights, child process)"

    def run(self, loaded, jobs, max_tokens, repeats, log) -> dict:
        return run_hf_jobs(loaded.path, jobs, max_tokens, self.lookup, repeats=repeats)

    def collect(self, result, task_of, reference):
        rows, differences = [], []
        for item in result["rows"]:
            plain = [HFRun(**p) for p in item["plain"]]
            lookup = [HFRun(**p) for p in item["lookup"]]
            identical = all(r.tokens == plain[0].tokens for r in plain + lookup)
            rows.append(
                {
                    "workload": item["id"],
                    "task": task_of[item["id"]],
                    "plain_decode_s": [round(r.decode_s, 4) for r in plain],
                    "decode_s": [round(r.decode_s, 4) for r in lookup],
                    "new_tokens": lookup[0].new_tokens,
                    "calls": lookup[0].calls,
                    "plain_calls": plain[0].calls,
                    "tokens_per_call": round(lookup[0].tokens_per_call, 4),
                    "identical_to_own_plain": identical,
                    "plain_equals_our_plain": plain[0].tokens == reference.get(item["id"]),
                    "loadavg_1min": item.get("loadavg_1min"),
                }
            )
            if not identical:
                differences.append(
                    f"HF peer {item['id']}: prompt lookup output differs from "
                    "transformers' own plain greedy output"
                )
        return (
            {
                "status": "ran",
                "versions": result["versions"],
                "threads": result.get("threads"),
                "prompt_lookup_num_tokens": self.lookup,
                "max_matching_ngram_size": 2,
                "rows": rows,
            },
            differences,
            [],
        )


def _child(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    import torch

    torch.set_num_threads(spec.get("threads") or torch.get_num_threads())
    hf = HFPromptLookup(spec["model"])
    warm = spec["jobs"][0]["tokens"][:32] if spec["jobs"] else [1, 2, 3]
    hf.generate(warm, 8)
    hf.generate(warm, 8, lookup=spec["lookup"], max_ngram=spec["max_ngram"])
    rows = []
    for index, job in enumerate(spec["jobs"]):
        plain, lookup = [], []
        for repeat in range(spec.get("repeats", 1)):  # interleaved, order alternating
            first_plain = (index + repeat) % 2 == 0
            for use_lookup in (False, True) if first_plain else (True, False):
                run = hf.generate(
                    job["tokens"],
                    spec["max_tokens"],
                    lookup=spec["lookup"] if use_lookup else 0,
                    max_ngram=spec["max_ngram"],
                )
                (lookup if use_lookup else plain).append(asdict(run))
        rows.append(
            {"id": job["id"], "plain": plain, "lookup": lookup, "loadavg_1min": os.getloadavg()[0]}
        )
        print(f"  HF {job['id']} done", file=sys.stderr, flush=True)
    Path(spec["out"]).write_text(
        json.dumps({"versions": hf.versions, "rows": rows, "threads": torch.get_num_threads()})
    )
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
