"""The architecture matrix: every drafter stays lossless on the models people load.

Tiny random-weight models (tests/tiny_model.py) of each architecture, float32 and quantized
as mlx-community folders are, loaded through the engine's own loader. For each: greedy
output equals mlx-lm's own ``generate_step`` (with mlx-lm's own caches: rotating ones for
sliding windows, recurrent state for hybrids) for every drafter, over a prompt and answer
several times longer than the 8-token sliding windows; copying drafters get drafts
accepted; and the engine's ``speculation`` line says which verification each model gets.
"""

from unittest import mock

import pytest

from engine.drafters import DRAFTERS
from engine.models import load_model
from engine.runtime.model_ngrams import bigram_table
from engine.settings import DraftSettings

from .identity import reference_greedy, speculative
from .test_drafters_identity import NEW
from .tiny_model import ARCHITECTURES, WINDOW, write_tiny

OPTIONS = {"none": {}, "frequency": {}, "prompt-lookup": {}, **NEW}
COPYING = ("prompt-lookup", "ngram-simple", "suffix")
RECURRENT = {"mamba", "lfm2", "qwen3_next", "falcon_h1"}
NO_ROLLBACK = {"llama4"}
QUANTIZED = [
    (arch, bits) for arch in ("llama", "qwen3", "gemma3_text", "mistral-swa") for bits in (4, 8)
]
MATRIX = [(arch, None) for arch in ARCHITECTURES] + QUANTIZED
PROMPT = [40 + (i % 9) for i in range(24)] + [(i * 37 + 11) % 250 + 3 for i in range(8)]
MAX_TOKENS = 32
SEEDS = {"gemma3_text": 2}  # a seed whose greedy text loops (drafts accepted), then leaves the loop


pytestmark = pytest.mark.usefixtures("private_dirs")  # conftest: a data and cache folder per test


def test_every_drafter_is_in_the_matrix():
    assert set(OPTIONS) == set(DRAFTERS)


def expected_speculation(arch: str) -> str:
    if arch in NO_ROLLBACK:
        return "off (its ChunkedKVCache cache cannot be rolled back)"
    if arch in RECURRENT:
        return (
            "on (one row: recurrent layers: state restored and kept tokens re-run after a "
            "rejection)"
        )
    return "on (tree)"


@pytest.mark.parametrize("arch,bits", MATRIX, ids=[f"{a}-{b or 32}bit" for a, b in MATRIX])
def test_every_drafter_is_lossless(tmp_path, arch, bits):
    loaded = load_model(str(write_tiny(tmp_path / arch, arch, seed=SEEDS.get(arch, 3), bits=bits)))
    assert loaded.speculation == expected_speculation(arch)
    if bits:
        assert f"{bits}-bit" in loaded.details
    assert len(PROMPT) + MAX_TOKENS > 4 * WINDOW
    model = loaded.model
    expected = reference_greedy(model, PROMPT, MAX_TOKENS)
    bigram = bigram_table(model, f"tiny-{arch}-{bits}", top=4)
    accepted, widest = {}, 0
    for name, options in OPTIONS.items():
        settings = DraftSettings(
            drafter=name, draft_count=6, ngram_order=3, ngram_min=1, adaptive=False, options=options
        )
        got, results = speculative(
            model, PROMPT, MAX_TOKENS, settings, bigram=bigram if name == "ngrammys" else None
        )
        assert got == expected, name
        accepted[name] = sum(r.accepted for r in results)
        if name == "ngrammys":
            widest = max(r.drafted for r in results)
        if arch in NO_ROLLBACK:
            widest = max(widest, *(r.drafted for r in results))
    if arch in NO_ROLLBACK:
        assert widest == 0 and not any(accepted.values()), "plain decoding, never a draft"
        return
    assert all(accepted[name] > 0 for name in COPYING), accepted
    if loaded.speculation == "on (tree)":
        assert widest > 6, "several ngrammys rows were verified in one tree pass"
    else:
        assert widest <= 6, "one row at a time"


@pytest.mark.parametrize("arch", ["gemma3_text", "mamba"])
def test_first_message_through_the_session_with_adaptive_drafting(tmp_path, arch):
    """A Gemma 3 with a window shorter than the prompt plus the longest
    verify-cost pass failed its first message. The cost curve is measured on a cache of its
    own; the chat's cache is untouched, and the answer is plain greedy decoding's."""
    from engine.events import DoneEvent
    from engine.runtime.session import ChatSession
    from engine.settings import GenerationRequest

    loaded = load_model(str(write_tiny(tmp_path / arch, arch, seed=SEEDS.get(arch, 3))))
    prompt = "alpha beta gamma delta alpha beta gamma delta"
    request = GenerationRequest(
        prompt=prompt,
        raw=True,
        max_tokens=40,
        draft=DraftSettings(drafter="prompt-lookup", adaptive=True),
    ).validated()
    done = list(ChatSession(loaded).generate(request))[-1]
    assert isinstance(done, DoneEvent)
    tokens = list(loaded.tokenizer.encode(prompt))
    assert len(tokens) > WINDOW
    expected = reference_greedy(loaded.model, tokens, 40)
    eos = [i for i, t in enumerate(expected) if t in loaded.tokenizer.eos_token_ids]
    assert done.tokens == expected[: eos[0] if eos else None]
    assert done.stats["speculation"] == loaded.speculation


# a raw prompt (no chat template's system text to prefill at every run: MLX's CPU 4-bit path
# costs about linearly in tokens per pass) that every drafter that drafts here has both kept and
# rejected drafts on
EMBEDDED_COPY_PROMPT = "the red fox and the red hen and the red fox and the red hen and the red"


@pytest.mark.embedded
def test_the_embedded_model_quantized_to_4_bit_by_mlx_lm_stays_lossless(tmp_path):
    """SmolLM2 converted by mlx-lm's own tooling (``mlx_lm.convert -q``), as a user would."""
    from mlx_lm.convert import convert

    from engine.models.embedded import ensure_embedded_model

    folder = tmp_path / "smollm2-4bit"
    convert(str(ensure_embedded_model()), str(folder), quantize=True, q_bits=4, q_group_size=64)
    loaded = load_model(str(folder))
    assert loaded.details == "llama · 135M params · 4-bit (group 64)"
    assert loaded.speculation == "on (tree)"
    prompt = list(loaded.tokenizer.encode(EMBEDDED_COPY_PROMPT))
    expected = reference_greedy(loaded.model, prompt, 8)
    accepted, rejected = 0, 0
    for name in DRAFTERS:
        options = {
            "ngram-cache": {"dynamic": False},
            "ngrammys": {"rows": 4, "model_bigram": False},
        }.get(name, {})
        settings = DraftSettings(drafter=name, draft_count=3, adaptive=False, options=options)
        got, results = speculative(loaded.model, prompt, 8, settings)
        assert got == expected, name
        accepted += sum(r.accepted for r in results)
        rejected += sum(r.drafted - r.accepted for r in results)
    assert accepted > 0 and rejected > 0


# ---------------------------------------------------------------- tree passes
# Every tree pass runs on a positioned view of the model (engine/models/tree_adapter.py); these
# check it token for token against mlx-lm on every architecture that gets tree passes, and
# that the loaded model is never written, not even for the length of a pass.
TREE_MATRIX = [(arch, bits) for arch, bits in MATRIX if expected_speculation(arch) == "on (tree)"]
TREE_IDS = [f"{a}-{b or 32}bit" for a, b in TREE_MATRIX]


def tree_rows(truth: list[int], step: int, vocab: int) -> list[list[int]]:
    """Three rows sharing prefixes: a wrong first token, a wrong third token, then the
    right continuation of a length that varies by pass, so the accepted path is rarely the
    tree's first nodes (its KV entries must be moved) and the nodes' depths differ from
    their indices (their positions must come from the depth)."""
    wrong = [(t + 1) % vocab for t in truth]
    right = truth[: 1 + step % len(truth)]
    return [wrong[:1] + truth[1:3], truth[:2] + wrong[2:3] + truth[3:4], right]


def greedy_with_logprobs(model, prompt: list[int], max_tokens: int):
    """mlx-lm's ``generate_step``: its tokens and the log-probabilities each was chosen from."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step

    steps = list(generate_step(mx.array(prompt, dtype=mx.uint32), model, max_tokens=max_tokens))
    return [int(token) for token, _ in steps], [logprobs for _, logprobs in steps]


def tree_only_decode(model, prompt: list[int], expected: list[int]):
    """Greedy decoding where every pass is a tree pass: (emitted tokens, the
    log-probabilities each was chosen from, passes)."""
    import mlx.core as mx

    from engine.loop.decode import Target, TokenChooser
    from engine.loop.tree import verify_tree
    from engine.settings import SamplingSettings
    from engine.tokens import output_size

    target = Target(model)
    assert target.supports_tree
    chooser, vocab = TokenChooser(SamplingSettings()), output_size(model)
    history, logprobs = list(prompt), []
    target.prefill(history[:-1])
    passes = 0
    while (done := len(history) - len(prompt)) < len(expected):
        rows = tree_rows(expected[done : done + 5], passes, vocab)
        verdict = verify_tree(target, rows, chooser, history, set())
        history += verdict.emitted
        logprobs += list(verdict.logits - mx.logsumexp(verdict.logits, axis=-1, keepdims=True))
        assert target.offset == len(history) - 1
        passes += 1
    count = len(expected)
    return history[len(prompt) :][:count], logprobs[:count], passes


@pytest.mark.parametrize("arch,bits", TREE_MATRIX, ids=TREE_IDS)
def test_tree_only_decoding_is_mlx_lm_greedy(arch, bits):
    """Token for token, and each token chosen from the same distribution as mlx-lm's (so a
    position or mask error shows even where the argmax happens to survive it)."""
    import mlx.core as mx

    from .tiny_model import make_tiny

    model, _ = make_tiny(arch, 259, seed=SEEDS.get(arch, 3), bits=bits)
    expected, expected_logprobs = greedy_with_logprobs(model, PROMPT, MAX_TOKENS)
    before = module_state(model)
    got, logprobs, passes = tree_only_decode(model, PROMPT, expected)
    assert got == expected
    for step, (ours, theirs) in enumerate(zip(logprobs, expected_logprobs)):
        assert mx.allclose(ours, theirs.astype(mx.float32), atol=1e-3).item(), step
    assert passes < MAX_TOKENS, "drafts were accepted"
    assert module_state(model) == before


def module_state(model) -> list:
    """Every module of ``model`` with the identity of each of its attributes and children."""
    return [
        (
            path,
            id(module),
            {key: id(value) for key, value in vars(module).items()},
            {key: id(value) for key, value in module.items()},
        )
        for path, module in model.named_modules()
    ]


class Interrupted(Exception):
    pass


@pytest.mark.parametrize("arch,bits", TREE_MATRIX, ids=TREE_IDS)
def test_a_tree_pass_never_writes_the_model_even_when_it_raises(arch, bits):
    """Halfway through a tree pass (the second layer's cache write) the model is exactly
    as loaded, and answers a plain call as it did before; the pass's exception leaves it
    so too."""
    import mlx.core as mx
    from mlx_lm.models.cache import KVCache

    from engine.loop.tree import DraftTree, forward_tree
    from engine.models.caches import speculation_cache

    from .tiny_model import make_tiny

    model, _ = make_tiny(arch, 259, seed=3, bits=bits)
    probe = mx.array([PROMPT[:5]], dtype=mx.uint32)
    plain = model(probe)
    before = module_state(model)
    seen = []

    class InterruptingCache(KVCache):
        armed = False

        def update_and_fetch(self, keys, values):
            if self.armed:
                seen.append((module_state(model), model(probe)))
                raise Interrupted
            return super().update_and_fetch(keys, values)

    cache = speculation_cache(model)
    cache[1] = InterruptingCache()
    model(mx.array([PROMPT[:12]], dtype=mx.uint32), cache=cache)
    cache[1].armed = True
    with pytest.raises(Interrupted):
        forward_tree(model, cache, DraftTree(PROMPT[12], [[5, 6, 7], [5, 8], [9]]))
    ((during, answer),) = seen
    assert during == before
    assert mx.array_equal(answer, plain)
    assert module_state(model) == before
    assert mx.array_equal(model(probe), plain)


@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_the_vocabulary_is_read_from_the_weights_or_args_without_a_forward_pass(arch):
    from engine.tokens import output_size

    from .tiny_model import make_tiny

    model, _ = make_tiny(arch, 259)
    with mock.patch.object(type(model), "__call__", side_effect=AssertionError("a pass")):
        assert output_size(model) == 259


def test_the_vocabulary_of_a_model_without_named_layers_comes_from_its_args():
    from engine.tokens import output_size

    from .tiny_model import make_tiny

    model, _ = make_tiny("llama", 259)
    model["unnamed"] = model.pop("model")  # no layer by a known name any more
    assert output_size(model) == 259


def test_why_a_model_cannot_be_adapted_for_tree_passes():
    from engine.models.tree_adapter import unsupported

    from .tiny_model import make_tiny

    model, _ = make_tiny("llama", 259)
    assert unsupported(model) is None
    assert "rotary" in unsupported(make_tiny("mamba", 259)[0])
    model.model.extra = [model.layers[0]]  # one attention layer reachable twice
    assert "reachable once" in unsupported(model)
