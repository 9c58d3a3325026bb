"""The architecture matrix: every drafter stays lossless on the models people load.

Tiny random-weight models (tests/tiny_model.py) of each architecture, float32 and quantized
as mlx-community folders are, loaded through the engine's own loader. For each: greedy
output equals mlx-lm's own ``generate_step`` (with mlx-lm's own caches: rotating ones for
sliding windows, recurrent state for hybrids) for every drafter, over a prompt and answer
several times longer than the 8-token sliding windows; copying drafters get drafts
accepted; and the engine's ``speculation`` line says which verification each model gets.
"""

import pytest

from engine.drafters import DRAFTERS
from engine.model_ngrams import bigram_table
from engine.models import load_model
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
    from engine.session import ChatSession
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


# raw prompts: no chat template's system text to prefill at every run (MLX's CPU 4-bit
# path costs about linearly in tokens per pass)
EMBEDDED_PROMPTS = {
    "copy": "the red fox and the red hen and the red fox and the red hen and the red",
    "novel": "Once upon a time, in a city made of glass,",
}


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
    accepted = 0
    for text in EMBEDDED_PROMPTS.values():
        prompt = list(loaded.tokenizer.encode(text))
        expected = reference_greedy(loaded.model, prompt, 8)
        for name in DRAFTERS:
            options = {
                "ngram-cache": {"dynamic": False},
                "ngrammys": {"rows": 4, "model_bigram": False},
            }.get(name, {})
            settings = DraftSettings(drafter=name, draft_count=3, adaptive=False, options=options)
            got, results = speculative(loaded.model, prompt, 8, settings)
            assert got == expected, name
            accepted += sum(r.accepted for r in results)
    assert accepted > 0
