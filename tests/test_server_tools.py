"""Tool calls through the server: the chat template gets the tools, mlx-lm's parser finds the
call in the output, and the answer is OpenAI's ``tool_calls`` (Ollama's on /api/chat),
streamed and not; the tool's result goes back as a ``tool`` message."""

import json

import ollama
import openai
import pytest

from .test_server import pass_figures
from .tool_model import InProcessServer, ToolService

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
CALL = 'Let me look. <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
ASK = [{"role": "user", "content": "Weather in Paris?"}]
# the conversation after a call to get_weather and its result
CALLED = ASK + [
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24 C"},
]


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    service = ToolService(tmp_path_factory.mktemp("tool-model"))
    with InProcessServer(service) as server:
        yield service, server


def chat(server):
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0).chat.completions


SETTINGS = {
    "model": "tool-model",
    "temperature": 0,
    "max_tokens": 200,
    "extra_body": {"draftless": {"drafter": "prompt-lookup"}},
}


def test_a_tool_call_is_answered_in_openais_shape(tools):
    service, server = tools
    service.answers.append(CALL)
    whole = chat(server).create(messages=ASK, tools=[WEATHER], **SETTINGS)
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look. "
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert '"name": "get_weather"' in service.prompts[-1]  # the template saw the tools


def test_a_tool_call_streams_in_openais_incremental_shape(tools):
    """The first delta of a call carries its index, id, type and name; the arguments
    follow in pieces as the model writes them (a partial-streaming client sees progress);
    no chunk is empty but the last, which carries the finish reason."""
    service, server = tools
    service.answers.append(CALL + CALL.removeprefix("Let me look. ").replace("Paris", "Rome"))
    chunks = list(chat(server).create(messages=ASK, tools=[WEATHER], stream=True, **SETTINGS))
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == "Let me look. " and "<tool_call>" not in text
    assert chunks[0].choices[0].delta.role == "assistant"
    deltas = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    for index, city in enumerate(("Paris", "Rome")):
        mine = [d for d in deltas if d.index == index]
        assert mine[0].id.startswith("call_") and mine[0].type == "function"
        assert mine[0].function.name == "get_weather"
        assert all(d.id is None and d.function.name is None for d in mine[1:])
        pieces = [d.function.arguments for d in mine if d.function.arguments]
        assert len(pieces) > 3  # streamed as written (one byte-level token a pass here)
        assert json.loads("".join(pieces)) == {"city": city}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    whole = chat(server)
    service.answers.append(CALL)
    (call,) = whole.create(messages=ASK, tools=[WEATHER], **SETTINGS).choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"city": "Paris"}


# two calls in one answer, then text: the second call repeats the first's markup, so the
# prompt-lookup drafter drafts it and the first call closes inside a pass of several tokens
TWO_CALLS = CALL + CALL.removeprefix("Let me look. ").replace("Paris", "Rome") + " Done."


def calls_of(server, stream: bool, **fields) -> tuple[list[tuple[int, str, dict]], str, str]:
    """([(index, name, arguments)] of the answer's calls, its text, its finish reason)."""
    answer = chat(server).create(messages=ASK, tools=[WEATHER], stream=stream, **SETTINGS, **fields)
    if not stream:
        choice = answer.choices[0]
        calls = [
            (index, call.function.name, json.loads(call.function.arguments))
            for index, call in enumerate(choice.message.tool_calls or [])
        ]
        return calls, choice.message.content or "", choice.finish_reason
    chunks = list(answer)
    deltas = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    indices = sorted({d.index for d in deltas})
    calls = [
        (
            index,
            next(d.function.name for d in deltas if d.index == index),
            json.loads("".join(d.function.arguments or "" for d in deltas if d.index == index)),
        )
        for index in indices
    ]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    return calls, text, chunks[-1].choices[0].finish_reason


@pytest.mark.parametrize("stream", [False, True])
def test_parallel_tool_calls_false_ends_the_answer_with_its_first_call(tools, stream):
    service, server = tools
    service.answers.append(TWO_CALLS)
    calls, text, finish = calls_of(server, stream, parallel_tool_calls=False)
    assert calls == [(0, "get_weather", {"city": "Paris"})]
    assert (text, finish) == ("Let me look. ", "tool_calls")  # nothing after the call
    service.answers.append(TWO_CALLS)
    calls, text, finish = calls_of(server, stream)  # parallel calls by default
    assert calls == [(0, "get_weather", {"city": "Paris"}), (1, "get_weather", {"city": "Rome"})]
    assert (text, finish) == ("Let me look.  Done.", "tool_calls")


def test_the_openai_stream_helper_sees_a_calls_arguments_grow(tools):
    """The openai SDK's stream helper (what partial-streaming clients build on) reports the
    arguments as they arrive, then the whole call."""
    service, server = tools
    service.answers.append(CALL)
    pieces = []
    with chat(server).stream(messages=ASK, tools=[WEATHER], **SETTINGS) as stream:
        for event in stream:
            if event.type == "tool_calls.function.arguments.delta":
                pieces.append(event.arguments_delta)
        final = stream.get_final_completion()
    assert len(pieces) > 3 and json.loads("".join(pieces)) == {"city": "Paris"}
    (call,) = final.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}


def test_a_stream_that_opens_with_a_tool_call_has_null_content(tools):
    service, server = tools
    service.answers.append(CALL.removeprefix("Let me look. "))
    chunks = list(chat(server).create(messages=ASK, tools=[WEATHER], stream=True, **SETTINGS))
    opening = chunks[0].choices[0].delta
    assert opening.role == "assistant" and opening.content is None  # (the markup's pass)
    assert not any(c.choices[0].delta.content for c in chunks)
    assert any(c.choices[0].delta.tool_calls for c in chunks)


def test_a_plain_stream_has_no_empty_chunk_but_the_last(tools):
    service, server = tools
    service.answers.append("Hello there")
    chunks = list(chat(server).create(messages=ASK, stream=True, **SETTINGS))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Hello there"
    empty = [c for c in chunks if not c.choices[0].delta.model_dump(exclude_none=True)]
    # a held-back space's pass sends no chunk: its figures ride on the next one's
    assert empty == [chunks[-1]] and chunks[-1].choices[0].finish_reason == "stop"
    passes = [figures["pass"] for figures in pass_figures(chunks)]
    assert passes == list(range(len(passes)))  # every pass's figures, the last one's included


def test_the_tool_result_goes_back_through_the_template(tools):
    service, server = tools
    service.answers.append("It is sunny in Paris.")
    whole = chat(server).create(messages=CALLED, tools=[WEATHER], **SETTINGS)
    assert whole.choices[0].message.content == "It is sunny in Paris."
    assert whole.choices[0].finish_reason == "stop" and not whole.choices[0].message.tool_calls
    prompt = service.prompts[-1]
    assert (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>' in prompt
    )
    assert "<tool_response>sunny, 24 C</tool_response>" in prompt


def test_text_that_is_not_a_call_stays_text(tools):
    service, server = tools
    service.answers.append("<tool_call>not json</tool_call> and <tool")
    whole = chat(server).create(messages=ASK, tools=[WEATHER], **SETTINGS)
    assert whole.choices[0].message.content == "<tool_call>not json</tool_call> and <tool"
    assert whole.choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    "tool_choice", ["required", {"type": "function", "function": {"name": "nowhere"}}]
)
def test_forcing_no_tool_or_an_unknown_one_is_a_400(tools, tool_choice):
    _, server = tools
    with pytest.raises(openai.BadRequestError) as caught:
        chat(server).create(
            messages=ASK,
            tool_choice=tool_choice,
            tools=[WEATHER] if isinstance(tool_choice, dict) else openai.omit,
            **SETTINGS,
        )
    assert "tool_choice" in caught.value.message


CITIES = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "required": ["city"],
            "properties": {"city": {"enum": ["Paris", "Rome"]}},
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "required": ["zone"],
            "properties": {"zone": {"enum": ["UTC", "CET"]}},
        },
    },
}


@pytest.fixture(scope="module")
def random_tools(tmp_path_factory):
    from .tiny_model import make_tiny_llama

    service = ToolService(tmp_path_factory.mktemp("random-tool-model"), make_tiny_llama(seed=5))
    with InProcessServer(service) as server:
        yield server


@pytest.mark.parametrize(
    "tool_choice,names",
    [
        ({"type": "function", "function": {"name": "get_time"}}, {"get_time"}),
        ("required", {"get_weather", "get_time"}),
    ],
)
def test_a_forced_tool_call_is_made_and_speculation_keeps_it(random_tools, tool_choice, names):
    """A random-weight model, made to call a tool by the grammar, the same with drafts."""
    answers = {}
    for drafter in ("none", "prompt-lookup"):
        whole = chat(random_tools).create(
            messages=ASK,
            tools=[CITIES, TIME],
            tool_choice=tool_choice,
            temperature=0,
            max_tokens=120,
            model="tool-model",
            extra_body={"draftless": {"drafter": drafter}},
        )
        assert whole.choices[0].finish_reason == "tool_calls"
        (call,) = whole.choices[0].message.tool_calls
        assert call.function.name in names
        arguments = json.loads(call.function.arguments)
        assert arguments in ({"city": "Paris"}, {"city": "Rome"}, {"zone": "UTC"}, {"zone": "CET"})
        answers[drafter] = whole.model_extra["draftless"]["tokens"]
    assert answers["prompt-lookup"] == answers["none"]


def test_ollama_chat_calls_tools_too(tools):
    service, server = tools
    client = ollama.Client(host=f"http://127.0.0.1:{server.port}")
    service.answers.append(CALL)
    answer = client.chat(
        model="tool-model", messages=ASK, tools=[WEATHER], options={"temperature": 0}
    )
    (call,) = answer.message.tool_calls
    assert call.function.name == "get_weather" and call.function.arguments == {"city": "Paris"}
    service.answers.append(CALL)
    parts = list(client.chat(model="tool-model", messages=ASK, tools=[WEATHER], stream=True))
    calls = [c for p in parts for c in (p.message.tool_calls or [])]
    assert [c.function.arguments for c in calls] == [{"city": "Paris"}] and parts[-1].done
    # no empty line: each but the last holds text or a call ("Let me look. " then the call)
    assert all(p.message.content or p.message.tool_calls for p in parts[:-1])
    service.answers.append("Sunny.")  # the result back, in Ollama's shapes
    answer = client.chat(
        model="tool-model",
        tools=[WEATHER],
        messages=ASK
        + [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
                ],
            },
            {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
        ],
    )
    assert answer.message.content == "Sunny." and "<tool_response>sunny" in service.prompts[-1]


def test_streamed_tool_call_chunks_are_strictly_valid(tools):
    import http.client

    from openai.types.chat import ChatCompletionChunk

    service, server = tools
    service.answers.append(CALL)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.request(
        "POST",
        "/v1/chat/completions",
        json.dumps(
            {
                "model": "tool-model",
                "messages": ASK,
                "tools": [WEATHER],
                "stream": True,
                "max_tokens": 200,
            }
        ),
        {"Content-Type": "application/json"},
    )
    events = connection.getresponse().read().decode().split("\n\n")
    connection.close()
    chunks = [
        ChatCompletionChunk.model_validate(json.loads(e.removeprefix("data: ")), strict=True)
        for e in events
        if e and e != "data: [DONE]"
    ]
    calls = [c for chunk in chunks for c in chunk.choices[0].delta.tool_calls or []]
    assert [(c.index, c.type, c.function.name) for c in calls if c.type] == [
        (0, "function", "get_weather")
    ]
    assert [c.choices[0].finish_reason for c in chunks][-1] == "tool_calls"


def test_the_scanner_holds_back_only_what_may_open_a_call(tmp_path):
    from engine.formats.tool_calls import ToolCallScanner

    from .tool_model import load_tool_tokenizer

    scanner = ToolCallScanner.for_model(load_tool_tokenizer(tmp_path), [WEATHER])
    pieces = [scanner.feed(c) for c in 'a <tool_ca']
    assert "".join(text for text, _, _ in pieces) == "a " and scanner.held == "<tool_ca"
    text, calls, deltas = scanner.feed('ll>{"name": "f", "arguments": {}}</tool_call> b')
    assert text == " b" and [c["name"] for c in calls] == ["f"]
    assert [d.get("name") for d in deltas] == ["f", None] and deltas[1]["arguments"] == "{}"
    assert scanner.feed("<tool_call>{unfinished") == ("", [], [])
    assert scanner.flush() == ("<tool_call>{unfinished", [], [])  # no end: text after all


def test_the_scanner_streams_a_calls_arguments_as_they_are_written(tmp_path):
    from engine.formats.tool_calls import ToolCallScanner, json_value_prefix

    from .tool_model import load_tool_tokenizer

    scanner = ToolCallScanner.for_model(load_tool_tokenizer(tmp_path), [WEATHER])
    body = '<tool_call>{"name": "get_weather", "arguments": {"city": "Pa\\"ris}"}}</tool_call>'
    deltas, calls = [], []
    for char in body:
        _, closed, moved = scanner.feed(char)
        deltas += moved
        calls += closed
    assert deltas[0] == {"index": 0, "id": calls[0]["id"], "name": "get_weather"}
    streamed = "".join(d["arguments"] for d in deltas[1:])
    assert streamed == '{"city": "Pa\\"ris}"}' == calls[0]["arguments"]  # not the outer }
    assert json_value_prefix('{"a": "}"} tail') == (10, True)
    assert json_value_prefix('[1, {"b"') == (8, False)


@pytest.fixture(scope="module")
def generic(tmp_path_factory):
    """The byte tokenizer with plain ChatML (no tool calling): the generic format."""
    service = ToolService(tmp_path_factory.mktemp("generic-model"), tool_template=False)
    facts = {"architecture": "llama", "tool_format": "generic"}
    with InProcessServer(service, model_facts=facts) as server:
        yield service, server


GENERIC_CALL = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Pa\\"ris"}}]}'


def test_a_model_without_tool_template_calls_tools_in_the_generic_format(generic):
    """The preamble lists the tools in the system message; the JSON call the model writes
    (under the grammar) is OpenAI's tool_calls with null content, streamed as OpenAI
    streams them: first the id and name, then the arguments in pieces."""
    service, server = generic
    service.answers.append(GENERIC_CALL)
    choice = chat(server).create(messages=ASK, tools=[WEATHER], **SETTINGS).choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and call.id.startswith("call_")
    assert json.loads(call.function.arguments) == {"city": 'Pa"ris'}
    assert service.prompts[-1].startswith("<|im_start|>system\nYou can call these tools:")
    assert '{"name": "get_weather"' in service.prompts[-1]

    service.answers.append(GENERIC_CALL)
    chunks = list(chat(server).create(messages=ASK, tools=[WEATHER], stream=True, **SETTINGS))
    assert not any(c.choices[0].delta.content for c in chunks)
    deltas = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].id.startswith("call_") and deltas[0].function.name == "get_weather"
    assert all(d.id is None and d.function.name is None for d in deltas[1:])
    pieces = [d.function.arguments for d in deltas if d.function.arguments]
    assert len(pieces) > 3 and json.loads("".join(pieces)) == {"city": 'Pa"ris'}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_a_generic_format_reply_is_plain_content_streamed_as_it_decodes(generic):
    service, server = generic
    reply = 'It is \\"sunny\\"\\n é😀.'  # (the grammar's strings take \\u only for controls)
    service.answers.append(f'{{"response": "{reply}"}}')
    choice = chat(server).create(messages=ASK, tools=[WEATHER], **SETTINGS).choices[0]
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    assert choice.message.content == 'It is "sunny"\n é😀.'
    service.answers.append(f'{{"response": "{reply}"}}')
    chunks = list(chat(server).create(messages=ASK, tools=[WEATHER], stream=True, **SETTINGS))
    texts = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert "".join(texts) == 'It is "sunny"\n é😀.' and len(texts) > 5  # as it decodes
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_generic_format_answer_that_is_no_json_is_refused_by_the_grammar(generic):
    """The grammar allows only the call or the reply: a scripted answer in other text is
    cut at its first character (the model's only allowed tokens then are the grammar's)."""
    service, server = generic
    service.answers.append("Sure! " + GENERIC_CALL)
    choice = chat(server).create(messages=ASK, tools=[WEATHER], **SETTINGS).choices[0]
    assert not (choice.message.content or "").startswith("Sure")


def test_generic_format_history_renders_calls_and_results_as_plain_messages(generic):
    service, server = generic
    service.answers.append('{"response": "Sunny."}')
    answer = chat(server).create(messages=CALLED, tools=[WEATHER], **SETTINGS)
    assert answer.choices[0].message.content == "Sunny."
    prompt = service.prompts[-1]
    assert (
        '<|im_start|>assistant\n{"tool_calls": [{"name": "get_weather", "arguments": '
        '{"city": "Paris"}}]}<|im_end|>' in prompt
    )
    assert (  # the result with the call it answers, as Hermes and Qwen templates show it
        '<|im_start|>user\n<tool_response>\n{"name": "get_weather", "arguments": '
        '{"city": "Paris"}}\nsunny, 24 C\n</tool_response><|im_end|>' in prompt
    )


GENERIC_TWO_CALLS = (
    '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, '
    '{"name": "get_weather", "arguments": {"city": "Tokyo"}}]}'
)


def test_the_generic_format_makes_several_calls_unless_parallel_calls_are_off(generic):
    """Calls in one list come back as that many tool_calls, streamed with their own index;
    with parallel_tool_calls false the grammar allows one call (the list ends after it)."""
    from engine.formats.grammar import GrammarConstraint, generic_tool_grammar

    service, server = generic
    service.answers.append(GENERIC_TWO_CALLS)
    message = chat(server).create(messages=ASK, tools=[WEATHER], **SETTINGS).choices[0].message
    cities = [json.loads(call.function.arguments)["city"] for call in message.tool_calls]
    assert cities == ["Paris", "Tokyo"]
    assert len({call.id for call in message.tool_calls}) == 2
    assert "several" not in service.prompts[-1] and GENERIC_TWO_CALLS[:17] in service.prompts[-1]
    service.answers.append(GENERIC_TWO_CALLS)
    chunks = list(chat(server).create(messages=ASK, tools=[WEATHER], stream=True, **SETTINGS))
    deltas = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert [d.index for d in deltas if d.function.name] == [0, 1]
    for index, city in enumerate(cities):
        pieces = "".join(d.function.arguments or "" for d in deltas if d.index == index)
        assert json.loads(pieces) == {"city": city}

    service.answers.append(GENERIC_TWO_CALLS)
    one = (
        chat(server)
        .create(messages=ASK, tools=[WEATHER], parallel_tool_calls=False, **SETTINGS)
        .choices[0]
    )
    assert [json.loads(c.function.arguments) for c in one.message.tool_calls] == [{"city": "Paris"}]
    tokens = list(service.tokenizer.encode(GENERIC_TWO_CALLS, add_special_tokens=False))
    for parallel, allowed in ((True, len(tokens)), (False, GENERIC_TWO_CALLS.index(", {"))):
        grammar = generic_tool_grammar([WEATHER], None, parallel)
        assert (
            GrammarConstraint(service.tokenizer, grammar, 259, "tools").allowed(tokens) == allowed
        )


def test_each_generic_result_shows_the_call_it_answers(generic):
    """Results answer calls by id (in any order), else by the tool's name (Ollama sends
    tool_name), else in the calls' order."""
    service, server = generic
    calls = [
        {
            "id": f"call_{city}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
        }
        for city in ("Paris", "Tokyo")
    ]
    asked = ASK + [{"role": "assistant", "content": None, "tool_calls": calls}]
    results = [
        {"role": "tool", "tool_call_id": "call_Tokyo", "content": "rain"},
        {"role": "tool", "tool_call_id": "call_Paris", "content": "sun"},
    ]
    service.answers.append('{"response": "Sun and rain."}')
    chat(server).create(messages=asked + results, tools=[WEATHER], **SETTINGS)
    shown = service.prompts[-1]
    tokyo = '<tool_response>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\nrain\n'
    paris = '<tool_response>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\nsun\n'
    assert tokyo in shown and paris in shown and shown.index(tokyo) < shown.index(paris)
    assert shown.count("<|im_start|>user\n<tool_response>") == 1  # one message for both
    unnamed = [{"role": "tool", "content": "sun"}, {"role": "tool", "content": "rain"}]
    service.answers.append('{"response": "Sun and rain."}')
    chat(server).create(messages=asked + unnamed, tools=[WEATHER], **SETTINGS)
    assert paris in service.prompts[-1] and tokyo in service.prompts[-1]


def test_a_forced_generic_call_takes_only_the_call_form(generic):
    from engine.formats.grammar import GrammarConstraint, generic_tool_grammar

    service, server = generic
    service.answers.append(GENERIC_CALL)
    forced = {"type": "function", "function": {"name": "get_weather"}}
    answer = chat(server).create(messages=ASK, tools=[WEATHER], tool_choice=forced, **SETTINGS)
    assert answer.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert "Answer by calling get_weather" in service.prompts[-1]
    reply = list(service.tokenizer.encode('{"response": "no"}', add_special_tokens=False))
    for choice, allowed in ((("get_weather",), len('{"')), (None, len(reply))):
        grammar = generic_tool_grammar([WEATHER], choice)
        assert GrammarConstraint(service.tokenizer, grammar, 259, "tools").allowed(reply) == allowed


def test_the_model_card_says_which_tool_format_the_model_uses(generic):
    service, server = generic
    models = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0).models
    card = models.retrieve("tool-model")
    assert card.model_extra["draftless"]["tool_format"] == "generic"
    shown = ollama.Client(host=server.url.removesuffix("/v1")).show("tool-model")
    assert "tools" in shown.capabilities


@pytest.mark.embedded
def test_the_embedded_model_runs_a_langchain_bind_tools_agent_loop(embedded_loaded):
    """The embedded model's template has no tools: the generic format carries LangChain's
    agent loop (auto tool choice): a call with JSON arguments for a listed tool, streamed
    or not, then after the tool's result a final answer. (About 5 s here.)"""
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    from .tool_model import LoadedService

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return f"22 C and sunny in {city}"

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    listed = {"get_weather": get_weather, "add": add}
    assert embedded_loaded.facts["tool_format"] == "generic"
    service = LoadedService(embedded_loaded)
    with InProcessServer(service, model_facts=embedded_loaded.facts) as server:
        model = ChatOpenAI(
            base_url=server.url, api_key="unused", model="default", temperature=0, max_tokens=100
        )
        agent = model.bind_tools(list(listed.values()))
        messages = [HumanMessage("Call the get_weather tool to find the weather in Paris.")]
        streamed = None
        for chunk in agent.stream(messages):
            streamed = chunk if streamed is None else streamed + chunk
        for _ in range(3):
            answer = agent.invoke(messages)
            messages.append(answer)
            if not answer.tool_calls:
                break
            assert answer.response_metadata["finish_reason"] == "tool_calls"
            for call in answer.tool_calls:
                assert call["name"] in listed and isinstance(call["args"], dict)
                result = listed[call["name"]].invoke(call["args"])  # valid arguments
                messages.append(ToolMessage(str(result), tool_call_id=call["id"]))
    calls = [m for m in messages if getattr(m, "tool_calls", None)]
    assert calls, "the model never called a tool"
    assert [(c["name"], c["args"]) for c in streamed.tool_calls] == [
        (c["name"], c["args"]) for c in calls[0].tool_calls
    ]
    final = messages[-1]
    assert not final.tool_calls and final.content.strip()
    assert isinstance(messages[-2], ToolMessage)
