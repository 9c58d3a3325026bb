"""`python -m engine serve` through the official openai client, on a free local port."""

import asyncio
from types import SimpleNamespace
import http.client
import json
import time

import openai
import pytest

from engine.server.queue import FairQueue, QueueFull

from .server_process import Server, request
from .test_cli import engine_cli


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    running = Server("--model", str(tiny_model_dir), "--max-queue", "1").wait_ready()
    yield running
    running.stop()


def client(server, key="unused"):
    return openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=120)


def pass_figures(chunks) -> list[dict]:
    """Each pass's figures in a stream, in order: a chunk's ``earlier`` passes (which
    showed nothing, so sent no chunk of their own), then its own pass."""
    figures = []
    for chunk in chunks:
        shown = (chunk.model_extra or {}).get("draftless") or {}
        figures += shown.get("earlier", [])
        if "pass" in shown:
            figures.append({k: v for k, v in shown.items() if k != "earlier"})
    return figures


def cli_tokens(model_dir, prompt, *args):
    result = engine_cli("generate", "--model", str(model_dir), "--prompt", prompt, "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("drafter", ["none", "prompt-lookup", "ngrammys"])
def test_chat_greedy_equals_cli_generate_streamed_and_not(server, tiny_model_dir, drafter):
    expected = cli_tokens(
        tiny_model_dir,
        "abcabcabc",
        "--drafter",
        drafter,
        "--draft-count",
        "3",
        "--max-tokens",
        "24",
    )
    chat = client(server).chat.completions
    settings = dict(
        model="default",
        messages=[{"role": "user", "content": "abcabcabc"}],
        max_tokens=24,
        temperature=0,
        extra_body={"draftless": {"drafter": drafter, "draft_count": 3}},
    )
    whole = chat.create(**settings)
    assert whole.choices[0].message.content == expected["text"]
    assert whole.model_extra["draftless"]["tokens"] == expected["tokens"]
    assert whole.usage.completion_tokens == 24
    assert whole.choices[0].finish_reason == "length"

    chunks = list(chat.create(stream=True, stream_options={"include_usage": True}, **settings))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == expected["text"]
    passes = pass_figures(chunks)
    assert [t for p in passes for t in p["tokens"]] == expected["tokens"]
    for p in passes:  # provenance: the accepted drafts lead each pass, the target's token ends it
        assert p["from_draft"] == [True] * p["accepted"] + [False] * (
            len(p["tokens"]) - p["accepted"]
        )
        assert set(p["pass_index"]) == {p["pass"]}
    stats = chunks[-1].usage.model_extra["draftless"]
    # (passes may differ from the CLI's: adaptive draft length learns within a process)
    assert stats["passes"] == len(passes)
    assert stats["tokens_per_pass"] == pytest.approx(24 / len(passes), abs=1e-4)
    assert chunks[-1].choices == [] and chunks[-2].choices[0].finish_reason == "length"


def test_text_completion_equals_raw_generate(server, tiny_model_dir):
    expected = cli_tokens(
        tiny_model_dir, "xyzxyzxyz", "--raw", "--drafter", "suffix", "--max-tokens", "16"
    )
    answer = client(server).completions.create(
        model="default",
        prompt="xyzxyzxyz",
        max_tokens=16,
        temperature=0,
        extra_body={"draftless": {"drafter": "suffix"}},
    )
    assert answer.choices[0].text == expected["text"]
    assert answer.model_extra["draftless"]["tokens"] == expected["tokens"]


def test_a_seeded_answer_is_the_same_every_time_and_plain_decodings(server):
    """Three runs of one seeded request (the server's default drafter, its policy learning
    between them) give one answer: plain decoding's for that seed (drafter none), and
    Ollama's options.seed gives it too."""
    prompt = "abcabcabc abcabcabc abcabcabc"

    def answer(drafter=None):
        extra = {"draftless": {"drafter": drafter}} if drafter else {}
        reply = client(server).chat.completions.create(
            model="default",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=25,
            temperature=1,
            seed=42,
            extra_body=extra,
        )
        return tuple(reply.model_extra["draftless"]["tokens"]), reply.choices[0].message.content

    answers = {answer() for _ in range(3)} | {answer("suffix"), answer("ngrammys")}
    assert answers == {answer("none")}
    status, body = request(
        server.port,
        "POST",
        "/api/generate",
        {
            "model": "default",
            "prompt": prompt,
            "stream": False,
            "options": {"seed": 42, "temperature": 1, "num_predict": 25},
        },
    )
    assert status == 200 and body["response"] == answers.pop()[1]


def test_models_and_health(server, tiny_model_dir):
    assert [m.id for m in client(server).models.list()] == [tiny_model_dir.name]
    (card,) = client(server).models.list()
    assert card.created == int(tiny_model_dir.stat().st_mtime)  # the model folder's time
    assert server.health()["status"] == "ok"


@pytest.mark.parametrize(
    "extra,message",
    [
        ({"draftless": {"draft_count": 0}}, "draft_count must be"),
        ({"draftless": {"drafter": "telepathy"}}, "Unknown drafter"),
        ({"draftless": {"speed": "fast"}}, "Unknown draftless setting"),
        ({"n": 3}, "Only n=1"),
        ({"temperature": 9}, "temperature must be"),
        ({"max_tokens": 10**9}, "max_tokens must be"),
        ({"frobnicate": True}, "Unsupported field"),
        ({"top_logprobs": 3}, "needs 'logprobs'"),
        ({"logprobs": True, "top_logprobs": 21}, "from 0 to 20"),
        ({"presence_penalty": 3}, "presence_penalty must be"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"response_format": {"type": "xml"}}, "response_format"),
        ({"modalities": ["text", "audio"]}, "text only"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "'audio' is not supported"),
        ({"web_search_options": {}}, "'web_search_options' is not supported"),
        ({"reasoning_effort": 3}, "'reasoning_effort' must be a string"),
    ],
)
def test_invalid_settings_are_400(server, extra, message):
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(
            model="default", messages=[{"role": "user", "content": "hi"}], extra_body=extra
        )
    assert message in caught.value.message
    assert "Traceback" not in caught.value.message


@pytest.mark.parametrize(
    "extra,param",
    [
        ({"max_tokens": 10**9}, "max_tokens"),
        ({"max_completion_tokens": 0}, "max_completion_tokens"),
        ({"top_p": 3.0}, "top_p"),
        ({"draftless": {"draft_count": 0}}, "draftless.draft_count"),
    ],
)
def test_a_range_error_names_its_param(server, extra, param):
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(
            model="default", messages=[{"role": "user", "content": "hi"}], extra_body=extra
        )
    assert caught.value.body["param"] == param


def test_retry_after_is_the_expected_wait():
    """A 429 says when a turn is likely: the answers ahead at the recent answers' mean."""
    from engine.server.requests import ApiError, Defaults
    from engine.server.state import ServerOptions, ServerState

    state = ServerState(None, ServerOptions("m", Defaults(), max_queue=1))
    state.stats.held_seconds.extend([3.0, 5.0])

    async def scenario():
        await state.queue.acquire("a")  # running
        waiting = asyncio.ensure_future(state.queue.acquire("b"))
        await asyncio.sleep(0)
        with pytest.raises(ApiError) as caught:
            await state.take_turn(SimpleNamespace(generation=SimpleNamespace(client="c")))
        waiting.cancel()
        return caught.value

    refused = asyncio.run(scenario())
    assert refused.status == 429 and refused.retry_after == 8  # 2 ahead at 4 s each
    assert refused.headers() == {"Retry-After": "8"} and "about 8 s" in refused.message


def test_one_partys_grammars_are_prepared_one_at_a_time_beside_other_partys():
    """A grammar's trial compile runs before the request's turn in the queue, so the queue's
    one place per party no longer bounds it: one address's schemas wait for each other
    there, and never for another address's."""
    from engine.server.requests import Defaults
    from engine.server.state import ServerOptions, ServerState
    from engine.settings import GenerationRequest

    class Preparing:
        def __init__(self):
            self.running: list[str] = []
            self.together: list[list[str]] = []

        async def prepare(self, request):
            self.running.append(request.client)
            self.together.append(sorted(self.running))
            await asyncio.sleep(0.05)
            self.running.remove(request.client)

    service = Preparing()
    state = ServerState(service, ServerOptions("m", Defaults(), max_queue=4))

    def parsed(client, schema=True):
        generation = GenerationRequest(
            prompt="x", client=client, json_schema={"type": "integer"} if schema else None
        )
        return SimpleNamespace(generation=generation)

    async def scenario():
        await asyncio.gather(
            *(state.prepare(parsed(client)) for client in ("a.1", "a.2", "a.1", "b.1")),
            state.prepare(parsed("a.1", schema=False)),  # no grammar: nothing to wait for
        )

    asyncio.run(scenario())
    assert len(service.together) == 4 and state.preparing == {}
    assert all(sum(c.startswith("a.") for c in t) <= 1 for t in service.together)
    assert ["a.1", "b.1"] in service.together  # b's beside one of a's


def test_hints_and_nulls_that_sdks_and_proxies_send_are_accepted(server):
    """OpenAI documents these as hints a server may ignore (or nulls asking for nothing);
    newer SDKs and proxies send them, so they answer like a request without them."""
    plain = client(server).chat.completions.create(
        model="default", messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=0
    )
    hinted = client(server).chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=4,
        temperature=0,
        extra_body={
            "reasoning_effort": "low",
            "verbosity": "low",
            "prediction": {"type": "content", "content": "hello"},
            "prompt_cache_key": "k",
            "safety_identifier": "user-1",
            "modalities": ["text"],
            "audio": None,
            "web_search_options": None,
        },
    )
    assert hinted.choices[0].message.content == plain.choices[0].message.content


def test_unknown_model_is_404(server):
    with pytest.raises(openai.NotFoundError) as caught:
        client(server).chat.completions.create(
            model="gpt-17", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.code == "model_not_found"


def test_bad_json_too_large_and_unknown_route(server):
    status, body = request(server.port, "POST", "/v1/chat/completions", b"{not json")
    assert status == 400 and "not valid JSON" in body["error"]["message"]
    big = {"messages": [{"role": "user", "content": "a" * (1 << 21)}]}
    status, body = request(server.port, "POST", "/v1/chat/completions", big)
    assert status == 413 and body["error"]["code"] == "request_too_large"
    status, body = request(server.port, "GET", "/v1/nowhere")
    assert status == 404 and "error" in body


def test_context_overflow_is_a_400_with_the_reason(server):
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).completions.create(model="default", prompt="a" * 4000, max_tokens=500)
    assert "reads at most" in caught.value.message


def open_stream(port, max_tokens):
    """A streaming request whose response is left unread (the client keeps it open)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = {
        "prompt": "abc",
        "max_tokens": max_tokens,
        "stream": True,
        "temperature": 0,
        "draftless": {"drafter": "none"},
    }
    connection.request(
        "POST",
        "/v1/completions",
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    response = connection.getresponse()
    assert response.status == 200
    assert response.readline().startswith(b"data: ")
    return connection, response


def wait_idle(server, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        health = server.health()
        if not health["running"] and not health["waiting"]:
            return health
        time.sleep(0.1)
    raise AssertionError(f"still busy: {server.health()}")


def test_disconnect_mid_stream_cancels_and_a_full_queue_is_429(server):
    before = server.health()["finished"].get("cancelled", 0)
    first, _ = open_stream(server.port, 4000)  # runs
    # --max-queue 1: one more may wait, the next is refused
    waiting = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    waiting.request(
        "POST",
        "/v1/completions",
        body=json.dumps(
            {"prompt": "abc", "max_tokens": 4, "draftless": {"drafter": "none"}}
        ).encode(),
        headers={"Content-Type": "application/json"},
    )
    deadline = time.monotonic() + 30
    while server.health()["waiting"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(openai.RateLimitError) as caught:
        client(server).completions.create(model="default", prompt="abc", max_tokens=2)
    assert caught.value.code == "queue_full"
    assert int(caught.value.response.headers["retry-after"]) >= 1
    first.sock.close()  # the client goes away mid-stream
    first.close()
    assert waiting.getresponse().status == 200  # the waiting request then gets its turn
    waiting.close()
    health = wait_idle(server)
    assert health["finished"].get("cancelled", 0) == before + 1


def test_disconnect_cancels_at_the_next_pass(server):
    connection, response = open_stream(server.port, 4000)
    response.readline()
    connection.sock.close()
    connection.close()
    health = wait_idle(server)
    assert health["last"]["finish_reason"] == "cancelled"
    assert 0 < health["last"]["emitted"] < 4000


def test_stop_strings_cut_the_text(server, tiny_model_dir):
    expected = cli_tokens(
        tiny_model_dir, "abcabc", "--raw", "--drafter", "none", "--max-tokens", "12"
    )
    stop = expected["text"][3:5]
    answer = client(server).completions.create(
        model="default", prompt="abcabc", max_tokens=12, temperature=0, stop=[stop]
    )
    assert answer.choices[0].text == expected["text"][: expected["text"].find(stop)]
    assert answer.choices[0].finish_reason == "stop"
    # the engine's figures count the tokens the client got, not the stop string's own or
    # the passes run before the stop reached the engine
    figures = answer.usage.model_extra["draftless"]
    assert figures["emitted"] == answer.usage.completion_tokens


def test_api_key_is_checked_on_every_route_but_health(tiny_model_dir):
    server = Server("--model", str(tiny_model_dir), "--api-key", "s3cret").wait_ready()
    try:
        with pytest.raises(openai.AuthenticationError):
            client(server, "wrong").models.list()
        status, _ = request(server.port, "POST", "/v1/completions", {"prompt": "a"})
        assert status == 401
        assert [m.id for m in client(server, "s3cret").models.list()] == [tiny_model_dir.name]
        assert request(server.port, "GET", "/health")[0] == 200
    finally:
        server.stop()


def test_refuses_to_listen_beyond_localhost_without_a_key(tiny_model_dir, monkeypatch):
    monkeypatch.delenv("DRAFTLESS_API_KEY", raising=False)
    result = engine_cli("serve", "--model", str(tiny_model_dir), "--host", "0.0.0.0", timeout=60)
    assert result.returncode == 2
    assert "Refusing to listen on 0.0.0.0 without an API key" in result.stderr
    assert "Traceback" not in result.stderr


def test_fair_queue_takes_turns_between_clients_and_bounds_waiting():
    async def scenario():
        queue = FairQueue(limit=3)
        order = []
        release = asyncio.Event()

        async def job(client, name):
            async with queue.turn(client):
                order.append(name)
                await release.wait()

        tasks = [asyncio.create_task(job("a", "a1"))]
        await asyncio.sleep(0)
        for client, name in [("a", "a2"), ("b", "b1"), ("c", "c1")]:
            tasks.append(asyncio.create_task(job(client, name)))
            await asyncio.sleep(0)
        with pytest.raises(QueueFull):  # full, and no one holds two more than "d" would
            async with queue.turn("d"):
                pass
        tasks[3].cancel()  # c1 gives up while waiting
        release.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        return order, queue

    order, queue = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert order == ["a1", "b1", "a2"]
    assert not queue.running and queue.waiting == 0


def test_fair_queue_gives_a_newcomer_the_place_of_the_client_holding_the_most():
    """One party (an address, whatever ``user`` names it sends) fills the queue; each other
    party that comes still gets a place, the hog's newest request a QueueFull; turns go
    round the parties, then round one party's members."""

    async def scenario():
        queue = FairQueue(limit=4)
        order, refused = [], []
        release = asyncio.Event()

        async def job(client):
            try:
                async with queue.turn(client):
                    order.append(client)
                    await release.wait()
            except QueueFull:
                refused.append(client)

        hog = ["hog.u1", "hog.u2", "hog.u3", "hog.u4", "hog.u5"]  # one running, four waiting
        tasks = [asyncio.create_task(job(name)) for name in hog]
        await asyncio.sleep(0)
        for name in ("carol.c", "dave.d"):
            tasks.append(asyncio.create_task(job(name)))
            await asyncio.sleep(0)
        waiting_before = queue.waiting
        release.set()
        await asyncio.gather(*tasks)
        return order, refused, waiting_before

    order, refused, waiting_before = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert waiting_before == 4 and refused == ["hog.u5", "hog.u4"]  # the newest go
    assert order == ["hog.u1", "carol.c", "dave.d", "hog.u2", "hog.u3"]
