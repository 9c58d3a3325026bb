"""Files from disk and ids from drafters are untrusted: bad ones never reach MLX, bad files
are kept aside and named once, broken weights are refused at load."""

import json
import os
import subprocess
import sys
import logging

import pytest

from engine.loop.decode import Target, TokenChooser, speculative_decode
from engine.drafters import make_drafter
from engine.drafters import ngram_cache
from engine.drafters.base import Drafter, Proposal
from engine.drafters.ngram_cache import NgramCounts
from engine import errors
from engine.errors import EngineError
from engine.settings import DraftSettings, SamplingSettings
from engine.tokens import DraftGate, is_token_id

from .tiny_model import make_tiny_llama, write_tiny_llama

VOCAB = 259  # tests/tiny_model.py's byte-level vocabulary
BAD_IDS = [-1, 2**40, VOCAB, VOCAB + 5, 4294967295, True, 3.0, "7", None]


@pytest.fixture(autouse=True)
def private_dirs_and_warnings(private_dirs, monkeypatch):
    monkeypatch.setattr(errors, "_said", set())


def said(caplog) -> list[str]:
    """The engine's warnings so far (each is one line for the person)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "engine" and r.levelno == logging.WARNING
    ]


# ---------------------------------------------------------------- one gate for ids
def test_the_gate_keeps_only_integers_inside_the_vocabulary(caplog):
    assert all(not is_token_id(bad, VOCAB) for bad in BAD_IDS)
    assert is_token_id(0, VOCAB) and is_token_id(VOCAB - 1, VOCAB)
    gate = DraftGate(VOCAB, "test")
    rows = gate.rows([[5, 6], [7, -1, 8], [4294967295], [9, 3.0], "ab", [VOCAB + 5]])
    gate.rows([[2**40]])  # a later pass: no second warning
    assert rows == [[5, 6], [7], [], [9], [], []]  # cut at the first bad id
    assert len(said(caplog)) == 1
    assert "not in this model's vocabulary" in said(caplog)[0]


class PoisonDrafter(Drafter):
    """Proposes ids outside the vocabulary (as a damaged memory file would make it)."""

    name = "poison"
    summary = "test"

    def __init__(self, settings, bad):
        super().__init__(settings)
        self.bad = bad

    def reset(self, prompt_tokens):
        pass

    def propose(self, k):
        return Proposal([[self.bad] + [1] * (k - 1)])

    def observe(self, emitted, **_):
        pass


def greedy(model, drafter, prompt, max_tokens=12):
    target = Target(model)
    target.prefill(prompt[:-1])
    history = list(prompt)
    results = list(
        speculative_decode(
            target,
            drafter,
            TokenChooser(SamplingSettings()),
            history,
            max_tokens=max_tokens,
            draft_count=3,
            eos_tokens=set(),
        )
    )
    return history[len(prompt) :], results


@pytest.mark.parametrize("bad", [-1, 2**40, VOCAB, VOCAB + 5])
def test_no_drafter_can_put_an_out_of_vocabulary_id_into_a_verify_pass(bad, caplog):
    model = make_tiny_llama(VOCAB, seed=4)
    prompt = [3, 70, 71, 72, 70, 71]
    plain, _ = greedy(model, make_drafter(DraftSettings(drafter="none", adaptive=False)), prompt)
    tokens, results = greedy(model, PoisonDrafter(DraftSettings(adaptive=False), bad), prompt)
    assert tokens == plain  # lossless: the bad drafts were dropped, decoding went on
    assert all(r.drafted == 0 for r in results)
    assert len(said(caplog)) == 1  # once, not once per pass


def poisoned_memory(path, bad_id, good=True):
    """A dynamic n-gram memory that proposes ``bad_id`` after every byte token."""
    entries = [[[t], [bad_id, 50]] for t in range(VOCAB)]
    if good:
        entries.append([[65, 66], [67, 3]])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"format": "draftless-ngram-cache", "version": 1, "entries": entries})
    )


def memory_drafter(model_key="m", vocab_size=None):
    """An ngram-cache drafter attached to ``model_key``: its cross-chat file is
    ``dynamic_cache_path(model_key)`` in the test's data folder."""
    d = make_drafter(DraftSettings(drafter="ngram-cache", adaptive=False))
    d.attach_model(model_key, vocab_size=vocab_size)
    return d


def test_a_poisoned_memory_file_loses_only_its_bad_entries(private_dirs, caplog):
    path = ngram_cache.dynamic_cache_path("m")
    poisoned_memory(path, 4294967295)
    original = path.read_bytes()
    d = memory_drafter("m", vocab_size=VOCAB)
    d.reset([65, 66])
    assert d.propose(4).rows == [[67]]  # from the good entry; nothing from the bad ones
    warnings = said(caplog)
    assert len(warnings) == 1 and "outside this model's vocabulary" in warnings[0]
    kept = list(path.parent.glob("m.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == original
    assert kept[0].name in warnings[0]  # named in the warning
    assert d.store.counts.parts == {(65, 66): {67: 3}}  # the good entry survived
    d.flush()
    assert NgramCounts.load(path).parts == {(65, 66): {67: 3}}


def test_a_poisoned_memory_file_does_not_crash_the_cli(tiny_loaded, tiny_model_dir, tmp_path):
    """4294967295 in the memory file must not reach the model (MLX would crash)."""
    from engine.runtime.model_ngrams import model_key

    data = tmp_path / "data"
    memory = data / "ngram-cache" / f"{model_key(tiny_loaded)}.json"
    poisoned_memory(memory, 4294967295)
    env = dict(
        os.environ,
        PYTHONPATH=os.getcwd(),
        DRAFTLESS_DATA_DIR=str(data),
        DRAFTLESS_CACHE_DIR=str(tmp_path / "cache"),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine",
            "generate",
            "--model",
            str(tiny_model_dir),
            "--prompt",
            "ABABAB",
            "--drafter",
            "ngram-cache",
            "--max-tokens",
            "8",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["tokens"]) == 8
    assert result.stderr.count("n-gram memory") == 1, result.stderr
    assert list(memory.parent.glob(memory.name + ".corrupt-*"))


def test_a_prompt_id_the_model_lacks_is_a_clear_error(tiny_loaded):
    from engine.tokens import check_prompt

    assert check_prompt([1, 2, VOCAB - 1], VOCAB, "tiny") == [1, 2, VOCAB - 1]
    with pytest.raises(EngineError, match="tokenizer files do not match the weights"):
        check_prompt([1, VOCAB], VOCAB, "tiny")


# ---------------------------------------------------------------- garbage memory
def test_a_garbage_memory_file_is_kept_aside_not_overwritten_and_said_once(private_dirs, caplog):
    path = ngram_cache.dynamic_cache_path("m")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff{garbage")
    d = memory_drafter()
    d.reset([1, 2, 1, 2, 1])
    d.observe([2, 1, 2])
    d.reset([0])  # saves the new memory
    d.flush()  # as the service does at shutdown
    warnings = said(caplog)
    assert len(warnings) == 1, warnings
    kept = list(path.parent.glob("m.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == b"\xff{garbage"
    assert kept[0].name in warnings[0]
    assert len(NgramCounts.load(path)) > 0  # the new memory beside it


def test_the_warning_is_printed_once_on_stderr(private_dirs):
    path = ngram_cache.dynamic_cache_path("m")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    code = (
        "from engine.drafters import make_drafter; from engine.settings import DraftSettings; "
        "d = make_drafter(DraftSettings(drafter='ngram-cache')); d.attach_model('m'); "
        "d.reset([1, 2]); d.observe([3])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=os.getcwd()),
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "m.json" in line]
    assert len(lines) == 1, result.stderr


def test_a_memory_file_that_cannot_be_moved_aside_is_never_written_over(
    private_dirs, monkeypatch, caplog
):
    path = ngram_cache.dynamic_cache_path("m")
    path.parent.mkdir(parents=True)
    path.write_text("[1, 2")

    def refuse(_):
        raise PermissionError("read-only folder")

    monkeypatch.setattr(ngram_cache, "move_aside", refuse)
    d = memory_drafter()
    d.reset([1, 2, 1, 2])
    assert "will not be written over" in caplog.text
    d.observe([1, 2, 1])
    d.flush()
    d.stores.flush()  # and the owner's stores, as at shutdown
    assert path.read_text() == "[1, 2"
    assert d.propose(2).rows == [[2, 1]]  # this chat still drafts from its context


# ---------------------------------------------------------------- broken weights
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_weights_with_nan_or_inf_are_refused_at_load(tmp_path, value):
    import mlx.core as mx

    from engine.models import load_model

    folder = write_tiny_llama(tmp_path / "broken")
    weights = mx.load(str(folder / "model.safetensors"))
    name = "model.layers.1.mlp.down_proj.weight"
    broken = mx.array(weights[name])
    broken[3, 5] = value
    weights[name] = broken
    mx.save_safetensors(str(folder / "model.safetensors"), weights)
    with pytest.raises(EngineError, match="weights are broken"):
        load_model(str(folder))


def test_healthy_weights_load(tiny_loaded):
    from engine.tokens import logits_are_finite, output_size

    assert logits_are_finite(tiny_loaded.model)
    assert output_size(tiny_loaded.model) == VOCAB


# ---------------------------------------------------------------- verify-cost file
@pytest.mark.parametrize(
    "text",
    [
        '{"version":1,"seconds":{"0":0.05}}',  # the reported one: ZeroDivisionError in every answer
        '{"version":1,"seconds":{"1":0}}',
        '{"version":1,"seconds":{"1":-0.01,"2":0.02}}',
        '{"version":1,"seconds":{"1":NaN}}',
        '{"version":1,"seconds":{"1":1e999}}',
        '{"version":1,"seconds":{"1":0.05,"8":0.0001}}',  # far from monotone
        '{"version":1,"seconds":{"2":0.05,"4":0.06}}',  # no one-token time
        '{"version":1,"seconds":{"x":0.05}}',
        '{"version":1,"seconds":{"1":"fast"}}',
        '{"version":1,"seconds":[]}',
        '{"version":1,"seconds":{}}',
        '[1, 2]',
        '{"version":1,"seconds":{"-1":0.05}}',
        '{"version":1,"seconds":{"1":1' + "0" * 400 + "}}",  # too large for a float
    ],
)
def test_a_bad_verify_cost_file_is_set_aside_and_measured_again(
    text, tmp_path, monkeypatch, caplog
):
    from engine.policy import adaptive, verify_cost

    path = verify_cost.cost_path("bad-cost")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    assert verify_cost.load_cost_curve("bad-cost") is None
    assert len(said(caplog)) == 1 and "measured again" in said(caplog)[0]
    kept = list(path.parent.glob(path.name + ".corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text() == text
    memory = adaptive.AdaptiveMemory()
    assert not memory.measured("bad-cost")  # the prior shape until measured again
    for _ in memory.measure_in_steps("bad-cost", Target(make_tiny_llama(VOCAB, seed=3)), 3):
        pass  # as the service measures, between answers
    curve = memory.curve("bad-cost")
    assert curve.measured and curve(1) > 0 and curve(9) > 0
    assert verify_cost.validated_cost_points(json.loads(path.read_text()))  # a sane new file


def test_a_sane_verify_cost_file_is_used_as_it_is():
    from engine.policy import verify_cost

    path = verify_cost.cost_path("good-cost")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"version":1,"seconds":{"1":0.05,"2":0.049,"8":0.09}}')  # noise is fine
    curve = verify_cost.load_cost_curve("good-cost")
    assert curve.lengths == [1, 2, 8]


def test_an_answer_after_a_bad_verify_cost_file_works(tiny_loaded, monkeypatch):
    """An answer after a bad verify-cost file works (no ZeroDivisionError from the curve)."""
    from engine.policy import verify_cost
    from engine.events import DoneEvent
    from engine.runtime.session import ChatSession
    from engine.settings import GenerationRequest

    session = ChatSession(tiny_loaded)
    path = verify_cost.cost_path(session.model_key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"version":1,"seconds":{"0":0.05}}')
    request = GenerationRequest(
        prompt="abcabcabc", raw=True, max_tokens=6, draft=DraftSettings(drafter="prompt-lookup")
    ).validated()
    events = list(session.generate(request))
    assert isinstance(events[-1], DoneEvent) and len(events[-1].tokens) == 6


def test_a_bigram_table_with_ids_outside_the_vocabulary_is_computed_again(caplog):
    import numpy as np

    from engine.runtime import model_ngrams

    model = make_tiny_llama(VOCAB, seed=2)
    table = model_ngrams.bigram_table(model, "tiny-poison", top=4, batch=128)
    path = model_ngrams.bigram_path("tiny-poison", 4)
    poisoned = table.copy()
    poisoned[5, 0] = 2**31 - 1
    np.save(path, poisoned, allow_pickle=False)
    again = model_ngrams.bigram_table(model, "tiny-poison", top=4, batch=128)
    assert (again == table).all()
    assert "outside 0..258" in caplog.text
