"""Reference decoding for the lossless tests: mlx-lm's own generate_step (independent of our loop)."""

import mlx.core as mx
from mlx_lm.generate import generate_step

from engine.drafters import make_drafter
from engine.loop.decode import Target, TokenChooser, speculative_decode
from engine.settings import DraftSettings, SamplingSettings


def reference_greedy(model, prompt, max_tokens):
    tokens = []
    for token, _ in generate_step(mx.array(prompt, dtype=mx.uint32), model, max_tokens=max_tokens):
        tokens.append(int(token))
    return tokens


def speculative(
    model,
    prompt,
    max_tokens,
    settings: DraftSettings,
    sampling=None,
    eos=(),
    bigram=None,
    static_table=None,
):
    """Our loop on a fresh cache. Returns (emitted tokens, pass results).

    ``bigram``: a model bigram table handed to drafters that use one (ngrammys);
    ``static_table``: a static n-gram table handed to drafters that use one (suffix-static).
    """
    return run_with_policy(
        model, prompt, max_tokens, settings, None, sampling, eos, bigram, static_table
    )


def run_with_policy(
    model,
    prompt,
    max_tokens,
    settings,
    policy,
    sampling=None,
    eos=(),
    bigram=None,
    static_table=None,
    schedule=None,
    drafter=None,
):
    """``speculative`` with a draft policy (None: the settings' fixed draft count) and a
    schedule (None: nothing scheduled); ``drafter``: one made and attached already."""
    target = Target(model)
    history = list(prompt)
    target.prefill(history[:-1])
    drafter = drafter or make_drafter(settings)
    if bigram is not None or static_table is not None:
        drafter.attach_model("test-model", bigram=bigram, static_table=static_table)
    drafter.reset(history)
    results = list(
        speculative_decode(
            target,
            drafter,
            TokenChooser(sampling or SamplingSettings()),
            history,
            max_tokens=max_tokens,
            draft_count=settings.draft_count,
            eos_tokens=set(eos),
            policy=policy,
            schedule=schedule,
        )
    )
    assert target.offset == len(history) - 1  # the cache holds exactly the history but its last
    return history[len(prompt) :], results


def reference_greedy_with_processors(model, prompt, max_tokens, processors):
    tokens = []
    for token, _ in generate_step(
        mx.array(prompt, dtype=mx.uint32),
        model,
        max_tokens=max_tokens,
        logits_processors=processors,
    ):
        tokens.append(int(token))
    return tokens


# The sampled tests draw tokens from a 6-token vocabulary: chi-square, 5 degrees of
# freedom, p = 0.001.
CHI_SQUARE_CRITICAL = 20.52


def chi_square(a, b, vocab_size: int) -> float:
    """Two-sample chi-square statistic of two token Counters of equal sample size."""
    return sum((a[t] - b[t]) ** 2 / (a[t] + b[t]) for t in range(vocab_size) if a[t] + b[t])


def answer_on_curve_file(loaded, folder, curve: dict, prompt: str, max_tokens: int, **draft):
    """A raw prompt answered through a chat session planning on ``curve`` (a curve file's
    JSON, written into ``folder``); ``draft``: the draft settings, ``sampling`` apart.
    Returns (the done event, the named curve)."""
    import json

    from engine.policy.verify_cost import curve_from_spec
    from engine.runtime.session import ChatSession
    from engine.settings import GenerationRequest

    path = folder / "curve.json"
    path.write_text(json.dumps(curve))
    named = curve_from_spec(str(path))
    sampling = draft.pop("sampling", SamplingSettings())
    request = GenerationRequest(
        prompt=prompt,
        raw=True,
        max_tokens=max_tokens,
        sampling=sampling,
        draft=DraftSettings(cost_curve=named, **draft),
    ).validated()
    return list(ChatSession(loaded).generate(request))[-1], named
