"""OpenAI's Responses API (/v1/responses) through the openai client's ``responses.create``,
``responses.stream`` and ``responses.parse``: text, streaming, function tools and
structured output, on a scripted tool-template model served in process (the real engine
session, grammar and server)."""

from __future__ import annotations

import json

import openai
import pydantic
import pytest

from .test_server_tools import WEATHER as CHAT_WEATHER
from .tool_model import InProcessServer, ToolService

CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
WEATHER = {"type": "function", **CHAT_WEATHER["function"]}  # the Responses API's flat form
SETTINGS = {"model": "tool-model", "temperature": 0, "max_output_tokens": 200}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    service = ToolService(tmp_path_factory.mktemp("responses-model"))
    with InProcessServer(service) as server:
        yield service, openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)


def test_text_whole_and_streamed(served):
    service, client = served
    service.answers.append("Hello there, friend.")
    response = client.responses.create(input="Say hello.", instructions="Be kind.", **SETTINGS)
    assert response.output_text == "Hello there, friend." and response.status == "completed"
    assert response.usage.output_tokens > 0 and response.usage.input_tokens > 0
    assert service.prompts[-1].startswith("<|im_start|>system\nBe kind.")
    service.answers.append("Hello there, friend.")
    with client.responses.stream(input="Say hello.", **SETTINGS) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output_text == "Hello there, friend." and final.status == "completed"
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed" and kinds.count("response.output_text.delta") > 1


def test_the_token_limit_leaves_the_response_incomplete(served):
    service, client = served
    service.answers.append("A long answer that goes on and on.")
    response = client.responses.create(input="Talk.", **{**SETTINGS, "max_output_tokens": 5})
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"


def test_function_calls_whole_streamed_and_answered(served):
    service, client = served
    service.answers.append("Let me look. " + CALL)
    response = client.responses.create(input="Weather in Paris?", tools=[WEATHER], **SETTINGS)
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert calls[0].call_id.startswith("call_") and response.output_text == "Let me look. "

    service.answers.append(CALL)
    with client.responses.stream(input="Weather in Paris?", tools=[WEATHER], **SETTINGS) as stream:
        events = list(stream)
        final = stream.get_final_response()
    pieces = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(pieces) > 1 and json.loads("".join(pieces)) == {"city": "Paris"}
    (call,) = [item for item in final.output if item.type == "function_call"]
    assert json.loads(call.arguments) == {"city": "Paris"}

    service.answers.append("It is sunny in Paris.")
    answered = client.responses.create(
        input=[
            {"role": "user", "content": "Weather in Paris?"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": "get_weather",
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 24 C"},
        ],
        tools=[WEATHER],
        **SETTINGS,
    )
    assert answered.output_text == "It is sunny in Paris."
    assert "<tool_response>sunny, 24 C</tool_response>" in service.prompts[-1]
    assert '<tool_call>{"name": "get_weather"' in service.prompts[-1]


class City(pydantic.BaseModel):
    city: str
    sunny: bool


def test_structured_output_follows_the_schema(served):
    """``text.format`` decodes under the schema's grammar: a scripted answer that strays
    is cut where it leaves the schema, and one that follows it parses."""
    service, client = served
    service.answers.append('{"city": "Paris", "sunny": true}')
    parsed = client.responses.parse(input="Weather?", text_format=City, **SETTINGS)
    assert parsed.output_parsed == City(city="Paris", sunny=True)
    service.answers.append('Sure! {"city": "Paris", "sunny": true}')
    strayed = client.responses.create(
        input="Weather?",
        text={
            "format": {"type": "json_schema", "name": "city", "schema": City.model_json_schema()}
        },
        **{**SETTINGS, "max_output_tokens": 3},
    )
    assert not strayed.output_text.startswith("Sure")


def test_stored_responses_are_refused_with_the_reason(served):
    _, client = served
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(input="Hi", previous_response_id="resp_1", **SETTINGS)
    assert caught.value.body["param"] == "previous_response_id"
    assert "stores no responses" in caught.value.message
