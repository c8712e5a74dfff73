"""Record a run's exchanges, replay them exactly, and report any drift precisely."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from app.agents.llm.port import (
    ChatMessage,
    LLMRequest,
    LLMResponse,
    LLMUsage,
    PermanentLLMError,
    ReplayMismatchError,
)
from app.agents.llm.replay import RecordingProvider, ReplayProvider, request_hash
from tests.helpers.scripted_llm import ScriptedProvider

SYSTEM = "You are an analyst. Tools: get_klines, calculate_indicator."


def req(agent: str, *texts: str, system: str = SYSTEM, model: str = "gpt-4o-mini") -> LLMRequest:
    roles = ("user", "assistant")
    messages = [ChatMessage(roles[i % 2], t) for i, t in enumerate(texts)]  # type: ignore[arg-type]
    return LLMRequest(agent_id=agent, task_id="t1", model=model, system=system,
                      messages=messages)


CONVERSATION = [
    req("a1", "task: analyse BTC"),
    req("a2", "hello"),
    req("a1", "task: analyse BTC", "<get_klines/>", "<tool_result>rows</tool_result>"),
]


def record(path: Path) -> list[LLMResponse]:
    inner = ScriptedProvider(["<get_klines/>", "hi there", "BTC looks bullish"],
                             usage=LLMUsage(1200, 40, 1000))
    recorder = RecordingProvider(inner, path)
    assert (recorder.name, recorder.is_llm) == ("openai-compatible", True)

    async def run() -> list[LLMResponse]:
        return [await recorder.complete(r) for r in CONVERSATION]

    return asyncio.run(run())


def replay(path: Path, requests: list[LLMRequest]) -> list[LLMResponse]:
    provider = ReplayProvider(path)

    async def run() -> list[LLMResponse]:
        return [await provider.complete(r) for r in requests]

    return asyncio.run(run())


def test_replay_answers_each_call_as_recorded(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    recorded = record(path)
    replayed = replay(path, CONVERSATION)
    for original, again in zip(recorded, replayed, strict=True):
        assert (again.text, again.usage, again.model, again.finish_reason) == (
            original.text, original.usage, original.model, original.finish_reason)
        assert again.provider == "replay"


def test_replay_reports_the_recorded_provider_kind(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    record(path)
    provider = ReplayProvider(path)
    assert provider.name == "replay"
    assert provider.is_llm is True
    assert provider.recorded_provider == "openai-compatible"


def test_each_distinct_text_is_stored_once(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    record(path)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    texts = [e["text"] for e in lines if e["type"] == "text"]
    assert len(texts) == len(set(texts))
    assert texts.count(SYSTEM) == 1
    exchanges = [e for e in lines if e["type"] == "exchange"]
    assert [(e["agent_id"], e["index"]) for e in exchanges] == [("a1", 0), ("a2", 0), ("a1", 1)]
    first = CONVERSATION[0]
    assert exchanges[0]["request_hash"] == request_hash(first.model, first.system,
                                                        first.messages)
    assert exchanges[0]["response"]["usage"] == {
        "input_tokens": 1200, "output_tokens": 40, "cached_input_tokens": 1000}


def test_a_changed_message_is_reported_with_agent_call_and_index(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    record(path)
    changed = req("a1", "task: analyse BTC", "<get_klines/>", "<tool_result>ROWS</tool_result>")
    with pytest.raises(ReplayMismatchError) as info:
        replay(path, [CONVERSATION[0], changed])
    message = str(info.value)
    assert "agent a1 call #1" in message
    assert "message 2 (user) differs" in message
    assert "rows" in message and "ROWS" in message


def test_a_changed_system_prompt_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    record(path)
    with pytest.raises(ReplayMismatchError, match="agent a1 call #0: the system prompt differs"):
        replay(path, [req("a1", "task: analyse BTC", system=SYSTEM + " New rule.")])


def test_a_changed_model_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    record(path)
    with pytest.raises(ReplayMismatchError, match="the model is 'gpt-4o'"):
        replay(path, [req("a1", "task: analyse BTC", model="gpt-4o")])


def test_an_extra_message_is_reported_by_count(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    record(path)
    with pytest.raises(ReplayMismatchError, match="request has 2 messages, the recording 1"):
        replay(path, [req("a1", "task: analyse BTC", "more")])


def test_a_call_beyond_the_recording_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    record(path)
    with pytest.raises(ReplayMismatchError, match=r"agent a2 call #1: .* no such call .* 1 call "):
        replay(path, [CONVERSATION[1], CONVERSATION[1]])


def test_an_unknown_agent_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    record(path)
    with pytest.raises(ReplayMismatchError, match="agent zz call #0"):
        replay(path, [req("zz", "x")])


def test_a_missing_recording_is_a_permanent_error(tmp_path: Path) -> None:
    with pytest.raises(PermanentLLMError, match="no recording"):
        ReplayProvider(tmp_path / "nothing.jsonl")


def test_a_truncated_last_line_is_ignored_but_a_corrupt_middle_line_is_not(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    record(path)
    content = path.read_text(encoding="utf-8")
    path.write_text(content + '{"type": "exch', encoding="utf-8")
    assert len(replay(path, CONVERSATION)) == 3
    lines = content.splitlines()
    path.write_text("\n".join([lines[0], "{oops", *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(PermanentLLMError, match="line 2 is not valid JSON"):
        ReplayProvider(path)


def test_recording_into_an_existing_file_continues_the_call_numbers(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    record(path)
    more = RecordingProvider(ScriptedProvider(["again"]), path)
    asyncio.run(more.complete(req("a1", "next task")))
    replayed = replay(path, [*CONVERSATION, req("a1", "next task")])
    assert replayed[-1].text == "again"


def test_a_failed_call_is_not_recorded(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    recorder = RecordingProvider(ScriptedProvider([PermanentLLMError("x", "no"), "ok"]), path)

    async def run() -> None:
        with pytest.raises(PermanentLLMError):
            await recorder.complete(req("a1", "first"))
        await recorder.complete(req("a1", "first"))

    asyncio.run(run())
    assert replay(path, [req("a1", "first")])[0].text == "ok"


def test_replay_streams_the_recorded_text_to_the_callback(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    record(path)
    pieces: list[str] = []
    asyncio.run(ReplayProvider(path).complete(CONVERSATION[0], pieces.append))
    assert pieces == ["<get_klines/>"]
