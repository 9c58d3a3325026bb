"""Work outside decoding passes is bounded: a model table (the N-Grammys bigram) is built
between requests, never inside one; every step of it stops when asked; its cache file is
data of one exact shape (anything else is kept aside and computed again); and stopping the
server ends its open requests at once."""

import asyncio
import http.client
import io
import json
import logging
import os
import pickle
import signal
import threading
import time

import numpy as np
import pytest

from engine import errors
from engine.events import DoneEvent, ErrorEvent, ProgressEvent
from engine.runtime.calibration import Calibrator
from engine.runtime.memory import EngineMemory
from engine.runtime.model_ngrams import BigramBuild, bigram_table, model_key, start_prefix
from engine.runtime.replay import replay_many
from engine.runtime.service import EngineService
from engine.runtime.session import ChatSession
from engine.settings import DraftSettings, GenerationRequest

from .server_process import Server
from .request_sent import log_when_sent

NGRAMMYS = DraftSettings(drafter="ngrammys", draft_count=4, adaptive=False, options={"rows": 4})
SMALL_STEP = 16  # rows per step in these tests: 17 steps for the tiny model's 259 tokens


@pytest.fixture(autouse=True)
def fresh_cache(private_dirs, monkeypatch):
    """A cache folder of the test's own (no table built yet) and warnings said afresh."""
    monkeypatch.setattr(errors, "_said", set())


def chat(model_dir=None, drafter=NGRAMMYS, **kwargs):
    kwargs.setdefault("max_tokens", 16)
    return GenerationRequest(
        messages=[{"role": "user", "content": "abcabcabc abcabc"}],
        model=None if model_dir is None else str(model_dir),
        draft=drafter,
        **kwargs,
    )


def run(stream):
    async def collect():
        return [event async for event in stream]

    return asyncio.run(collect())


def table_path(loaded):
    return BigramBuild(loaded.model, model_key(loaded), prefix=start_prefix(loaded.tokenizer)).path


def true_table(loaded):
    """The table computed directly, under another file name."""
    return bigram_table(loaded.model, "reference", prefix=start_prefix(loaded.tokenizer))


def logged_steps(monkeypatch, service_of=lambda: None, during=lambda finished_steps: None):
    """Make every build step ``SMALL_STEP`` rows (each calling ``during`` with the number of
    steps finished before it); the list returned gets, per step, (rows done after it,
    requests waiting or running during it)."""
    steps = []
    real_step = BigramBuild.step

    def step(self, rows=SMALL_STEP):
        service = service_of()
        requests = service.engine_thread.requests if service is not None else None
        finished = real_step(self, rows)
        during(len(steps))
        steps.append((self.done, requests))
        return finished

    monkeypatch.setattr(BigramBuild, "step", step)
    return steps


def wait_until(condition, what, seconds=120):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def table_notes(events):
    return [e for e in events if isinstance(e, ProgressEvent) and e.stage == "table"]


# ------------------------------------------------------------ hostile cache files
def npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def npz(table) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, table=table)
    return buffer.getvalue()


class RunsCode:
    """Unpickling it would create ``marker`` (proof that the file's code never runs)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.makedirs, (str(self.marker),))


def out_of_range(table):
    poisoned = table.copy()
    poisoned[5, 0] = 2**31 - 1
    return npy(poisoned)


HOSTILE = {
    "npz": npz,
    "pickle": lambda table, marker: pickle.dumps(RunsCode(marker)),
    "pickled object array": lambda table, marker: npy(np.array([RunsCode(marker)], dtype=object)),
    "truncated": lambda table: npy(table)[:-100],
    "trailing bytes": lambda table: npy(table) + b"\0" * 8,
    "empty": lambda table: b"",
    "int64": lambda table: npy(table.astype(np.int64)),
    "big-endian": lambda table: npy(table.astype(">i4")),
    "Fortran order": lambda table: npy(np.asfortranarray(table)),
    "wrong shape": lambda table: npy(table[:, :-1]),
    "transposed": lambda table: npy(np.ascontiguousarray(table.T)),
    "ids outside the vocabulary": out_of_range,
}


def plant(kind, loaded, marker):
    make = HOSTILE[kind]
    good = true_table(loaded)
    planted = make(good, marker) if make.__code__.co_argcount == 2 else make(good)
    path = table_path(loaded)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(planted)
    return path, planted, good


def engine_warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_planted_table_file_is_kept_aside_and_the_table_computed_again(
    kind, tiny_loaded, tmp_path, caplog
):
    marker = tmp_path / "code-ran"
    path, planted, good = plant(kind, tiny_loaded, marker)
    session = ChatSession(tiny_loaded, EngineMemory())  # builds tables inline
    events = list(session.generate(chat().validated()))
    assert isinstance(events[-1], DoneEvent) and events[-1].finish_reason == "length"
    assert session.drafter.attached_bigram and (session.drafter.bigram == good).all()
    kept = list(path.parent.glob(path.name + ".corrupt-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == planted
    assert (np.load(path, allow_pickle=False) == good).all()  # computed again and cached
    said = engine_warnings(caplog)
    assert len(said) == 1 and "Ignoring the bigram table" in said[0], said
    assert "computed again" in said[0]
    assert not marker.exists()


def test_a_planted_npz_does_not_fail_requests_to_the_service(tiny_model_dir, tiny_loaded, tmp_path):
    path, planted, good = plant("npz", tiny_loaded, tmp_path / "unused")
    service = EngineService()
    try:
        first = run(service.generate(chat(tiny_model_dir)))
        assert not any(isinstance(e, ErrorEvent) for e in first)
        assert isinstance(first[-1], DoneEvent) and first[-1].finish_reason == "length"
        assert [p.read_bytes() for p in path.parent.glob(path.name + ".corrupt-*")] == [planted]
        wait_until(path.exists, "the table was never built again")
        second = run(service.generate(chat(tiny_model_dir, chat_id="after")))
        assert service.sessions.kept(None, "after").drafter.attached_bigram
        assert (service.sessions.kept(None, "after").drafter.bigram == good).all()
        assert second[-1].tokens == first[-1].tokens  # lossless with or without it
    finally:
        service.shutdown()


# ------------------------------------------------------------ built between requests
def test_the_first_request_answers_without_the_table_and_a_later_one_gets_it(
    tiny_model_dir, tiny_loaded, monkeypatch
):
    good = true_table(tiny_loaded)
    service = None
    steps = logged_steps(monkeypatch, lambda: service)
    service = EngineService()
    try:
        first = run(service.generate(chat(tiny_model_dir, chat_id="c")))
        assert isinstance(first[-1], DoneEvent) and first[-1].finish_reason == "length"
        (note,) = table_notes(first)
        assert note.done == 0 and note.total == 259 and "background" in note.message
        assert not service.sessions.kept(None, "c").drafter.attached_bigram  # it answered without
        wait_until(lambda: steps and steps[-1][0] == 259, "the table was never built")
        assert len(steps) == 17 and table_path(tiny_loaded).exists()
        assert all(requests == 0 for _, requests in steps), steps  # never inside a request
        again = run(service.generate(chat(tiny_model_dir, chat_id="c")))
        fresh = run(service.generate(chat(tiny_model_dir, chat_id="d")))
        for chat_id, events in (("c", again), ("d", fresh)):
            assert table_notes(events) == []
            drafter = service.sessions.kept(None, chat_id).drafter
            assert drafter.attached_bigram and (drafter.bigram == good).all()
            assert events[-1].tokens == first[-1].tokens  # lossless with or without it
        assert len(steps) == 17  # built once
    finally:
        service.shutdown()


def test_a_request_sent_during_the_build_waits_at_most_one_step(tiny_model_dir, monkeypatch):
    """The request is sent while a step runs (the third, which waits for it): that step
    finishes, and no other starts until the answer is over; then the build resumes."""
    log = []  # ("step",) / ("step end",) / ("sent",) / ("answer",) / ("answered",)
    third_step, sent, resumed = threading.Event(), threading.Event(), threading.Event()
    real_step = BigramBuild.step

    def step(self, rows=4):  # 65 short steps
        log.append(("step",))
        if ("answered",) in log:
            resumed.set()
        if log.count(("step",)) == 3:
            third_step.set()
            sent.wait(120)
        finished = real_step(self, rows)
        log.append(("step end",))
        return finished

    real_generate = ChatSession.generate

    def answered(self, *args, **kwargs):
        log.append(("answer",))
        yield from real_generate(self, *args, **kwargs)
        log.append(("answered",))

    monkeypatch.setattr(BigramBuild, "step", step)
    monkeypatch.setattr(ChatSession, "generate", answered)
    monkeypatch.setattr(Calibrator, "measure_later", lambda self: None)  # tables only
    service = EngineService()
    log_when_sent(service, third_step, sent, log)
    try:
        run(service.generate(chat(tiny_model_dir)))  # asks for the table
        assert third_step.wait(120), "the build never started"
        events = run(service.generate(chat(tiny_model_dir, drafter=DraftSettings("none"))))
        assert resumed.wait(120), "the build never resumed after the answer"
    finally:
        service.shutdown()
    assert isinstance(events[-1], DoneEvent)
    sent = log.index(("sent",))
    begun = len(log) - 1 - log[::-1].index(("answer",))  # the second request's
    ended = len(log) - 1 - log[::-1].index(("answered",))
    # the step running when the request came finishes first; none starts after the
    # request was sent until the answer is over
    assert ("step",) not in log[sent:ended], log[sent - 2 : ended + 2]
    assert log[sent - 1 : begun] == [("step",), ("sent",), ("step end",)], log[: begun + 1]


def test_shutdown_during_the_build_stops_it_after_the_running_step(
    tiny_model_dir, tiny_loaded, monkeypatch
):
    """Shutdown is asked while the second step runs (which waits for it): no step follows."""
    second_step, stopping = threading.Event(), threading.Event()

    def during(finished_steps):
        if finished_steps == 1:
            second_step.set()
            stopping.wait(120)

    steps = logged_steps(monkeypatch, during=during)
    monkeypatch.setattr(Calibrator, "measure_later", lambda self: None)  # tables only
    service = EngineService()
    real_stop_jobs = service.engine_thread.stop_jobs

    def stop_jobs():
        real_stop_jobs()
        stopping.set()

    service.engine_thread.stop_jobs = stop_jobs
    try:
        run(service.generate(chat(tiny_model_dir)))
        assert second_step.wait(120), "the build never started"
    finally:
        service.shutdown()
    assert [done for done, _ in steps] == [SMALL_STEP, 2 * SMALL_STEP]
    assert not table_path(tiny_loaded).exists()


def test_a_request_building_its_table_inline_stops_when_asked_and_the_next_goes_on(
    tiny_loaded, monkeypatch
):
    steps = logged_steps(monkeypatch)
    session = ChatSession(tiny_loaded, EngineMemory())  # builds tables inline
    stopped = list(session.generate(chat().validated(), lambda: len(steps) >= 3))
    assert stopped[-1].finish_reason == "cancelled" and len(steps) == 3
    assert not session.drafter.attached_bigram
    resumed = list(session.generate(chat().validated()))
    notes = table_notes(resumed)
    assert notes[0].done == 3 * SMALL_STEP and notes[-1].done == notes[-1].total == 259
    assert len(steps) == 17 and session.drafter.attached_bigram
    assert resumed[-1].finish_reason == "length"


def test_the_server_builds_its_default_drafters_table_after_loading(tiny_model_dir, tiny_loaded):
    path = table_path(tiny_loaded)
    service = EngineService()
    try:
        run(service.load(str(tiny_model_dir)))
        service.build_tables_for(DraftSettings("prompt-lookup"))  # wants none
        service.build_tables_for(NGRAMMYS)
        wait_until(path.exists, "the table was never built")
        events = run(service.generate(chat(tiny_model_dir, chat_id="c")))
        assert (
            table_notes(events) == [] and service.sessions.kept(None, "c").drafter.attached_bigram
        )
    finally:
        service.shutdown()


def test_a_replay_stops_between_configurations_when_asked():
    configs = [DraftSettings("prompt-lookup", draft_count=k) for k in (2, 3, 4, 5)]
    asked = []

    def stop():
        asked.append(1)
        return len(asked) > 2

    results = replay_many([1, 2, 3, 1, 2], [3, 1, 2, 3], configs, should_stop=stop)
    assert len(results) == 2


# ------------------------------------------------------------ stopping the server
def stream_request(port, max_tokens):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = {
        "model": "default",
        "messages": [{"role": "user", "content": "abcabcabc"}],
        "max_tokens": max_tokens,
        "stream": True,
        "draftless": {"drafter": "none"},
    }
    connection.request(
        "POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"}
    )
    return connection


def test_stopping_the_server_ends_open_requests_at_once_without_tracebacks(tiny_model_dir):
    running = Server("--model", str(tiny_model_dir)).wait_ready()
    try:
        # four long answers: one runs, three wait for it
        connections = [stream_request(running.port, 4000) for _ in range(4)]
        first = connections[0].getresponse()
        assert first.status == 200
        first.readline()  # it is answering
        wait_until(lambda: running.health()["waiting"] == 3, "the others never queued")
        running.process.send_signal(signal.SIGTERM)
        bodies = [first.read().decode()]
        for connection in connections[1:]:
            response = connection.getresponse()
            bodies.append(response.read().decode())
        running.process.wait(timeout=60)
    finally:
        log = running.stop()
    assert "Traceback" not in log and "graceful shutdown exceeded" not in log, log
    assert running.process.returncode == 130 and "interrupted" in log  # the orderly way out
    # the running answer was cut short (streamed text but no 4000 tokens), the others ended
    # without running
    assert '"finish_reason":"length"' not in bodies[0].replace(" ", "")
