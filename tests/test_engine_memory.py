"""What the engine learns across chats belongs to its owner, and the first answer never waits
for a measurement."""

import asyncio
import threading
import time

import pytest

from engine.events import DoneEvent, PassEvent, ProgressEvent, TokenEvent
from engine.policy import adaptive, verify_cost
from engine.runtime.memory import EngineMemory
from engine.runtime.model_ngrams import model_key
from engine.runtime.service import EngineService
from engine.runtime.session import ChatSession
from engine.settings import DraftSettings, GenerationRequest

from .identity import reference_greedy
from .request_sent import log_when_sent


def chat(model_dir=None, drafter="prompt-lookup", max_tokens=24, **kwargs):
    return GenerationRequest(
        messages=[{"role": "user", "content": "abcabcabc abcabc abcabc"}],
        model=None if model_dir is None else str(model_dir),
        max_tokens=max_tokens,
        draft=DraftSettings(drafter=drafter, draft_count=4, adaptive=True),
        **kwargs,
    )


async def collect(stream):
    return [event async for event in stream]


def test_first_answer_without_a_cost_file_starts_at_once(tiny_loaded, tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLESS_CACHE_DIR", str(tmp_path / "cache"))
    assert not verify_cost.cost_path(model_key(tiny_loaded)).exists()

    def no_measuring(*args, **kwargs):
        raise AssertionError("an answer must not wait for the verify-cost measurement")

    monkeypatch.setattr(adaptive, "measurement_steps", no_measuring)  # the one measuring path
    memory = EngineMemory()
    events = list(ChatSession(tiny_loaded, memory).generate(chat().validated()))
    first_token = next(i for i, e in enumerate(events) if isinstance(e, TokenEvent))
    before = [e for e in events[:first_token] if isinstance(e, ProgressEvent)]
    assert all(e.stage == "prefill" for e in before), before  # no calibrate step, modal or not
    assert isinstance(events[-1], DoneEvent)
    curve = memory.adaptive.curve(model_key(tiny_loaded))
    assert not curve.measured  # the prior still: the answer decoded plainly


def test_service_measures_between_answers_and_answers_meanwhile(
    tiny_model_dir, tiny_loaded, tmp_path, monkeypatch
):
    monkeypatch.setenv("DRAFTLESS_CACHE_DIR", str(tmp_path / "cache"))
    # the plain greedy answer, computed before the engine thread runs MLX
    prompt = tiny_loaded.tokenizer.apply_chat_template(chat().messages, add_generation_prompt=True)
    plain = reference_greedy(tiny_loaded.model, prompt, 30)
    steps = []
    real_steps = adaptive.measurement_steps

    def counted(*args, **kwargs):
        for step in real_steps(*args, **kwargs):
            steps.append(len(steps))
            yield step

    monkeypatch.setattr(adaptive, "measurement_steps", counted)
    service = EngineService()
    try:
        first = asyncio.run(collect(service.generate(chat(tiny_model_dir))))
        assert {e.stage for e in first if isinstance(e, ProgressEvent)} <= {"prefill", "load"}
        assert isinstance(first[-1], DoneEvent)
        # the measurement began after the first answer; an answer asked for now is served
        # (between two of its steps) and is still plain greedy decoding
        deadline = time.monotonic() + 120
        while not steps and time.monotonic() < deadline:
            time.sleep(0.01)
        assert steps
        second = asyncio.run(collect(service.generate(chat(tiny_model_dir, max_tokens=30))))
        assert second[-1].tokens == plain
        key = model_key(tiny_loaded)
        saved = verify_cost.cost_path(key)  # the next launch starts measured
        while not (service.memory.adaptive.measured(key) and saved.exists()):
            assert time.monotonic() < deadline, "never measured and saved"
            time.sleep(0.05)
        assert adaptive.AdaptiveMemory().measured(key)
    finally:
        service.shutdown()


def test_two_services_in_one_process_learn_apart(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLESS_DATA_DIR", str(tmp_path / "data"))
    one, two = EngineService(), EngineService()
    try:
        events = asyncio.run(
            collect(one.generate(chat(tiny_model_dir, drafter="ngram-cache", chat_id="a")))
        )
        assert any(isinstance(e, PassEvent) for e in events)
        assert one.memory.adaptive.trackers and one.memory.adaptive.curves
        assert len(one.memory.stores) == 1  # the cross-chat n-gram cache of this model
        assert not two.memory.adaptive.trackers and not two.memory.adaptive.curves
        assert len(two.memory.stores) == 0
        saved = list((tmp_path / "data").rglob("*.json"))
        assert saved == []  # kept in memory until the next chat or shutdown
    finally:
        one.shutdown()
        two.shutdown()
    assert len(list((tmp_path / "data").rglob("*.json"))) == 1  # the shutdown saved it


def test_one_clients_text_never_reaches_another_clients_drafter(tiny_loaded, tmp_path, monkeypatch):
    """The cross-chat n-gram cache is the machine owner's (kept in files) or, for each client
    a server names, that client's own (in memory only)."""
    monkeypatch.setenv("DRAFTLESS_DATA_DIR", str(tmp_path / "data"))
    memory = EngineMemory()

    def chat_as(client, memory=memory):
        session = ChatSession(tiny_loaded, memory, client=client)
        events = list(session.generate(chat(drafter="ngram-cache").validated()))
        assert isinstance(events[-1], DoneEvent)
        return session.drafter._dynamic_store()

    alice = chat_as("alice")
    assert alice.counts.parts  # alice's chat taught her memory
    mallory = chat_as("mallory")
    alone = chat_as("mallory", EngineMemory())  # the same chat on a machine alice never used
    assert mallory is not alice and mallory.counts.parts == alone.counts.parts
    assert chat_as("alice") is alice  # alice's next chat finds her memory
    owner = chat_as(None)
    assert owner not in (alice, mallory)
    memory.flush()
    saved = list((tmp_path / "data").rglob("*.json"))
    assert [path.name for path in saved] == [owner.path.name]  # clients' memory is not saved
    assert all(memory.stores_for(f"client {i}") is not None for i in range(20))
    assert len(memory.client_stores) == 8  # the least recently served are forgotten


def test_no_measuring_step_starts_while_a_request_waits_or_runs(
    tiny_model_dir, tmp_path, monkeypatch
):
    """The request is sent while a measuring step runs (the third, which waits for it): that
    step finishes, and no other starts until the answer is over; then measuring resumes."""
    monkeypatch.setenv("DRAFTLESS_CACHE_DIR", str(tmp_path / "cache"))
    log = []  # ("step",) / ("step end",) / ("sent",) / ("answer",) / ("answered",)
    third_step, sent, resumed = threading.Event(), threading.Event(), threading.Event()
    real_steps = adaptive.measurement_steps

    def logged(*args, **kwargs):
        steps = real_steps(*args, **kwargs)
        while True:
            log.append(("step",))
            if ("answered",) in log:
                resumed.set()
            if log.count(("step",)) == 3:
                third_step.set()
                sent.wait(120)
            step = next(steps, None)
            log.append(("step end",))
            if step is None:
                return
            yield step

    real_generate = ChatSession.generate

    def answered(self, *args, **kwargs):
        log.append(("answer",))
        yield from real_generate(self, *args, **kwargs)
        log.append(("answered",))

    monkeypatch.setattr(adaptive, "measurement_steps", logged)
    monkeypatch.setattr(ChatSession, "generate", answered)
    service = EngineService()
    log_when_sent(service, third_step, sent, log)
    try:
        asyncio.run(collect(service.load(str(tiny_model_dir))))
        assert third_step.wait(120), "measuring never started"
        events = asyncio.run(collect(service.generate(chat(tiny_model_dir))))
        assert resumed.wait(120), "measuring never resumed after the answer"
    finally:
        service.shutdown()
    sent, begun, ended = log.index(("sent",)), log.index(("answer",)), log.index(("answered",))
    # the step running when the request came finishes first; none starts after the
    # request was sent until the answer is over
    assert ("step",) not in log[sent:ended], log[sent - 2 : ended + 2]
    assert log[sent - 1 : begun] == [("step",), ("sent",), ("step end",)], log[: begun + 1]
    done = events[-1]
    assert isinstance(done, DoneEvent)
    timing = done.timing
    assert 0 <= timing["waited_s"] <= timing["first_token_s"]


def test_the_first_token_counts_from_the_request_and_says_what_was_waiting():
    from engine.stats import DecodeStats, summary_line, with_wait

    stats = DecodeStats(prefill_s=0.04, first_pass_s=0.02, passes=1, emitted=1)
    timing = with_wait(stats.timing_dict(), 0.43)
    assert timing["first_token_s"] == 0.49 and timing["waited_s"] == 0.43
    assert "first token 0.49 s (0.43 s of it waiting)" in summary_line(stats.to_dict(), timing)
    again = DecodeStats.from_dict(stats.to_dict(), timing)  # a stored answer keeps both
    assert again.first_token_s == pytest.approx(0.49) and again.waited_s == 0.43
    assert again.first_pass_s == pytest.approx(0.02)
    no_wait = with_wait(stats.timing_dict(), 0.01)
    assert "waiting" not in summary_line(stats.to_dict(), no_wait)


def test_the_prompt_event_says_when_the_template_opened_a_think_block(tiny_loaded, monkeypatch):
    """A thinking template (Qwen3's, DeepSeek-R1's) ends the prompt with <think>: the
    answer's text starts inside the block, and only the engine can tell the app so."""
    from .tiny_model import CHATML

    def prompt_events(session):
        events = list(session.generate(chat(max_tokens=2).validated()))
        return [e for e in events if isinstance(e, ProgressEvent) and e.stage == "prefill"]

    session = ChatSession(tiny_loaded, EngineMemory())
    assert not any(e.thinking for e in prompt_events(session))
    template = tiny_loaded.tokenizer._tokenizer
    monkeypatch.setattr(
        template, "chat_template", CHATML.replace("assistant\n'", "assistant\n<think>\n'")
    )
    opened = prompt_events(session)
    assert opened and all(e.thinking for e in opened)
    again = prompt_events(session)  # the same prompt again: all of it in the cache
    assert [(e.done, e.total, e.thinking) for e in again] == [(again[0].total,) * 2 + (True,)]
