"""Where one verify pass goes (measurement, not a test).

    python -m engine.bench.profile_pass [--prefix 384] [--repeats 30] [--n 1,5]

After a ``--prefix``-token context, times one pass of n tokens as the loop runs it
(``Target.forward`` + argmax + ``.tolist()``) and splits it into:
- **graph**: building the lazy graph in Python (the model's ``__call__``, no compute);
- **eval**: computing it (``mx.eval``): BLAS matmuls, attention, elementwise kernels and
  MLX's per-op CPU dispatch;
- **sync**: argmax and ``.tolist()`` of the result (one host sync);
and times the parts of eval alone on the same shapes: the projections of all layers and
the output head (BLAS), attention over the context (``mx.fast.scaled_dot_product_attention``),
and within it the softmax, and the MLP's SiLU: elementwise work that grows with n and, on
MLX's Linux CPU build, costs about 9 ns per ``exp`` (an addition costs 0.2 ns).
Prints medians in ms and c(n)/c(1), with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import mlx.core as mx
import mlx.nn as nn

from ..decode import Target
from ..models import load_model


def _median_ms(fn, repeats: int) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples) * 1000


def profile(loaded, prefix: int, n: int, repeats: int, parts: bool = True) -> dict:
    """``parts``: also time the projections and attention alone (float, unquantized models)."""
    model = loaded.model
    target = Target(model)
    target.prefill(list(range(100, 100 + prefix)))
    start = target.offset
    tokens = list(range(200, 200 + n))

    def undo():
        target.trim(target.offset - start)

    def full():
        mx.argmax(target.forward(tokens), axis=-1).tolist()
        undo()

    def graph_only():
        out = target.forward(tokens)
        undo()  # nothing computed: the cache's offset moves back; the lazy graph is dropped
        return out

    def graph_and_eval():
        out = target.forward(tokens)
        mx.eval(out)
        undo()
        return out

    def sync_only(out):
        return lambda: mx.argmax(out, axis=-1).tolist()

    full_ms = _median_ms(full, repeats)
    graph_ms = _median_ms(graph_only, repeats)
    eval_ms = _median_ms(graph_and_eval, repeats) - graph_ms
    out = target.forward(tokens)
    mx.eval(out)
    undo()
    sync_ms = _median_ms(sync_only(out), repeats)
    split = {
        "n": n,
        "full_ms": full_ms,
        "graph_ms": graph_ms,
        "eval_ms": eval_ms,
        "sync_ms": sync_ms,
    }
    if not parts:
        return split

    # the parts of eval alone, same shapes
    args = model.args if hasattr(model, "args") else None
    layers = model.layers
    hidden = layers[0].self_attn.q_proj.weight.shape[1]
    x = mx.random.normal((1, n, hidden)).astype(mx.float32)
    weights = []
    for layer in layers:
        attn, mlp = layer.self_attn, layer.mlp
        weights += [
            attn.q_proj.weight,
            attn.k_proj.weight,
            attn.v_proj.weight,
            attn.o_proj.weight,
            mlp.gate_proj.weight,
            mlp.up_proj.weight,
        ]
    down = [layer.mlp.down_proj.weight for layer in layers]
    head = model.lm_head.weight if hasattr(model, "lm_head") else model.model.embed_tokens.weight
    mx.eval(x, weights, down, head)

    def matmuls():
        outs = [x @ w.T for w in weights]
        inner = layers[0].mlp.gate_proj.weight.shape[0]
        y = mx.random.normal((1, n, inner))
        outs += [y @ w.T for w in down]
        outs.append(x @ head.T)
        mx.eval(outs)

    def head_only():
        mx.eval(x @ head.T)

    attn0 = layers[0].self_attn
    heads, kv_heads = attn0.n_heads, attn0.n_kv_heads
    dim = hidden // heads
    q = mx.random.normal((1, heads, n, dim))
    k = mx.random.normal((1, kv_heads, prefix + n, dim))
    v = mx.random.normal((1, kv_heads, prefix + n, dim))
    mx.eval(q, k, v)

    def attention():
        mx.eval(
            [
                mx.fast.scaled_dot_product_attention(
                    q, k, v, scale=dim**-0.5, mask="causal" if n > 1 else None
                )
                for _ in layers
            ]
        )

    # exp-bound elementwise work that grows with n: MLX's CPU build has no vector exp
    scores = mx.random.normal((1, heads, n, prefix + n))
    inner = mx.random.normal((1, n, layers[0].mlp.gate_proj.weight.shape[0]))
    mx.eval(scores, inner)

    def softmax():
        mx.eval([mx.softmax(scores, axis=-1, precise=True) for _ in layers])

    def silu():
        mx.eval([nn.silu(inner) * inner for _ in layers])

    return {
        **split,
        "matmul_ms": _median_ms(matmuls, repeats),
        "head_ms": _median_ms(head_only, repeats),
        "attention_ms": _median_ms(attention, repeats),
        "softmax_ms": _median_ms(softmax, repeats),
        "silu_ms": _median_ms(silu, repeats),
        "layers": len(layers),
        "model_type": getattr(args, "model_type", None),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.bench.profile_pass", description=__doc__
    )
    parser.add_argument("--model", help="model folder (default: the embedded model)")
    parser.add_argument("--prefix", type=int, default=384, help="context tokens before the pass")
    parser.add_argument("--repeats", type=int, default=30, help="timed repeats per figure")
    parser.add_argument("--n", default="1,5", help="pass lengths to profile (default 1,5)")
    args = parser.parse_args(argv)
    loaded = load_model(args.model)
    results = [profile(loaded, args.prefix, int(n), args.repeats) for n in args.n.split(",")]
    print(f"load average {os.getloadavg()}; prefix {args.prefix}; medians of {args.repeats}")
    for r in results:
        print(
            f"n={r['n']:3}: pass {r['full_ms']:.1f} ms = graph (Python) {r['graph_ms']:.1f} + "
            f"eval {r['eval_ms']:.1f} + sync {r['sync_ms']:.2f}. Alone: "
            f"all projections + head (BLAS) {r['matmul_ms']:.1f} (head {r['head_ms']:.1f}), "
            f"attention x{r['layers']} {r['attention_ms']:.1f} (its softmax {r['softmax_ms']:.1f}), "
            f"SiLU x{r['layers']} {r['silu_ms']:.1f}"
        )
    base = results[0]["full_ms"]
    print("c(n)/c(1): " + ", ".join(f"c({r['n']})={r['full_ms'] / base:.2f}" for r in results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
