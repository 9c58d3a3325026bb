"""Draftless on an accelerator (measurement, not a test; nothing in the engine imports it).

    python -m engine.bench.accelerator --shape smollm2-135m --dtype bfloat16 [--bits 4]
    python -m engine.bench.accelerator --model FOLDER        # a real mlx-lm folder instead

Runs on MLX's default device (a GPU where MLX has one: Metal, CUDA; else the CPU). A
``--shape`` is a random-weight Llama built in memory (weights do not change timings; real
ones may not fit where this runs), with the tokenizer of ``--tokenizer`` (default: the
embedded model's folder). For that model it prints:

1. **c(n)**: verify cost of one pass of n tokens at a ``--context``-token context, timed
   by ``engine.verify_cost.timing_steps`` (the loop's own pass: forward, argmax, ``.tolist()``),
   least and median of ``--repeats``; and c(n)/c(1).
2. **Pass-length invariance**: the logits of 16 positions from one 16-token pass against
   16 one-token passes (max difference, argmax flips); with ``--near-ties``, the same over
   the benchmark's check answers and how close their top-2 logits come (decodes the check
   answers plainly once, minutes; cached in the cache folder). **Where c(1) goes**: ``engine.bench.profile_pass`` (graph building in Python, eval, host sync).
3. **The loop**: plain greedy decoding (drafter ``none``) against the engine loop fed by the
   oracle (``engine.bench.oracle``: drafts the plain run's own answer) at fixed draft counts,
   and against the real drafters with the defaults (adaptive, on the curve of 1). Runs are
   interleaved, ``--loop-repeats`` times; each is checked token for token against plain. The
   *predicted* speed-up is what c(n) says the run's passes should cost (sum of c(1 + drafted)
   against c(1) per token); measured / predicted is what the loop's own per-pass work
   (drafting, gate, policy, observe, syncs) leaves of it. A first differing token is
   explained: the top-2 logits there, from a one-token pass and from an 8-token pass.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import mlx.core as mx

from ..verify_cost import CostCurve, timing_steps
from ..decode import Target
from ..drafters import measurement_options
from ..events import DoneEvent, PassEvent
from .scratch import scratch_memory
from ..model_ngrams import model_key
from ..models import LoadedModel, load_model
from ..models.caches import speculation_cache, speculation_for
from ..session import ChatSession, prompt_tokens
from ..settings import DraftSettings, GenerationRequest
from ..tokens import output_size
from .costs import COPY_PROMPT
from .oracle import OracleDrafter, OracleSession
from .profile_pass import profile

LLAMA = {
    "model_type": "llama",
    "vocab_size": 49152,
    "rms_norm_eps": 1e-5,
    "rope_theta": 100000.0,
    "max_position_embeddings": 8192,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
SHAPES = {  # the embedded SmolLM2-135M; Llama-3.2-1B and Llama-2-7B shapes on its vocabulary
    "smollm2-135m": dict(
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        tie_word_embeddings=True,
    ),
    "llama-1b": dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        tie_word_embeddings=True,
    ),
    "llama-7b": dict(
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        head_dim=128,
        tie_word_embeddings=False,
    ),
}


def random_model(
    shape: str, dtype: str, bits: int, tokenizer_dir: Path, seed: int = 0
) -> LoadedModel:
    from mlx_lm.models import llama
    from mlx_lm.utils import load_tokenizer, quantize_model

    config = dict(LLAMA, **SHAPES[shape])
    mx.random.seed(seed)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    model.set_dtype(getattr(mx, dtype))  # before eval: the float32 draws are never all held
    if bits:
        model, config = quantize_model(model, config, 64, bits)
    mx.eval(model.parameters())
    tokenizer = load_tokenizer(tokenizer_dir, eos_token_ids=config["eos_token_id"])
    name = f"random-{shape}-{dtype}" + (f"-{bits}bit" if bits else "")
    line = speculation_for(model, speculation_cache(model)).line
    return LoadedModel(name, tokenizer_dir, model, tokenizer, config, line)


def cost_curve(loaded, lengths, context: int, repeats: int) -> dict[int, tuple[float, float]]:
    """(least, median) seconds of a pass of each length at ``context`` tokens."""
    target = Target(loaded.model)
    target.prefill([100 + i % 1000 for i in range(context)])
    samples: dict[int, list[float]] = {}
    for _, _, samples in timing_steps(target, lengths, repeats):
        pass
    return {n: (min(v), statistics.median(v)) for n, v in samples.items()}


def pass_invariance(loaded, context: int, n: int = 16) -> str:
    """Logits of n positions from one n-token pass against n one-token passes (the kernels
    differ by pass length: where they round differently, a near-tie can flip the argmax)."""
    target = Target(loaded.model)
    vocab = output_size(loaded.model)
    tokens = [(100 + i * 7919) % vocab for i in range(context + n)]
    target.prefill(tokens[:context])
    mark = target.checkpoint()
    whole = target.forward(tokens[context:])
    mx.eval(whole)
    target.restore(mark)
    singles = []
    for token in tokens[context:]:
        singles.append(target.forward([token]))
        mx.eval(singles[-1])
    singles = mx.concatenate(singles)
    top2 = mx.sort(singles, axis=-1)[:, -2:]
    flips = (mx.argmax(whole, axis=-1) != mx.argmax(singles, axis=-1)).sum().item()
    return (
        f"{n}-token pass vs {n} one-token passes at context {context}: max |logit difference| "
        f"{mx.abs(whole - singles).max().item():.2e}, argmax differs at {flips}/{n} positions, "
        f"least top-2 gap {(top2[:, 1] - top2[:, 0]).min().item():.2e}"
    )


def answer_near_ties(loaded, lengths=(2, 4, 8, 16), probe: int = 48) -> str:
    """On the benchmark's check answers (the embedded model's plain greedy answers): how far
    passes of n tokens stray from one-token passes over each answer's first ``probe`` tokens,
    and how close the top two logits come anywhere in the answers. A greedy answer can only
    change where a gap is smaller than that difference."""
    from .tune import reference_answers

    chats, key, _ = reference_answers("check", 512)
    if key != model_key(loaded):
        return "near-ties: the check answers are the embedded model's; run without --model/--shape"
    target = Target(loaded.model)
    differences = {n: 0.0 for n in lengths}
    gaps: list[float] = []
    for chat in chats.values():
        for turn in chat["turns"]:
            prompt, answer = turn["prompt"], turn["answer"]
            target.reset()
            target.prefill(prompt[:-1])
            mark = target.checkpoint()
            inputs = [prompt[-1]] + answer
            logits = mx.concatenate(
                [target.forward(inputs[i : i + 256]) for i in range(0, len(inputs) - 1, 256)]
            )[: len(answer)]
            top2 = mx.sort(logits, axis=-1)[:, -2:]
            gaps += (top2[:, 1] - top2[:, 0]).tolist()
            target.restore(mark)
            count = min(probe, len(inputs))
            singles = mx.concatenate([target.forward([t]) for t in inputs[:count]])
            mx.eval(singles)
            for n in (n for n in lengths if n <= count):
                target.restore(mark)
                passes = mx.concatenate(
                    [target.forward(inputs[i : i + n]) for i in range(0, count - n + 1, n)]
                )
                differences[n] = max(
                    differences[n], mx.abs(passes - singles[: passes.shape[0]]).max().item()
                )
            target.restore(mark)
    least = sorted(gaps)[:3]
    return (
        "check answers, n-token passes vs one-token passes, max |logit difference|: "
        + ", ".join(f"n={n} {d:.1e}" for n, d in differences.items())
        + f"; top-2 logit gaps over {len(gaps)} answer tokens: the least {', '.join(f'{g:.1e}' for g in least)}"
        + "".join(f"; under {t:g}: {sum(g < t for g in gaps)}" for t in (1e-3, 1e-2))
    )


def generate(loaded, memory, draft: DraftSettings, max_tokens: int, oracle=None):
    request = GenerationRequest(
        messages=[{"role": "user", "content": COPY_PROMPT}], max_tokens=max_tokens, draft=draft
    ).validated()
    session = OracleSession(loaded, memory, oracle) if oracle else ChatSession(loaded, memory)
    drafted = []
    for event in session.generate(request):
        if isinstance(event, PassEvent):
            drafted.append(event.drafted)
        elif isinstance(event, DoneEvent):
            done = event
    return done.tokens, done.stats["emitted"] / done.timing["decode_s"], drafted


def near_tie(loaded, max_tokens: int, plain: list[int], index: int) -> str:
    """Top-2 logits at the answer's position ``index``: one-token pass vs an 8-token pass."""
    request = GenerationRequest(
        messages=[{"role": "user", "content": COPY_PROMPT}], max_tokens=max_tokens
    ).validated()
    history = prompt_tokens(loaded, request) + plain[:index]
    target = Target(loaded.model)
    target.prefill(history[:-1])
    mark = target.checkpoint()
    one = target.forward(history[-1:])[-1]
    target.restore(mark)
    eight = target.forward(history[-1:] + plain[index : index + 7])[0]
    parts = []
    for label, logits in (("1-token pass", one), ("8-token pass", eight)):
        top = mx.argsort(-logits)[:2].tolist()
        values = logits[mx.array(top)].tolist()
        parts.append(
            f"{label}: top {top[0]} ({values[0]:.5f}) vs {top[1]} ({values[1]:.5f}), "
            f"gap {values[0] - values[1]:.2e}"
        )
    return "; ".join(parts) + f"; max |difference| {mx.abs(one - eight).max().item():.2e}"


def loop(loaded, curve: CostCurve, counts, drafters, max_tokens: int, repeats: int) -> None:
    memory = scratch_memory()
    key = model_key(loaded)
    memory.adaptive.use_measurement(key, {n: curve.base(n) for n in curve.lengths})
    configs = [f"oracle-{k}" for k in counts] + list(drafters)
    rates = {c: [] for c in ["none"] + configs}
    per_pass, predicted, mismatches = {}, {}, {}
    for _ in range(repeats):
        plain, rate, _ = generate(
            loaded, memory, DraftSettings(drafter="none", adaptive=False), max_tokens
        )
        rates["none"].append(rate)
        for config in configs:
            memory.adaptive.forget_acceptance()
            if config.startswith("oracle-"):
                oracle = OracleDrafter()
                oracle.expect(plain)
                draft = DraftSettings(drafter="none", draft_count=int(config[7:]), adaptive=False)
            else:
                oracle, draft = (
                    None,
                    DraftSettings(drafter=config, options=measurement_options(config)),
                )
            tokens, rate, drafted = generate(loaded, memory, draft, max_tokens, oracle)
            rates[config].append(rate)
            per_pass[config] = len(tokens) / len(drafted)
            predicted[config] = (
                len(tokens) * curve.base(1) / sum(curve.base(1 + d) for d in drafted)
            )
            if tokens != plain and config not in mismatches:
                index = next(
                    (i for i, (a, b) in enumerate(zip(tokens, plain)) if a != b),
                    min(len(tokens), len(plain)),
                )
                mismatches[config] = (index, near_tie(loaded, max_tokens, plain, index))
    base = statistics.median(rates["none"])
    print(
        f"\nloop: {max_tokens} new tokens, {repeats} interleaved repeats, medians "
        f"(plain {base:.1f} tok/s = {base * curve.base(1):.2f} x 1/c(1))"
    )
    print(
        "| config | tok/s | tokens/pass | speed-up (min-max) | predicted by c(n) | measured/predicted "
        "| identical to plain |"
    )
    print("|---|---|---|---|---|---|---|")
    for config in configs:
        ups = [r / b for r, b in zip(rates[config], rates["none"])]
        same = (
            "no: " + f"first difference at token {mismatches[config][0]}"
            if config in mismatches
            else "yes"
        )
        print(
            f"| {config} | {statistics.median(rates[config]):.1f} | {per_pass[config]:.2f} | "
            f"{statistics.median(ups):.2f}x ({min(ups):.2f}-{max(ups):.2f}) | "
            f"{predicted[config]:.2f}x | {statistics.median(ups) / predicted[config]:.2f} | {same} |"
        )
    for config, (index, detail) in mismatches.items():
        print(f"{config}: token {index} differs: {detail}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.bench.accelerator",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", help="an mlx-lm model folder (instead of --shape)")
    parser.add_argument(
        "--shape", choices=sorted(SHAPES), help="a random-weight model of this shape"
    )
    parser.add_argument(
        "--dtype", default="float32", help="--shape's weights: float32, bfloat16, float16"
    )
    parser.add_argument(
        "--bits", type=int, default=0, help="--shape quantized by mlx-lm (4, 8; 0: not)"
    )
    parser.add_argument(
        "--tokenizer", help="folder with the tokenizer files (default: the embedded model)"
    )
    parser.add_argument(
        "--context", type=int, default=512, help="context tokens before a timed pass"
    )
    parser.add_argument(
        "--lengths", default="1,2,3,4,5,6,8,12,16,24,32", help="pass lengths n of c(n)"
    )
    parser.add_argument("--repeats", type=int, default=10, help="timed passes per length and split")
    parser.add_argument("--loop", action="store_true", help="also time the speculative loop")
    parser.add_argument("--counts", default="2,4,8,16", help="the oracle's fixed draft counts")
    parser.add_argument(
        "--drafters", default="suffix,prompt-lookup", help="real drafters, defaults on"
    )
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--loop-repeats", type=int, default=3)
    parser.add_argument(
        "--near-ties",
        action="store_true",
        help="also measure pass-length differences and top-2 gaps on the check answers",
    )
    args = parser.parse_args(argv)
    for name in ("CACHE", "DATA", "CONFIG"):  # cost curves and drafter memory: never the user's
        os.environ.setdefault(f"DRAFTLESS_{name}_DIR", tempfile.mkdtemp(prefix="draftless-accel-"))
    if args.shape:
        from ..models.embedded import ensure_embedded_model

        folder = Path(args.tokenizer) if args.tokenizer else Path(ensure_embedded_model())
        loaded = random_model(args.shape, args.dtype, args.bits, folder)
    else:
        loaded = load_model(args.model)
    print(f"{loaded.name} on {mx.default_device()} (MLX {mx.__version__}); context {args.context}")
    lengths = [int(n) for n in args.lengths.split(",")]
    points = cost_curve(loaded, lengths, args.context, args.repeats)
    one = points[lengths[0]][0]
    print("| n | c(n) least ms | median ms | c(n)/c(1) |\n|---|---|---|---|")
    for n, (least, median) in points.items():
        print(f"| {n} | {least * 1e3:.2f} | {median * 1e3:.2f} | {least / one:.2f} |")
    print(pass_invariance(loaded, args.context))
    if args.near_ties:
        print(answer_near_ties(loaded))
    for n in (1, 8):
        r = profile(loaded, args.context, n, args.repeats, parts=False)
        print(
            f"split n={n}: pass {r['full_ms']:.2f} ms = graph (Python) {r['graph_ms']:.2f} + "
            f"eval {r['eval_ms']:.2f} + sync {r['sync_ms']:.2f}"
        )
    if args.loop:
        curve = CostCurve({n: least for n, (least, _) in points.items()})
        loop(
            loaded,
            curve,
            [int(k) for k in args.counts.split(",")],
            [d for d in args.drafters.split(",") if d],
            args.max_tokens,
            args.loop_repeats,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
