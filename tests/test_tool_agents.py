"""Agent loops end to end through the server: langgraph's ReAct agent and pydantic-ai's
Agent, each with one tool, on a tiny model whose chat template takes tools (scripted: a
call, then a reply after the tool's result) and on the built-in model (the generic format,
greedy). Each test skips where its library is not installed."""

from __future__ import annotations

import json
import warnings

import openai
import pytest

from .tool_model import InProcessServer, LoadedService, ToolService

CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
REPLY = "It is sunny in Paris."
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"22 C and sunny in {city}"


@pytest.fixture(scope="module")
def tool_server(tmp_path_factory):
    service = ToolService(tmp_path_factory.mktemp("agent-tool-model"))
    with InProcessServer(service, model_facts={"tool_format": "template"}) as server:
        yield service, server


@pytest.fixture(scope="module")
def built_in_server(embedded_loaded):
    with InProcessServer(
        LoadedService(embedded_loaded), "default", embedded_loaded.facts
    ) as server:
        yield server


def langgraph_agent(server, model: str, max_tokens: int = 200):
    pytest.importorskip("langgraph")
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    chat = ChatOpenAI(
        base_url=server.url, api_key="unused", model=model, temperature=0, max_tokens=max_tokens
    )
    with warnings.catch_warnings():  # (moved to the langchain package, not installed here)
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_react_agent(chat, [tool(get_weather)])


def pydantic_agent(server, model: str, max_tokens: int = 200):
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent, ModelSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    chat = OpenAIChatModel(model, provider=OpenAIProvider(base_url=server.url, api_key="unused"))
    settings = ModelSettings(temperature=0, max_tokens=max_tokens)
    return Agent(chat, tools=[get_weather], model_settings=settings)


def test_a_langgraph_agent_finishes_on_a_tool_template_model(tool_server):
    service, server = tool_server
    service.answers += [CALL, REPLY]
    agent = langgraph_agent(server, "tool-model")
    state = agent.invoke(
        {"messages": [("user", "What is the weather in Paris?")]}, {"recursion_limit": 6}
    )
    kinds = [type(m).__name__ for m in state["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert state["messages"][-1].content == REPLY
    assert "<tool_response>22 C and sunny in Paris</tool_response>" in service.prompts[-1]


def test_a_pydantic_ai_agent_finishes_on_a_tool_template_model(tool_server):
    service, server = tool_server
    service.answers += [CALL, REPLY]
    result = pydantic_agent(server, "tool-model").run_sync("What is the weather in Paris?")
    assert result.output == REPLY
    assert "<tool_response>22 C and sunny in Paris</tool_response>" in service.prompts[-1]


@pytest.mark.embedded
def test_the_built_in_model_calls_the_tool_once_for_each_city(built_in_server):
    """The generic format shows two calls in its form: the built-in model makes one per
    city (with a form of one call it made one)."""
    client = openai.OpenAI(base_url=built_in_server.url, api_key="unused", max_retries=0)
    answer = client.chat.completions.create(
        model="default",
        messages=[
            {"role": "user", "content": "Call get_weather once for each city: Paris and Tokyo."}
        ],
        tools=[WEATHER],
        temperature=0,
        max_tokens=80,
    )
    calls = answer.choices[0].message.tool_calls
    assert answer.choices[0].finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Tokyo"}),
    ]


@pytest.mark.embedded
def test_agents_finish_a_one_call_task_on_the_built_in_model(built_in_server):
    """One call, its result, then a reply: both agents end without hitting their limits
    (where a task needs several results, the built-in model may call again: README)."""
    ask = "Call the get_weather tool to find the weather in Paris."
    state = langgraph_agent(built_in_server, "default", 100).invoke(
        {"messages": [("user", ask)]}, {"recursion_limit": 8}
    )
    kinds = [type(m).__name__ for m in state["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert state["messages"][1].tool_calls[0]["args"] == {"city": "Paris"}
    assert state["messages"][-1].content.strip()

    from pydantic_ai.usage import UsageLimits

    result = pydantic_agent(built_in_server, "default", 100).run_sync(
        ask, usage_limits=UsageLimits(request_limit=4)
    )
    assert result.output.strip()
    called = [p for m in result.all_messages() for p in m.parts if p.part_kind == "tool-call"]
    assert [p.args_as_dict() for p in called] == [{"city": "Paris"}]
