"""Real clients against `python -m engine serve`: log-probabilities and penalties through the
openai client, every streamed chunk checked against the openai package's own types,
LangChain's ChatOpenAI, and the official ollama client on the Ollama routes."""

import http.client
import json

import ollama
import openai
import pydantic
import pytest
from openai.types.chat import ChatCompletionChunk

from .server_process import Server

PROMPT = [{"role": "user", "content": "abcabcabc"}]


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    running = Server("--model", str(tiny_model_dir)).wait_ready()
    yield running
    running.stop()


def client(server):
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120)


def settings(drafter="none", **extra):
    return {
        "model": "default",
        "messages": PROMPT,
        "max_tokens": 24,
        "temperature": 0,
        # adaptive off: every pass drafts, whatever this machine's timing says pays
        "extra_body": {"draftless": {"drafter": drafter, "draft_count": 3, "adaptive": False}},
        **extra,
    }


# 1. log-probabilities and penalties


def test_logprobs_are_the_same_with_and_without_drafts_streamed_and_not(server):
    chat = client(server).chat.completions
    answers = {}
    for drafter in ("none", "prompt-lookup", "ngrammys"):
        whole = chat.create(**settings(drafter, logprobs=True, top_logprobs=5))
        content = whole.choices[0].logprobs.content
        assert len(content) == whole.usage.completion_tokens == 24
        assert all(
            len(c.top_logprobs) == 5 and c.top_logprobs[0].logprob == c.logprob for c in content
        )  # greedy: the chosen token is the most likely
        streamed = [
            item
            for chunk in chat.create(
                stream=True, **settings(drafter, logprobs=True, top_logprobs=5)
            )
            if chunk.choices and chunk.choices[0].logprobs
            for item in chunk.choices[0].logprobs.content
        ]
        assert [c.token for c in streamed] == [c.token for c in content]  # (the streamed
        assert [c.logprob for c in streamed] == pytest.approx(  # answer reuses the cached prompt)
            [c.logprob for c in content], abs=1e-4
        )
        answers[drafter] = whole
        if drafter != "none":
            assert any(whole.model_extra["draftless"]["from_draft"]), "no draft was accepted"
    plain = answers.pop("none")
    for whole in answers.values():
        assert whole.model_extra["draftless"]["tokens"] == plain.model_extra["draftless"]["tokens"]
        for got, expected in zip(
            whole.choices[0].logprobs.content, plain.choices[0].logprobs.content
        ):
            assert got.token == expected.token
            assert got.logprob == pytest.approx(expected.logprob, abs=1e-4)
            assert [t.token for t in got.top_logprobs] == [t.token for t in expected.top_logprobs]
            assert [t.logprob for t in got.top_logprobs] == pytest.approx(
                [t.logprob for t in expected.top_logprobs], abs=1e-4
            )


def test_no_logprobs_unless_asked(server):
    whole = client(server).chat.completions.create(**settings())
    assert whole.choices[0].logprobs is None


def test_text_completion_logprobs(server):
    answer = client(server).completions.create(
        model="default", prompt="xyzxyz", max_tokens=8, temperature=0, logprobs=3
    )
    logprobs = answer.choices[0].logprobs
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == 8
    assert all(
        len(top) <= 3 and max(top.values()) == pytest.approx(value)
        for top, value in zip(logprobs.top_logprobs, logprobs.token_logprobs)
    )
    assert logprobs.text_offset == sorted(logprobs.text_offset) and logprobs.text_offset[0] == 0


def test_presence_and_frequency_penalties_change_the_answer_but_not_under_speculation(server):
    chat = client(server).chat.completions
    tokens = {}
    for drafter in ("none", "prompt-lookup"):
        whole = chat.create(**settings(drafter, presence_penalty=1.5, frequency_penalty=0.5))
        tokens[drafter] = whole.model_extra["draftless"]["tokens"]
    assert tokens["prompt-lookup"] == tokens["none"]
    assert tokens["none"] != chat.create(**settings()).model_extra["draftless"]["tokens"]


# 2. structured output (constrained decoding)


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=6)
    tags: list[str] = pydantic.Field(max_length=3)


def test_json_schema_answers_parse_and_speculation_keeps_them(server):
    chat = client(server).chat.completions
    format = {
        "type": "json_schema",
        "json_schema": {"name": "person", "strict": True, "schema": Person.model_json_schema()},
    }
    answers = {}
    for drafter in ("none", "prompt-lookup"):
        whole = chat.create(**settings(drafter, response_format=format, max_tokens=120))
        assert whole.choices[0].finish_reason == "stop"
        Person.model_validate_json(whole.choices[0].message.content)
        answers[drafter] = whole.model_extra["draftless"]["tokens"]
    assert answers["prompt-lookup"] == answers["none"]
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in chat.create(
            stream=True, **settings("prompt-lookup", response_format=format, max_tokens=120)
        )
    )
    assert streamed == whole.choices[0].message.content
    parsed = chat.parse(response_format=Person, **settings(max_tokens=120))  # openai's helper
    assert isinstance(parsed.choices[0].message.parsed, Person)
    json_object = chat.create(**settings(response_format={"type": "json_object"}, max_tokens=200))
    if json_object.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(json_object.choices[0].message.content), dict)
    else:
        assert json_object.choices[0].message.content.startswith("{")


def test_ollama_format_takes_a_schema(server):
    llama = ollama.Client(host=f"http://127.0.0.1:{server.port}")
    answer = llama.chat(
        model="default",
        messages=PROMPT,
        format=Person.model_json_schema(),
        options={"temperature": 0, "num_predict": 120},
    )
    assert answer.done_reason == "stop"
    Person.model_validate_json(answer.message.content)


def test_a_bad_schema_is_a_400_naming_response_format(server):
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(
            **settings(
                response_format={
                    "type": "json_schema",
                    "json_schema": {
                        "name": "x",
                        "schema": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}},
                    },
                }
            )
        )
    assert caught.value.param == "response_format" or "response_format" in caught.value.message


# 3. every streamed chunk, strictly


def raw_chunks(server, body: dict) -> list[dict]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    connection.request(
        "POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"}
    )
    lines = connection.getresponse().read().decode().split("\n\n")
    connection.close()
    events = [line.removeprefix("data: ") for line in lines if line]
    assert events[-1] == "[DONE]"
    return [json.loads(event) for event in events[:-1]]


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"stream_options": {"include_usage": True}},
        {"logprobs": True, "top_logprobs": 2, "stop": ["zz"]},
        {"draftless": {"drafter": "prompt-lookup"}},
    ],
)
def test_every_streamed_chunk_is_a_valid_chat_completion_chunk(server, extra):
    body = {"model": "default", "messages": PROMPT, "max_tokens": 12, "stream": True, **extra}
    chunks = raw_chunks(server, body)
    parsed = [ChatCompletionChunk.model_validate(chunk, strict=True) for chunk in chunks]
    first = parsed[0]
    assert first.id.startswith("chatcmpl-") and first.choices[0].delta.role == "assistant"
    for chunk in parsed:
        assert (chunk.id, chunk.created, chunk.model) == (first.id, first.created, first.model)
        assert chunk.object == "chat.completion.chunk"
    with_choices = [c for c in parsed if c.choices]
    for chunk in with_choices:
        assert len(chunk.choices) == 1 and chunk.choices[0].index == 0
        assert chunk.choices[0].delta is not None
        assert chunk.usage is None
    assert [c.choices[0].finish_reason for c in with_choices[:-1]] == [None] * (
        len(with_choices) - 1
    )
    assert with_choices[-1].choices[0].finish_reason in ("stop", "length")
    usage_chunks = [c for c in parsed if not c.choices]
    if extra.get("stream_options"):
        assert usage_chunks == [parsed[-1]] and parsed[-1].usage.completion_tokens == 12
    else:
        assert usage_chunks == [] and all("usage" not in c for c in chunks)
    if extra.get("logprobs"):
        assert all(c.choices[0].logprobs is not None for c in with_choices[1:-1])


# 4. LangChain


def test_langchain_chat_openai_invoke_stream_and_batch(server):
    from langchain_openai import ChatOpenAI

    expected = client(server).chat.completions.create(**settings("prompt-lookup"))
    text = expected.choices[0].message.content
    model = ChatOpenAI(
        base_url=server.url,
        api_key="unused",
        model="default",
        temperature=0,
        max_tokens=24,
        max_retries=0,
        extra_body={"draftless": {"drafter": "prompt-lookup", "draft_count": 3}},
    )
    answer = model.invoke("abcabcabc")
    assert answer.content == text
    assert answer.response_metadata["finish_reason"] == "length"
    assert answer.usage_metadata["output_tokens"] == 24
    assert "".join(chunk.content for chunk in model.stream("abcabcabc")) == text
    assert [a.content for a in model.batch(["abcabcabc", "abcabcabc"])] == [text, text]


# 5. Ollama


def test_ollama_client_chat_and_generate_streamed_and_not(server):
    expected = client(server).chat.completions.create(**settings()).choices[0].message.content
    llama = ollama.Client(host=f"http://127.0.0.1:{server.port}")
    options = {"temperature": 0, "num_predict": 24, "seed": 1, "top_k": 40, "top_p": 1.0}
    whole = llama.chat(model="default", messages=PROMPT, options=options)
    assert whole.message.role == "assistant" and whole.message.content == expected
    assert whole.done and whole.done_reason == "length" and whole.eval_count == 24
    assert whole.prompt_eval_count > 0 and whole.total_duration > 0
    parts = list(llama.chat(model="default", messages=PROMPT, options=options, stream=True))
    assert "".join(p.message.content for p in parts) == expected
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    generated = llama.generate(model="default", prompt="abcabcabc", options=options)
    assert generated.response == expected  # through the chat template, as Ollama does
    raw = (
        client(server)
        .completions.create(model="default", prompt="xyz", max_tokens=8, temperature=0)
        .choices[0]
        .text
    )
    parts = list(
        llama.generate(
            model="default",
            prompt="xyz",
            raw=True,
            stream=True,
            options={**options, "num_predict": 8, "stop": ["\x00"]},
        )
    )
    assert "".join(p.response for p in parts) == raw and parts[-1].eval_count == 8


def test_ollama_logprobs_tags_show_version_and_errors(server, tiny_model_dir):
    llama = ollama.Client(host=f"http://127.0.0.1:{server.port}")
    answer = llama.chat(
        model="default",
        messages=PROMPT,
        logprobs=True,
        top_logprobs=3,
        options={"temperature": 0, "num_predict": 6},
    )
    assert len(answer.logprobs) == 6 and all(len(p.top_logprobs) == 3 for p in answer.logprobs)
    assert [m.model for m in llama.list().models] == [tiny_model_dir.name]
    assert llama.show(tiny_model_dir.name + ":latest").capabilities == ["completion", "tools"]
    status, version = request_json(server, "GET", "/api/version")
    assert status == 200 and version["version"]
    with pytest.raises(ollama.ResponseError) as caught:
        llama.chat(model="llama3", messages=PROMPT)
    assert caught.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as caught:
        llama.generate(model="default", prompt="hi", options={"num_predict": "lots"})
    assert caught.value.status_code == 400 and "options.num_predict" in caught.value.error


def test_ollama_show_ps_older_name_key_curl_bodies_and_error_shape(server, tiny_model_dir):
    """What Ollama clients call besides chat: /api/show with the model's real facts (also
    under the older "name" key), /api/ps, bodies posted as curl -d sends them, and Ollama's
    {"error": …} shape on every /api/ route, unknown ones included."""
    config = json.loads((tiny_model_dir / "config.json").read_text())
    llama = ollama.Client(host=f"http://127.0.0.1:{server.port}")
    shown = llama.show("default")
    assert shown.capabilities == ["completion", "tools"]  # the generic format's
    assert shown.details.family == config["model_type"]
    assert shown.details.parameter_size and shown.details.quantization_level
    info = shown.modelinfo
    assert info["general.architecture"] == config["model_type"]
    assert info[f"{config['model_type']}.context_length"] == config["max_position_embeddings"]
    assert info["general.parameter_count"] > 0
    running = llama.ps().models
    assert [m.model for m in running] == [tiny_model_dir.name] and running[0].size > 0
    assert llama.list().models[0].size == running[0].size
    for content_type in (None, "application/x-www-form-urlencoded"):  # curl -d, no -H
        status, body = post_raw(server, "/api/show", {"name": "default"}, content_type)
        assert status == 200 and body["details"]["family"] == config["model_type"]
    status, body = post_raw(
        server,
        "/api/chat",
        {"model": "default", "messages": PROMPT, "stream": False, "options": {"num_predict": 2}},
        None,
    )
    assert status == 200 and body["eval_count"] == 2
    status, body = post_raw(server, "/v1/chat/completions", {"messages": PROMPT}, None)
    assert status == 415  # the OpenAI routes still want a JSON content type
    status, body = post_raw(server, "/api/create", {"model": "default"}, None)
    assert status == 404 and set(body) == {"error"}


def test_ollama_cli_checks_pulls_loads_and_unloads(server, tiny_model_dir):
    """What the ollama CLI and apps send besides answers: GET and HEAD / to find the
    server, /api/pull (the served model is here; another cannot be pulled), a load (no
    prompt, no messages) and an unload (keep_alive 0)."""
    for method in ("GET", "HEAD"):
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        connection.request(method, "/")
        response = connection.getresponse()
        assert response.status == 200
        assert response.read() == (b"Ollama is running" if method == "GET" else b"")
        connection.close()
    llama = ollama.Client(host=f"http://127.0.0.1:{server.port}")
    assert llama.pull("default").status == "success"
    assert [p.status for p in llama.pull(tiny_model_dir.name, stream=True)][-1] == "success"
    with pytest.raises(ollama.ResponseError) as caught:
        llama.pull("llama3")
    assert caught.value.status_code == 404 and "cannot pull 'llama3'" in caught.value.error
    assert llama.generate(model="default").done_reason == "load"
    assert llama.generate(model="default", keep_alive=0).done_reason == "unload"
    loaded = llama.chat(model="default", messages=[])
    assert loaded.done_reason == "load" and loaded.message.content == ""
    assert llama.chat(model="default", messages=[], keep_alive=0).done_reason == "unload"


def test_unknown_ollama_options_are_ignored_with_a_warning(server, caplog):
    from engine.server.ollama import translate

    options = {"temperature": 0, "num_predict": 6}
    llama = ollama.Client(host=f"http://127.0.0.1:{server.port}")
    plain = llama.generate(model="default", prompt="abc", options=options).response
    odd = {**options, "mirostat": 2, "mirostat_tau": 5.0}
    assert llama.generate(model="default", prompt="abc", options=odd).response == plain
    with caplog.at_level("WARNING", logger="engine.server"):
        body, _ = translate({"prompt": "abc", "options": odd}, False)
    assert "mirostat" not in body and body["max_tokens"] == 6
    assert "Ignoring the Ollama option 'mirostat'" in caplog.text


def hidden_state_embedding(loaded, text: str):
    """The model's mean-pooled, normalised last hidden state of ``text``, directly."""
    import mlx.core as mx

    ids = mx.array(list(loaded.tokenizer.encode(text)))[None]
    mean = loaded.model.model(ids)[0].mean(axis=0)
    return (mean / mx.linalg.norm(mean)).tolist()


def test_embeddings_are_the_models_pooled_hidden_state(server, tiny_model_dir):
    config = json.loads((tiny_model_dir / "config.json").read_text())
    texts = ["the red fox", "abc"]
    from engine.models import load_model

    loaded = load_model(str(tiny_model_dir))
    expected = [hidden_state_embedding(loaded, text) for text in texts]
    llama = ollama.Client(host=f"http://127.0.0.1:{server.port}")
    embedded = llama.embed(model="default", input=texts)
    assert [len(v) for v in embedded.embeddings] == [config["hidden_size"]] * 2
    for got, want in zip(embedded.embeddings, expected):
        assert got == pytest.approx(want, abs=1e-5)
    assert embedded.prompt_eval_count == len("the red fox") + len("abc")  # one byte a token
    older = llama.embeddings(model="default", prompt=texts[0]).embedding
    assert older == pytest.approx(expected[0], abs=1e-5)
    for asked in ({}, {"encoding_format": "float"}):  # (by default the client asks base64)
        data = client(server).embeddings.create(model="default", input=texts, **asked).data
        assert [d.index for d in data] == [0, 1]
        for got, want in zip(data, expected):
            assert list(got.embedding) == pytest.approx(want, abs=1e-5)
    ids = list(loaded.tokenizer.encode("abc"))
    by_ids = client(server).embeddings.create(model="default", input=ids)
    assert list(by_ids.data[0].embedding) == pytest.approx(expected[1], abs=1e-5)
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).embeddings.create(model="default", input="a" * 5000)
    assert "reads at most" in caught.value.message
    cut = llama.embed(model="default", input="a" * 5000)  # Ollama cuts it to the context
    assert len(cut.embeddings[0]) == config["hidden_size"]
    with pytest.raises(ollama.ResponseError) as caught:
        llama.embed(model="default", input="a" * 5000, truncate=False)
    assert caught.value.status_code == 400
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).embeddings.create(model="default", input="abc", dimensions=8)
    assert caught.value.body["param"] == "dimensions"


def post_raw(server, path, body: dict, content_type: str | None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.putrequest("POST", path, skip_accept_encoding=True)
    data = json.dumps(body).encode()
    connection.putheader("Content-Length", str(len(data)))
    if content_type:
        connection.putheader("Content-Type", content_type)
    connection.endheaders(data)
    response = connection.getresponse()
    parsed = json.loads(response.read())
    connection.close()
    return response.status, parsed


def test_ollama_capabilities_name_tools_in_either_tool_format():
    from engine.server import ollama as ollama_routes

    facts = {"architecture": "qwen2", "parameters": 7_600_000_000, "tool_format": "template"}
    assert ollama_routes.show(facts)["capabilities"] == ["completion", "tools"]
    assert ollama_routes.show({**facts, "tool_format": "generic"})["capabilities"] == [
        "completion",
        "tools",
    ]


def request_json(server, method, path):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request(method, path)
    response = connection.getresponse()
    body = json.loads(response.read())
    connection.close()
    return response.status, body


def test_ollama_routes_need_the_api_key(tiny_model_dir):
    running = Server("--model", str(tiny_model_dir), "--api-key", "sesame").wait_ready()
    try:
        host = f"http://127.0.0.1:{running.port}"
        with pytest.raises(ollama.ResponseError) as caught:
            ollama.Client(host=host).list()
        assert caught.value.status_code == 401 and "API key" in caught.value.error
        keyed = ollama.Client(host=host, headers={"Authorization": "Bearer sesame"})
        assert (
            keyed.chat(model="default", messages=PROMPT, options={"num_predict": 2}).eval_count == 2
        )
    finally:
        running.stop()
