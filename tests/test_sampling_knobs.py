"""The app's sampling knobs (top-k, min-p, repeat penalty, stop strings): what the panel
sets reaches the engine, stays lossless with speculation, survives a restart, and a bad
saved value is named, never a crash. No Qt here: the settings and the engine only."""

from __future__ import annotations

import json

import pytest

from app.storage.settings import (
    AppSettings,
    SettingsStore,
    stop_strings_from_text,
    stop_strings_text,
)
from engine.settings import DraftSettings

from .identity import reference_greedy, reference_greedy_with_processors, speculative
from .tiny_model import make_tiny_llama

# strong enough to change a tiny random model's greedy output (test_engine_identity uses 5.0)
PENALTY = 5.0


def test_greedy_with_the_apps_repeat_penalty_is_lossless_with_speculation():
    from mlx_lm.sample_utils import make_logits_processors

    model = make_tiny_llama(seed=1, layers=2, hidden=64)
    prompt = [40 + (i % 9) for i in range(60)]  # repetitive: drafts get accepted
    sampling = (
        AppSettings(repetition_penalty=PENALTY, top_k=5, min_p=0.1)
        .request([{"role": "user", "content": "x"}])
        .sampling
    )
    assert (sampling.repetition_penalty, sampling.top_k, sampling.min_p) == (PENALTY, 5, 0.1)
    plain = reference_greedy_with_processors(
        model, prompt, 40, make_logits_processors(repetition_penalty=PENALTY)
    )
    assert plain != reference_greedy(model, prompt, 40), "the penalty must change the output"
    accepted = 0
    for drafter in ("prompt-lookup", "frequency"):
        draft = DraftSettings(drafter=drafter, draft_count=4, adaptive=False)
        got, results = speculative(model, prompt, 40, draft, sampling.validated())
        assert got == plain
        accepted += sum(r.accepted for r in results)
    assert accepted > 0, "no draft was accepted: the test would prove nothing"


def test_the_repeat_penalty_is_off_by_default():
    sampling = AppSettings().request([{"role": "user", "content": "x"}]).sampling
    assert (sampling.top_k, sampling.min_p, sampling.repetition_penalty) == (0, 0.0, None)
    assert AppSettings().stop_strings == ()


def test_the_knobs_survive_a_restart(tmp_path):
    knobs = AppSettings(top_k=40, min_p=0.05, repetition_penalty=1.1, stop_strings=("\n\n", "##"))
    SettingsStore(tmp_path).save(knobs)
    store = SettingsStore(tmp_path)
    assert store.load() == knobs and store.message is None


@pytest.mark.parametrize(
    "field,value,words",
    [
        ("top_k", "many", "top_k"),
        ("top_k", -3, "top_k must be from 0"),
        ("min_p", 1.5, "min_p must be from 0.0 to 1.0"),
        ("repetition_penalty", 0.5, "repetition_penalty must be from 1.0"),
        ("stop_strings", ["a", "b", "c", "d", "e"], "at most 4 stop strings"),
        ("stop_strings", [""], "at most 4 stop strings"),
        ("stop_strings", "User:", "stop_strings"),
    ],
)
def test_a_bad_saved_knob_is_named_and_reset(tmp_path, field, value, words):
    (tmp_path / "settings.json").write_text(json.dumps({field: value, "top_p": 0.9}))
    store = SettingsStore(tmp_path)
    settings = store.load()
    assert getattr(settings, field) == getattr(AppSettings(), field)
    assert settings.top_p == 0.9  # the good values stay
    assert words in store.message and "reset to their defaults" in store.message


@pytest.mark.parametrize("stops", [("\n\n",), ("a\\nb", "User:", "\t\\"), ()])
def test_stop_strings_are_written_one_a_line_and_read_back(stops):
    text = stop_strings_text(stops)
    assert text.count("\n") == max(len(stops) - 1, 0)
    assert stop_strings_from_text(text) == stops
