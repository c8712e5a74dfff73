"""What each adapter puts on the wire for a request, checked without a network."""

from __future__ import annotations

import asyncio

import pytest

from app.agents.llm.anthropic_provider import AnthropicProvider, merge_alternating
from app.agents.llm.openai_compat import OpenAICompatibleProvider
from app.agents.llm.port import ChatMessage, LLMRequest


def request(*messages: ChatMessage, system: str = "SYS") -> LLMRequest:
    return LLMRequest(agent_id="a", task_id="t", model="", system=system,
                      messages=list(messages), max_output_tokens=300, temperature=0.0)


def openai_params(base_url: str, model: str, stream: bool = False) -> dict[str, object]:
    provider = OpenAICompatibleProvider(base_url, "k", default_model=model, stream=stream)
    try:
        return provider.request_params(request(ChatMessage("user", "hi")), model)
    finally:
        asyncio.run(provider.aclose())


def test_openai_itself_gets_max_completion_tokens() -> None:
    params = openai_params("https://api.openai.com/v1", "gpt-4o-mini")
    assert params["max_completion_tokens"] == 300 and "max_tokens" not in params
    assert params["temperature"] == 0.0


def test_other_compatible_servers_get_max_tokens() -> None:
    params = openai_params("http://127.0.0.1:11434/v1", "llama3.1")
    assert params["max_tokens"] == 300 and "max_completion_tokens" not in params


@pytest.mark.parametrize("model", ["o3-mini", "gpt-5", "gpt-5-mini", "openai/o4-mini"])
def test_reasoning_models_are_sent_no_temperature(model: str) -> None:
    assert "temperature" not in openai_params("https://api.openai.com/v1", model)


def test_an_empty_system_prompt_is_not_sent() -> None:
    provider = OpenAICompatibleProvider("http://127.0.0.1:1/v1", None, default_model="m")
    params = provider.request_params(request(ChatMessage("user", "hi"), system=""), "m")
    asyncio.run(provider.aclose())
    assert params["messages"] == [{"role": "user", "content": "hi"}]


def test_streaming_requests_ask_for_usage() -> None:
    params = openai_params("http://127.0.0.1:1/v1", "m", stream=True)
    assert params["stream"] is True and params["stream_options"] == {"include_usage": True}


def test_same_role_messages_are_merged_in_order() -> None:
    merged = merge_alternating([ChatMessage("user", "a"), ChatMessage("user", "b"),
                                ChatMessage("assistant", "c"), ChatMessage("user", "d")])
    assert merged == [ChatMessage("user", "a\n\nb"), ChatMessage("assistant", "c"),
                      ChatMessage("user", "d")]


def test_an_empty_turn_is_sent_as_a_visible_placeholder() -> None:
    merged = merge_alternating([ChatMessage("user", "task"), ChatMessage("assistant", "")])
    assert merged[-1] == ChatMessage("assistant", "(empty)")


def test_anthropic_request_marks_cache_breakpoints_and_omits_sampling() -> None:
    provider = AnthropicProvider("k", default_model="claude-haiku-4-5")
    params = provider.request_params(
        request(ChatMessage("user", "task"), ChatMessage("assistant", "call"),
                ChatMessage("user", "result")), "claude-haiku-4-5")
    asyncio.run(provider.aclose())
    assert params["system"] == [{"type": "text", "text": "SYS",
                                 "cache_control": {"type": "ephemeral"}}]
    assert params["messages"][0] == {"role": "user", "content": "task"}
    assert params["messages"][-1]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert "temperature" not in params and params["max_tokens"] == 300
