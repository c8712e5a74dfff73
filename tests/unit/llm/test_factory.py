"""build_provider: each kind builds its adapter; configuration mistakes are explained up front."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.agents.llm.anthropic_provider import AnthropicProvider
from app.agents.llm.factory import build_provider
from app.agents.llm.openai_compat import OpenAICompatibleProvider
from app.agents.llm.port import PermanentLLMError
from app.agents.llm.replay import RecordingProvider, ReplayProvider
from tests.helpers.scripted_llm import ScriptedProvider


def close(provider: object) -> None:
    asyncio.run(provider.aclose())  # type: ignore[attr-defined]


def test_openai_compatible_local_server_needs_no_key() -> None:
    provider = build_provider("openai-compatible", model="llama3.1",
                              base_url="http://127.0.0.1:11434/v1", timeout_s=5, max_retries=1)
    assert isinstance(provider, OpenAICompatibleProvider)
    assert (provider.name, provider.is_llm, provider.default_model) == (
        "openai-compatible", True, "llama3.1")
    assert (provider.timeout_s, provider.max_retries) == (5, 1)
    close(provider)


def test_openai_itself_without_a_key_says_where_to_set_it() -> None:
    with pytest.raises(PermanentLLMError, match="KESTREL_<NAME>"):
        build_provider("openai-compatible", model="gpt-4o-mini")


def test_anthropic_without_a_key_says_where_to_set_it() -> None:
    with pytest.raises(PermanentLLMError, match="no API key for Anthropic.*keyring"):
        build_provider("anthropic", model="claude-sonnet-4-6", api_key=None)


def test_anthropic_with_a_key_builds_its_adapter() -> None:
    provider = build_provider("anthropic", model="claude-haiku-4-5", api_key="sk-ant-x",
                              stream=False)
    assert isinstance(provider, AnthropicProvider)
    assert provider.stream is False and provider.base_url == "https://api.anthropic.com"
    close(provider)


def test_rule_engine_kind_returns_the_given_object() -> None:
    engine = ScriptedProvider([], name="rule-engine", is_llm=False)
    assert build_provider("rule-engine", model="rules", rule_engine=engine) is engine


def test_rule_engine_kind_without_an_engine_is_an_error() -> None:
    with pytest.raises(PermanentLLMError, match="rule engine was not provided"):
        build_provider("rule-engine", model="rules")


def test_replay_kind_needs_a_recording(tmp_path: Path) -> None:
    with pytest.raises(PermanentLLMError, match="needs the path"):
        build_provider("replay", model="m")
    with pytest.raises(PermanentLLMError, match="no recording"):
        build_provider("replay", model="m", replay_path=tmp_path / "missing.jsonl")
    path = tmp_path / "run.jsonl"
    path.write_text("", encoding="utf-8")
    assert isinstance(build_provider("replay", model="m", replay_path=path), ReplayProvider)


def test_record_path_wraps_the_provider_in_a_recorder(tmp_path: Path) -> None:
    engine = ScriptedProvider([], name="rule-engine", is_llm=False)
    provider = build_provider("rule-engine", model="rules", rule_engine=engine,
                              record_path=tmp_path / "rec.jsonl")
    assert isinstance(provider, RecordingProvider)
    assert (provider.name, provider.is_llm) == ("rule-engine", False)


def test_unknown_kind_lists_the_known_ones() -> None:
    with pytest.raises(PermanentLLMError, match="unknown provider kind 'gemini'; known: "
                                                "openai-compatible, anthropic, replay"):
        build_provider("gemini", model="x")
