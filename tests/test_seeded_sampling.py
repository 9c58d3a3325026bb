"""Same seed, same answer: a seeded sampled answer under speculation is plain decoding's
answer for that seed, token for token, whatever was drafted (engine/loop/sampling.py).

Each sampler the server and the app offer (temperature, top-p, top-k, min-p, the
penalties, a grammar) is run plain and under several drafters: an oracle that drafts the
plain answer with a wrong token in every other pass (one row, and as a tree with the right
row second), and the real n-gram drafters on a scripted target whose samples mostly follow
its script. The old sampler (one draw per pass from a global random state) fails every
comparison where a draft was accepted or a multi-token pass was sampled.
"""

import mlx.core as mx
import pytest

from engine.drafters import make_drafter
from engine.drafters.base import Drafter, Proposal
from engine.loop.decode import Target, TokenChooser, speculative_decode
from engine.loop.sampling import PositionSampler, position_key
from engine.settings import DraftSettings, GenerationRequest, SamplingSettings

from .scripted_model import ScriptedModel
from .tiny_model import make_tiny_llama, write_byte_tokenizer

SAMPLERS = {
    "temperature": dict(temperature=1.0),
    "top-p": dict(temperature=0.8, top_p=0.9),
    "top-k": dict(temperature=1.5, top_k=5),
    "min-p": dict(temperature=1.2, min_p=0.05),
    "penalties": dict(
        temperature=1.0, repetition_penalty=1.3, presence_penalty=0.4, frequency_penalty=0.2
    ),
}
SEEDS = (0, 42, 2**63 + 5)
PROMPT = [40 + (i % 9) for i in range(30)]
ANSWER_TOKENS = 24


class OracleDrafter(Drafter):
    """Drafts ``truth`` (the answer plain decoding gave) from where the answer stands, with a
    wrong token at draft position 2 in every other pass; ``tree``: that wrong row first and
    the right one second, verified as one tree."""

    name = "oracle"
    summary = "the plain answer, sometimes wrong"
    truth: list[int] = []
    tree = False

    def __init__(self, settings=None):
        super().__init__(settings)
        self.made = 0
        self.passes = 0

    @property
    def multi_row(self):
        return self.tree

    @property
    def rows_per_pass(self):
        return 2 if self.tree else 1

    def reset(self, prompt_tokens):
        self.made = self.passes = 0

    def propose(self, k):
        right = self.truth[self.made : self.made + k]
        self.passes += 1
        if len(right) < 3 or self.passes % 2:
            return Proposal([right] if right else [])
        wrong = right[:2] + [(right[2] + 1) % 50] + right[3:]
        return Proposal([wrong, right] if self.tree else [wrong])

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        self.made += len(emitted)


def decode(model, sampling, drafter, prompt=PROMPT, count=ANSWER_TOKENS, constraint=None):
    """(the answer's tokens, draft tokens accepted) on a fresh cache, a fixed draft count."""
    target = Target(model)
    history = list(prompt)
    target.prefill(history[:-1])
    drafter.reset(history)
    results = list(
        speculative_decode(
            target,
            drafter,
            TokenChooser(sampling, constraint=constraint),
            history,
            max_tokens=count,
            draft_count=5,
            eos_tokens=set(),
        )
    )
    return history[len(prompt) :], sum(r.accepted for r in results)


def plain(model, sampling, **options):
    return decode(model, sampling, make_drafter(DraftSettings(drafter="none")), **options)[0]


@pytest.fixture(scope="module")
def tiny():
    return make_tiny_llama(seed=1)


@pytest.mark.parametrize("name", list(SAMPLERS))
@pytest.mark.parametrize("tree", [False, True], ids=["row", "tree"])
def test_drafting_the_plain_answer_gives_the_plain_answer(tiny, name, tree):
    accepted = 0
    for seed in SEEDS:
        sampling = SamplingSettings(seed=seed, **SAMPLERS[name])
        expected = plain(tiny, sampling)
        OracleDrafter.truth, OracleDrafter.tree = expected, tree
        got, kept = decode(tiny, sampling, OracleDrafter(DraftSettings(adaptive=False)))
        assert got == expected, (name, seed)
        accepted += kept
    assert accepted > len(SEEDS) * ANSWER_TOKENS // 3, "drafts must be accepted to mean anything"


class SoftScript(ScriptedModel):
    """A scripted target whose logit on its script's token is 2.5 (others 0): in a
    12-token vocabulary about half its samples follow the script."""

    def __call__(self, inputs, cache):
        return super().__call__(inputs, cache) * 0.25


@pytest.mark.parametrize("name", list(SAMPLERS))
@pytest.mark.parametrize("drafter", ["prompt-lookup", "suffix", "ngram-simple"])
def test_real_drafters_keep_the_seeded_answer(name, drafter):
    """The n-gram drafters copy the periodic script the target mostly follows: often right,
    sometimes not."""
    script = [1 + (i % 7) for i in range(100)]
    model = SoftScript(script, vocab_size=12)
    accepted = 0
    for seed in SEEDS:
        sampling = SamplingSettings(seed=seed, **SAMPLERS[name])
        expected = plain(model, sampling, prompt=script[:30], count=50)
        settings = DraftSettings(drafter=drafter, draft_count=5, adaptive=False)
        got, kept = decode(model, sampling, make_drafter(settings), prompt=script[:30], count=50)
        assert got == expected, (name, drafter, seed)
        assert got != script[30:80], "the samples must leave the script for this to mean much"
        accepted += kept
    assert accepted > 0, "drafts must be accepted to mean anything"


def test_a_grammar_keeps_the_seeded_answer(tmp_path, tiny):
    from mlx_lm.tokenizer_utils import load

    from engine.formats.grammar import GrammarConstraint, json_schema_grammar

    write_byte_tokenizer(tmp_path)
    tokenizer = load(tmp_path)
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 8}},
        "required": ["name"],
    }
    prompt = list(tokenizer.encode('Answer {"name": "abab"} ' * 3, add_special_tokens=False))

    def constraint():
        return GrammarConstraint(tokenizer, json_schema_grammar(schema), 259)

    for seed in SEEDS:
        sampling = SamplingSettings(temperature=1.0, seed=seed)
        expected = plain(tiny, sampling, prompt=prompt, constraint=constraint())
        OracleDrafter.truth, OracleDrafter.tree = expected, False
        got, accepted = decode(
            tiny, sampling, OracleDrafter(DraftSettings()), prompt=prompt, constraint=constraint()
        )
        assert got == expected
        assert accepted > 0
        assert tokenizer.decode(expected).startswith('{"name":')


def test_the_adaptive_loop_keeps_the_seeded_answer(tiny_loaded, private_dirs):
    """Through a chat session with the adaptive policy (openings, queued and blind passes)
    on a flat curve, where long drafts pay: every drafter gives plain decoding's answer."""
    from engine.policy.verify_cost import curve_from_spec
    from engine.runtime.session import ChatSession

    session = ChatSession(tiny_loaded)

    def answer(drafter: str, seed: int) -> list[int]:
        request = GenerationRequest(
            prompt="abcabcabcabcabcabc",
            raw=True,
            max_tokens=30,
            draft=DraftSettings(drafter=drafter, cost_curve=curve_from_spec("flat-2pct")),
            sampling=SamplingSettings(temperature=0.7, seed=seed),
        ).validated()
        return list(session.generate(request))[-1].tokens

    for seed in SEEDS:
        expected = answer("none", seed)
        for drafter in ("default", "prompt-lookup", "ngrammys", "suffix"):
            assert answer(drafter, seed) == expected, (drafter, seed)
        assert answer("default", seed) == expected  # again, the policy having learned


def test_without_a_seed_answers_differ_and_mlx_seed_repeats_them(tiny):
    sampling = SamplingSettings(temperature=1.0)
    answers = {tuple(plain(tiny, sampling)) for _ in range(3)}
    assert len(answers) == 3
    mx.random.seed(7)
    first = plain(tiny, sampling)
    mx.random.seed(7)
    assert plain(tiny, sampling) == first


def test_the_draw_depends_on_the_seed_and_the_position_only():
    sampler = PositionSampler(SamplingSettings(temperature=1.0, seed=3))
    logits = mx.zeros((4, 50))
    together = sampler(logits, 10).tolist()
    apart = [sampler(logits[:1], 10 + i).item() for i in range(4)]
    assert together == apart
    assert len(set(together)) > 1  # flat logits: the noise alone decides, per position
    alone = [mx.random.gumbel((50,), key=position_key(3, 10 + i)) for i in range(4)]
    assert mx.array_equal(sampler.noise(4, 50, 10), mx.stack(alone)).item()
    assert not mx.array_equal(position_key(3, 10), position_key(3, 11)).item()
    assert not mx.array_equal(position_key(3, 11), position_key(4, 10)).item()


def test_top_k_and_min_p_leave_only_what_they_keep():
    sampler = PositionSampler(SamplingSettings(temperature=1.0, top_k=2, seed=1))
    logits = mx.array([[5.0, 4.0, 3.0, 2.0, 1.0, 0.0]])
    assert {sampler(logits, p).item() for p in range(200)} == {0, 1}
    sampler = PositionSampler(SamplingSettings(temperature=1.0, min_p=0.3, seed=1))
    assert {sampler(logits, p).item() for p in range(200)} == {0, 1}  # e^-1 > 0.3 > e^-2
