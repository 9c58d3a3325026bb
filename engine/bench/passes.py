"""Verify passes on this machine's device: their cost, their logits, the loop on top.

    python -m engine.bench.passes                                    # the embedded model
    python -m engine.bench.passes --model FOLDER                     # an mlx-lm model folder
    python -m engine.bench.passes --shape llama-7b --dtype bfloat16 --bits 4 --loop

On MLX's default device (Metal, CUDA, else the CPU); a ``--shape`` is a random-weight
Llama built in memory (weights do not change timings) with the embedded model's tokenizer.
1. **c(n)**: one pass of n tokens at a ``--context``-token context as the loop runs it,
   least and median of ``--repeats``; ``--out FILE``: the least seconds as a curve file.
2. **Where a pass goes**: graph building in Python, eval, host sync (n = 1, 8); a token's
   time pass by pass (as the speculative loop waits for a pass that sends no draft) against
   plain decoding's pipelined pace.
3. **Pass-length invariance**: 16 positions' logits from one pass against 16 one-token
   passes: where they round differently, a near-tie can change a greedy answer.
4. ``--loop``: plain decoding against the loop fed by the oracle at fixed draft counts and
   by real drafters with the defaults, interleaved, each checked against plain;
   measured / predicted by c(n) is what the loop's own per-pass work leaves.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import mlx.core as mx

from ..drafters import make_drafter, measurement_options
from ..loop.decode import Target, TokenChooser, pipelined_plain_decode
from ..models import LoadedModel, load_model
from ..models.caches import speculation_cache, speculation_for
from ..policy.verify_cost import COST_LENGTHS, CostCurve
from ..runtime.model_ngrams import model_key
from ..runtime.session import ChatSession
from ..settings import DraftSettings, SamplingSettings
from ..tokens import output_size
from .oracle import OracleDrafter, OracleSession
from .runner import CurveTimer, compare, context_tokens_needed, run_engine, verify_cost_curve
from .scratch import scratch_memory
from .workloads import select_workloads

LLAMA = dict(model_type="llama", vocab_size=49152, rms_norm_eps=1e-5, rope_theta=100000.0)
LLAMA.update(max_position_embeddings=8192, bos_token_id=1, eos_token_id=2)
SHAPES = {  # (hidden, intermediate, layers, heads, kv heads, head dim, tied embeddings)
    "smollm2-135m": (576, 1536, 30, 9, 3, 64, True),  # the embedded model
    "llama-1b": (2048, 8192, 16, 32, 8, 64, True),  # Llama-3.2-1B's shape
    "llama-7b": (4096, 11008, 32, 32, 32, 128, False),  # Llama-2-7B's shape
}
SHAPE_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
SHAPE_KEYS += ("num_key_value_heads", "head_dim", "tie_word_embeddings")


def random_model(shape: str, dtype: str, bits: int, seed=0, with_tokenizer=True) -> LoadedModel:
    from mlx_lm.models import llama
    from mlx_lm.utils import load_tokenizer, quantize_model

    from ..models.embedded import ensure_embedded_model

    config = dict(LLAMA, **dict(zip(SHAPE_KEYS, SHAPES[shape])))
    mx.random.seed(seed)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    model.set_dtype(getattr(mx, dtype))  # before eval: the float32 draws are never all held
    if bits:
        model, config = quantize_model(model, config, 64, bits)
    mx.eval(model.parameters())
    folder = ensure_embedded_model() if with_tokenizer else None  # the loop's; c(n) needs none
    tokenizer = load_tokenizer(folder, eos_token_ids=config["eos_token_id"]) if folder else None
    name = f"random-{shape}-{dtype}" + (f"-{bits}bit" if bits else "")
    line = speculation_for(model, speculation_cache(model)).line
    return LoadedModel(name, folder, model, tokenizer, config, line)


def _median_ms(fn, repeats: int) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples) * 1000


def pass_split(loaded, context: int, n: int, repeats: int) -> dict:
    """Median ms of one n-token pass, and of its graph building, eval and host sync."""
    target = Target(loaded.model)
    target.prefill(list(range(100, 100 + context)))
    mark, tokens = target.checkpoint(), list(range(200, 200 + n))

    def graph():
        out = target.forward(tokens)
        target.restore(mark)  # nothing computed: the lazy graph is dropped
        return out

    full = _median_ms(lambda: mx.argmax(graph(), axis=-1).tolist(), repeats)
    graph_ms = _median_ms(graph, repeats)
    eval_ms = _median_ms(lambda: mx.eval(graph()), repeats) - graph_ms
    out = graph()
    mx.eval(out)
    sync = _median_ms(lambda: mx.argmax(out, axis=-1).tolist(), repeats)
    return {"n": n, "full_ms": full, "graph_ms": graph_ms, "eval_ms": eval_ms, "sync_ms": sync}


def plain_pace(loaded, context: int, tokens: int = 48, rounds: int = 6) -> dict:
    """Seconds a token of greedy decoding, two ways over the same passes: each one-token pass
    waited for before the next is built (the speculative loop's pass that sends no draft),
    and plain decoding's pipelined loop (the next pass queued before the token is read).
    Medians of ``rounds``, interleaved; also both runs' tokens (the same passes: equal)."""
    chooser = TokenChooser(SamplingSettings(temperature=0.0))
    prompt = [(100 + i * 7919) % output_size(loaded.model) for i in range(context + 1)]
    drafter = make_drafter(DraftSettings(drafter="none").validated())
    seconds: dict[str, list[float]] = {"waited": [], "pipelined": []}
    made: dict[str, list[int]] = {}
    for round_ in range(rounds):
        for way in ("waited", "pipelined")[:: 1 if round_ % 2 == 0 else -1]:
            target, history = Target(loaded.model), list(prompt)
            target.prefill(history[:-1])
            began = time.perf_counter()
            if way == "waited":
                for _ in range(tokens):
                    history.append(chooser.pick(target.forward(history[-1:]))[-1].item())
            else:
                passes = pipelined_plain_decode(
                    target, drafter, chooser, history, max_tokens=tokens, eos_tokens=set()
                )
                for _ in passes:
                    pass
            seconds[way].append((time.perf_counter() - began) / tokens)
            made[way] = history[len(prompt) :]
    return {way: statistics.median(values) for way, values in seconds.items()} | {"tokens": made}


def pass_invariance(loaded, context: int, n: int = 16) -> str:
    """Logits of n positions from one n-token pass against n one-token passes."""
    target = Target(loaded.model)
    tokens = [(100 + i * 7919) % output_size(loaded.model) for i in range(context + n)]
    target.prefill(tokens[:context])
    mark = target.checkpoint()
    whole = target.forward(tokens[context:])
    mx.eval(whole)
    target.restore(mark)
    singles = mx.concatenate([target.forward([t]) for t in tokens[context:]])
    top2 = mx.sort(singles, axis=-1)[:, -2:]
    flips = (mx.argmax(whole, axis=-1) != mx.argmax(singles, axis=-1)).sum().item()
    return (
        f"{n}-token pass vs {n} one-token passes at context {context}: max |logit difference| "
        f"{mx.abs(whole - singles).max().item():.2e}, argmax differs at {flips}/{n} positions, "
        f"least top-2 gap {(top2[:, 1] - top2[:, 0]).min().item():.2e}"
    )


def loop(loaded, curve: CostCurve, counts, drafters, max_tokens: int, repeats: int) -> None:
    memory = scratch_memory()
    memory.adaptive.curves[model_key(loaded)] = curve  # in this process only, never saved
    workload = select_workloads(["code-edit"], 1)[0][0]  # a copy-heavy prompt
    configs = [f"oracle-{k}" for k in counts] + list(drafters)
    runs = {c: [] for c in ["none"] + configs}
    for _ in range(repeats):
        for config in ["none"] + configs:
            memory.adaptive.forget_acceptance()
            if config.startswith("oracle-"):
                session = OracleSession(loaded, memory, OracleDrafter([runs["none"][-1].tokens]))
                draft = DraftSettings(drafter="none", draft_count=int(config[7:]), adaptive=False)
            else:
                session = ChatSession(loaded, memory)
                draft = DraftSettings(drafter=config, options=measurement_options(config))
            run = run_engine(session, workload, workload.messages, draft, max_tokens, config)
            compare(run, (runs["none"] or [run])[-1].tokens)
            runs[config].append(run)
    plain = runs["none"]
    base = statistics.median(len(r.tokens) / r.decode_wall_s for r in plain)
    print(f"\nloop: {max_tokens} new tokens, {repeats} interleaved repeats, medians")
    print(f"(plain {base:.1f} tok/s = {base * curve.base(1):.2f} x 1/c(1))")
    print("| config | tok/s | tokens/pass | speed-up (min-max) | predicted by c(n) |", end="")
    print(" measured/predicted | identical to plain |\n|---|---|---|---|---|---|---|")
    for config in configs:
        ups = [p.decode_wall_s / r.decode_wall_s for p, r in zip(plain, runs[config])]
        up, last = statistics.median(ups), runs[config][-1]
        rate = statistics.median(len(r.tokens) / r.decode_wall_s for r in runs[config])
        cost = sum(curve.base(1 + drafted) for drafted, *_ in last.passes)
        predicted = len(last.tokens) * curve.base(1) / cost
        wrong = [r.first_mismatch for r in runs[config] if not r.identical]
        same = f"no: first difference at token {wrong[0]}" if wrong else "yes"
        print(
            f"| {config} | {rate:.1f} | {len(last.tokens) / len(last.passes):.2f} | "
            f"{up:.2f}x ({min(ups):.2f}-{max(ups):.2f}) | {predicted:.2f}x | "
            f"{up / predicted:.2f} | {same} |"
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.bench.passes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", help="an mlx-lm model folder (default: the embedded model)")
    parser.add_argument("--shape", choices=sorted(SHAPES), help="a random-weight model instead")
    parser.add_argument("--dtype", default="float32", help="--shape's dtype (bfloat16, …)")
    parser.add_argument("--bits", type=int, default=0, help="--shape quantized to 4 or 8 bits")
    parser.add_argument("--context", type=int, default=512, help="context before a timed pass")
    parser.add_argument("--lengths", default=",".join(map(str, COST_LENGTHS)), help="n of c(n)")
    parser.add_argument("--repeats", type=int, default=10, help="timed passes per length")
    parser.add_argument("--out", help="write the curve (least seconds) to this JSON file")
    parser.add_argument("--loop", action="store_true", help="also time the speculative loop")
    parser.add_argument("--counts", default="2,4,8,16", help="the oracle's fixed draft counts")
    parser.add_argument("--drafters", default="suffix,prompt-lookup", help="real drafters")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--loop-repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.shape:
        loaded = random_model(args.shape, args.dtype, args.bits, with_tokenizer=args.loop)
    else:
        loaded = load_model(args.model)
    print(f"{loaded.name} on {mx.default_device()} (MLX {mx.__version__}); context {args.context}")
    lengths = [int(n) for n in args.lengths.split(",")]
    context = [100 + i % 1000 for i in range(context_tokens_needed(args.context, lengths))]
    curve = verify_cost_curve(CurveTimer(loaded, context, lengths, args.context), args.repeats)
    least = {int(n): s for n, s in curve["min_s"].items()}
    print("| n | c(n) least ms | median ms | c(n)/c(1) |\n|---|---|---|---|")
    for n in lengths:
        median_ms, ratio = curve["median_s"][str(n)] * 1e3, curve["ratio_min"][str(n)]
        print(f"| {n} | {least[n] * 1e3:.2f} | {median_ms:.2f} | {ratio:.2f} |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            seconds = {str(n): s for n, s in least.items()}
            json.dump({"seconds": seconds, "context_scale": curve["context_scale"]}, out)
    for n in (1, 8):
        r = pass_split(loaded, args.context, n, args.repeats)
        print(
            f"split n={n}: pass {r['full_ms']:.2f} ms = graph (Python) {r['graph_ms']:.2f} + "
            f"eval {r['eval_ms']:.2f} + sync {r['sync_ms']:.2f}"
        )
    pace = plain_pace(loaded, args.context)
    print(
        f"a token: {pace['waited'] * 1e3:.2f} ms pass by pass, {pace['pipelined'] * 1e3:.2f} ms "
        f"pipelined ({pace['pipelined'] / pace['waited']:.3f} of it; a pass that sends no draft "
        "is waited for)"
    )
    print(pass_invariance(loaded, args.context))
    if args.loop:
        counts = [int(k) for k in args.counts.split(",")]
        drafters = [d for d in args.drafters.split(",") if d]
        loop(loaded, CostCurve(least), counts, drafters, args.max_tokens, args.loop_repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
