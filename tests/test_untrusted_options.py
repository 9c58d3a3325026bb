"""Requests never name paths or size shared memory; files in the engine's folders cannot
block or crash it."""

import os
import threading

import pytest

from engine.drafters import DRAFTERS, make_drafter, ngram_cache
from engine.errors import EngineError
from engine.settings import DraftSettings, GenerationRequest

pytestmark = pytest.mark.usefixtures("private_dirs")  # conftest: a data and cache folder per test


@pytest.mark.parametrize(
    "options",
    [
        {"dynamic_path": "/etc/passwd"},
        {"static_path": "/tmp/fifo"},
        {"max_entries": 50_000_000},  # would have become the size of the memory every chat shares
        {"path": "x"},
    ],
)
def test_options_that_name_paths_or_size_shared_memory_are_refused(options, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    options = {key: (str(victim) if "path" in key else value) for key, value in options.items()}
    request = GenerationRequest(
        prompt="hi", raw=True, draft=DraftSettings(drafter="ngram-cache", options=options)
    )
    with pytest.raises(EngineError, match="unknown option"):
        request.validated()
    assert victim.read_text() == "keep me" and [p.name for p in tmp_path.iterdir()] == [
        "victim.txt"
    ]


@pytest.mark.parametrize(
    "drafter, options, message",
    [
        ("frequency", {"history_window": "abc"}, "history_window"),
        ("ngram-cache", {"dynamic": "no"}, "true or false"),
        ("suffix", {"min_prob": [0.1]}, "min_prob"),
        ("suffix", {"locality": "far"}, "locality"),
        ("suffix", {"locality": -1}, "locality"),
        ("suffix", {"locality": 100_000}, "locality"),  # every pass would scan that far
        ("ngram-simple", {"n": 2.5}, "an integer"),
        ("ngram-simple", {"n": True}, "an integer"),
        ("prompt-lookup", {"n": 3}, "takes: none"),
    ],
)
def test_ill_typed_or_unknown_options_are_clear_errors(drafter, options, message):
    with pytest.raises(EngineError, match=message):
        DraftSettings(drafter=drafter, options=options).validated()


def test_adaptive_must_be_a_boolean():
    with pytest.raises(EngineError, match="adaptive must be true or false"):
        DraftSettings(adaptive="no").validated()


def test_a_drafter_name_that_is_no_string_is_a_clear_error():
    with pytest.raises(EngineError, match="Unknown drafter"):
        DraftSettings(drafter=["suffix"]).validated()


def test_every_drafter_declares_its_options_and_takes_its_defaults():
    for name, cls in DRAFTERS.items():
        checked = cls.check_options({})
        assert checked == {key: spec.default for key, spec in cls.options.items()}, name
        make_drafter(DraftSettings(drafter=name).validated())


def test_a_fifo_where_the_memory_file_belongs_neither_blocks_nor_is_written_into(caplog):
    path = ngram_cache.dynamic_cache_path("m")
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    drafter = make_drafter(DraftSettings(drafter="ngram-cache"))
    attached = threading.Event()

    def attach():
        drafter.attach_model("m")
        drafter.reset([1, 2, 1, 2])
        attached.set()

    threading.Thread(target=attach, daemon=True).start()
    assert attached.wait(10), "reading the n-gram memory blocked on a FIFO"
    assert "not a regular file" in caplog.text
    assert list(path.parent.glob("m.json.corrupt-*"))  # the FIFO was moved aside
    drafter.observe([1, 2])
    drafter.flush()
    assert path.is_file()  # a fresh memory file in its place
