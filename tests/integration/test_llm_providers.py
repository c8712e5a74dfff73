"""The real openai and anthropic SDKs over real HTTP against local fake servers.

Each test runs for both providers: what the agent loop relies on (answers, streaming, retries,
error kinds, the request's shape) must hold whichever vendor answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.agents.llm.anthropic_provider import AnthropicProvider
from app.agents.llm.bounds import AnswerTooLargeError
from app.agents.llm.openai_compat import PLACEHOLDER_API_KEY, OpenAICompatibleProvider
from app.agents.llm.port import (
    ChatMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    PermanentLLMError,
    ReplayMismatchError,
    TemporaryLLMError,
)
from app.agents.llm.replay import RecordingProvider, ReplayProvider
from tests.helpers.fake_llm_servers import (
    ENDLESS_CAP_BYTES,
    FakeAnthropicServer,
    FakeOpenAIServer,
    Reply,
    delay,
    endless,
    error,
    text,
    unfinished,
)

SYSTEM = "You are Kestrel's analyst.\n## Available Tools\n<get_klines>...</get_klines>"
ANSWER = "<thinking>RSI is 28</thinking><get_klines><symbol>BTC/USDT</symbol></get_klines>"
KEY = "sk-test-key-123456"


@dataclass
class Rig:
    kind: str
    server: FakeOpenAIServer | FakeAnthropicServer
    make: Callable[..., LLMProvider]

    def run(self, request: LLMRequest | None = None, *, on_delta: Callable[[str], None] | None
            = None, **options: Any) -> LLMResponse:
        provider = self.make(**options)

        async def go() -> LLMResponse:
            try:
                return await provider.complete(request or make_request(), on_delta)
            finally:
                await provider.aclose()

        return asyncio.run(go())


def make_request(*texts: str, agent: str = "analyst-1") -> LLMRequest:
    texts = texts or ("<task task_id='t1'>analyse BTC/USDT</task>",)
    roles = ("user", "assistant")
    return LLMRequest(
        agent_id=agent, task_id="t1", model="test-model", system=SYSTEM,
        messages=[ChatMessage(roles[i % 2], t) for i, t in enumerate(texts)],  # type: ignore[arg-type]
        max_output_tokens=512, temperature=0.2,
    )


def openai_rig(server: FakeOpenAIServer) -> Rig:
    def make(**options: Any) -> LLMProvider:
        settings = {"default_model": "test-model", "timeout_s": 2.0, "max_retries": 2,
                    "stream": False, "base_delay_s": 0.01, "max_delay_s": 0.02,
                    "api_key": KEY, **options}
        api_key = settings.pop("api_key")
        return OpenAICompatibleProvider(server.base_url, api_key, **settings)

    return Rig("openai", server, make)


def anthropic_rig(server: FakeAnthropicServer) -> Rig:
    def make(**options: Any) -> LLMProvider:
        settings = {"default_model": "test-model", "timeout_s": 2.0, "max_retries": 2,
                    "stream": False, "base_delay_s": 0.01, "max_delay_s": 0.02,
                    "api_key": KEY, **options}
        api_key = settings.pop("api_key")
        return AnthropicProvider(api_key, base_url=server.base_url, **settings)

    return Rig("anthropic", server, make)


@pytest.fixture(params=["openai", "anthropic"])
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    if request.param == "openai":
        with FakeOpenAIServer(api_key=KEY) as server:
            yield openai_rig(server)
    else:
        with FakeAnthropicServer(api_key=KEY) as server:
            yield anthropic_rig(server)


def test_plain_answer_returns_text_usage_and_model(rig: Rig) -> None:
    rig.server.script([text(ANSWER, input_tokens=900, output_tokens=30)])
    response = rig.run()
    assert response.text == ANSWER
    assert (response.usage.input_tokens, response.usage.output_tokens) == (900, 30)
    assert response.model == "test-model"
    assert response.provider == ("openai-compatible" if rig.kind == "openai" else "anthropic")
    assert response.finish_reason == "stop"
    assert response.latency_ms > 0
    assert len(rig.server.requests) == 1 and not rig.server.requests[0].streamed


def test_streaming_answer_passes_each_piece_and_returns_the_whole_text(rig: Rig) -> None:
    rig.server.script([text(ANSWER, input_tokens=2000, output_tokens=25, cached_tokens=1500)])
    pieces: list[str] = []
    response = rig.run(on_delta=pieces.append, stream=True)
    assert len(pieces) > 3
    assert "".join(pieces) == response.text == ANSWER
    assert response.usage.input_tokens == 2000
    assert response.usage.cached_input_tokens == 1500
    assert response.usage.output_tokens == 25
    assert rig.server.requests[0].streamed


def test_answer_cut_at_the_token_limit_reports_length(rig: Rig) -> None:
    rig.server.script([text("partial", finish_reason="length")])
    assert rig.run(stream=True).finish_reason == "length"


def test_system_prompt_is_sent_first(rig: Rig) -> None:
    rig.server.script(["ok"])
    rig.run(make_request("first", "reply", "second"))
    body = rig.server.bodies[0]
    if rig.kind == "openai":
        assert body["messages"][0] == {"role": "system", "content": SYSTEM}
        assert [m["role"] for m in body["messages"][1:]] == ["user", "assistant", "user"]
        assert (body["temperature"], body["max_tokens"]) == (0.2, 512)
    else:
        assert body["system"] == [
            {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        assert body["max_tokens"] == 512
        assert "temperature" not in body  # API 2026-10-21 refuses sampling parameters


def test_anthropic_caches_the_conversation_prefix_and_merges_same_role_turns() -> None:
    with FakeAnthropicServer() as server:
        server.script(["ok"])
        request = make_request("task", "call")
        request.messages.append(ChatMessage("assistant", "more"))
        request.messages.append(ChatMessage("user", "<tool_result/>"))
        anthropic_rig(server).run(request)
        messages = server.bodies[0]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == "call\n\nmore"
    assert messages[-1]["content"] == [
        {"type": "text", "text": "<tool_result/>", "cache_control": {"type": "ephemeral"}}]


def test_openai_streaming_asks_for_usage_in_the_final_chunk() -> None:
    with FakeOpenAIServer() as server:
        server.script(["ok"])
        openai_rig(server).run(stream=True)
        body = server.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_rate_limit_then_success_is_retried(rig: Rig) -> None:
    rig.server.script([error(429, retry_after_s=0), ANSWER])
    assert rig.run().text == ANSWER
    assert len(rig.server.bodies) == 2


def test_retry_after_from_the_server_is_honoured() -> None:
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    with FakeOpenAIServer() as server:
        server.script([error(429, retry_after_s=0.3), "ok"])
        assert openai_rig(server).run(sleep=sleep).text == "ok"
    assert pauses == [0.3]


def test_server_errors_give_a_temporary_error_after_all_retries(rig: Rig) -> None:
    rig.server.script([error(500)] * 3)
    with pytest.raises(TemporaryLLMError, match=r"HTTP 500.*gave up after 3 attempts"):
        rig.run(max_retries=2)
    assert len(rig.server.bodies) == 3


def test_refused_key_is_permanent_and_not_retried(rig: Rig) -> None:
    rig.server.script(["never sent"])
    with pytest.raises(PermanentLLMError, match="the API key was refused") as info:
        rig.run(api_key="sk-wrong-key")
    assert not isinstance(info.value, TemporaryLLMError)
    assert len(rig.server.requests) == 1
    assert rig.server.pending == 1


def test_unknown_model_is_explained(rig: Rig) -> None:
    rig.server.script([error(404, "model 'llama3' not found")])
    request = make_request()
    request.model = "llama3"
    with pytest.raises(PermanentLLMError, match="does not know the model 'llama3'"):
        rig.run(request)
    assert len(rig.server.bodies) == 1


def test_no_answer_within_the_timeout_is_temporary(rig: Rig) -> None:
    rig.server.script([delay(3.0, "late")])
    with pytest.raises(TemporaryLLMError, match="within 0.3 s"):
        rig.run(timeout_s=0.3, max_retries=0)


def test_a_stream_that_stalls_is_temporary(rig: Rig) -> None:
    rig.server.script([Reply(text="one two three", chunk_delay_s=2.0)])
    with pytest.raises(TemporaryLLMError):
        rig.run(timeout_s=0.3, max_retries=0, stream=True)


def test_a_server_that_is_not_running_is_temporary() -> None:
    with FakeOpenAIServer() as server:
        rig = openai_rig(server)
    with pytest.raises(TemporaryLLMError, match="cannot reach"):
        rig.run(max_retries=0)


def test_local_server_without_a_key_gets_a_placeholder() -> None:
    with FakeOpenAIServer() as server:
        server.script(["ok"])
        assert openai_rig(server).run(api_key="").text == "ok"
        assert server.requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"


def test_extra_headers_are_sent_with_every_call() -> None:
    with FakeOpenAIServer() as server:
        server.script(["ok"])
        openai_rig(server).run(extra_headers={"HTTP-Referer": "https://kestrel.local"})
        assert server.requests[0].headers["http-referer"] == "https://kestrel.local"


def test_record_then_replay_gives_identical_answers(rig: Rig, tmp_path: Path) -> None:
    path = tmp_path / f"{rig.kind}.jsonl"
    conversation = [make_request("task"), make_request("task", ANSWER, "<tool_result/>")]
    rig.server.script([ANSWER, "BTC trend is up; no trade."])
    recorder = RecordingProvider(rig.make(stream=True), path)

    async def record() -> list[LLMResponse]:
        try:
            return [await recorder.complete(r) for r in conversation]
        finally:
            await recorder.aclose()

    recorded = asyncio.run(record())
    replay = ReplayProvider(path)
    assert replay.recorded_provider == recorded[0].provider and replay.is_llm

    async def play(requests: list[LLMRequest]) -> list[LLMResponse]:
        player = ReplayProvider(path)
        return [await player.complete(r) for r in requests]

    replayed = asyncio.run(play(conversation))
    assert [(r.text, r.usage, r.model, r.finish_reason) for r in replayed] == [
        (r.text, r.usage, r.model, r.finish_reason) for r in recorded]
    assert len(rig.server.bodies) == 2  # the replay called no server

    changed = [conversation[0], make_request("task", ANSWER, "<tool_result>other</tool_result>")]
    with pytest.raises(ReplayMismatchError, match=r"agent analyst-1 call #1: message 2 \(user\)"):
        asyncio.run(play(changed))


def test_a_script_item_can_answer_from_the_request_body(rig: Rig) -> None:
    rig.server.script([lambda body: f"saw {len(body['messages'])} message(s)"])
    expected = 2 if rig.kind == "openai" else 1  # OpenAI's list includes the system message
    assert rig.run(stream=True).text == f"saw {expected} message(s)"


def test_an_exhausted_script_fails_fast_with_a_permanent_error(rig: Rig) -> None:
    with pytest.raises(PermanentLLMError, match="no more answers"):
        rig.run()
    rig.server.default = "fallback"
    assert rig.run().text == "fallback"


def test_cancelling_a_call_in_flight_propagates_cancellation(rig: Rig) -> None:
    rig.server.script([delay(3.0, "late")])
    provider = rig.make(timeout_s=5.0)

    async def scenario() -> None:
        task = asyncio.create_task(provider.complete(make_request()))
        await asyncio.sleep(0.2)
        task.cancel()
        try:
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            await provider.aclose()

    asyncio.run(scenario())
    assert len(rig.server.bodies) == 1


# -- the bounds of one answer (make_request asks for 512 output tokens) -------------------------

TEXT_LIMIT = 51_200  # 100 characters a token
RAW_LIMIT = 4 * 1024 * 1024  # 8 KiB a token


def test_an_answer_that_streams_forever_is_cut_at_its_character_bound(rig: Rig) -> None:
    rig.server.script([endless("text")])
    pieces: list[str] = []
    with pytest.raises(AnswerTooLargeError) as caught:
        rig.run(on_delta=pieces.append, stream=True)
    assert str(caught.value) == (
        f"{caught.value.provider}: the model's answer passed 51,200 characters (the limit for "
        "512 output tokens); the stream was closed")
    assert isinstance(caught.value, PermanentLLMError), "a runaway answer is not asked again"
    assert sum(map(len, pieces)) <= TEXT_LIMIT
    assert len(rig.server.bodies) == 1
    assert rig.server.written[0] < ENDLESS_CAP_BYTES, "the client stopped reading"


def test_a_stream_of_events_without_text_is_cut_at_its_byte_bound(rig: Rig) -> None:
    rig.server.script([endless("pings")])
    with pytest.raises(AnswerTooLargeError, match=(
            r"sent more than 4,194,304 bytes for one answer \(the limit for 512 output "
            r"tokens\); the connection was closed")) as caught:
        rig.run(stream=True, timeout_s=10.0, max_retries=0)
    assert caught.value.limit == RAW_LIMIT and caught.value.unit == "bytes"
    assert rig.server.written[0] < ENDLESS_CAP_BYTES


def test_an_answer_whose_body_never_ends_is_cut_at_its_byte_bound(rig: Rig) -> None:
    rig.server.script([endless("text")])
    with pytest.raises(AnswerTooLargeError, match="sent more than 4,194,304 bytes for one answer"):
        rig.run(stream=False, timeout_s=10.0, max_retries=0)
    assert rig.server.written[0] < ENDLESS_CAP_BYTES


def test_a_plain_answer_longer_than_its_token_limit_allows_is_dropped(rig: Rig) -> None:
    rig.server.script([text("x" * (TEXT_LIMIT + 1))])
    with pytest.raises(AnswerTooLargeError, match=(
            r"passed 51,200 characters \(the limit for 512 output tokens\); the answer was "
            "dropped")):
        rig.run()
    assert len(rig.server.bodies) == 1


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
def test_an_answer_just_within_its_bounds_is_read_whole(rig: Rig, stream: bool) -> None:
    answer = "y" * TEXT_LIMIT
    rig.server.script([text(answer)])
    assert rig.run(stream=stream, timeout_s=10.0).text == answer


def test_a_stream_that_trickles_forever_ends_at_the_answers_time_bound(rig: Rig) -> None:
    rig.server.script([endless("text", piece="tick ", chunk_delay_s=0.02)])
    with pytest.raises(TemporaryLLMError, match=(
            r"no complete answer from .* within 0.5 s \(the time limit of one answer\); the "
            "connection was closed")):
        rig.run(stream=True, timeout_s=0.5, max_retries=0)


def test_a_stream_that_is_never_ended_is_a_temporary_timeout(rig: Rig) -> None:
    rig.server.script([unfinished(ANSWER)])
    with pytest.raises(TemporaryLLMError, match=r"(within|for) 0.5 s"):
        rig.run(stream=True, timeout_s=0.5, max_retries=0)
