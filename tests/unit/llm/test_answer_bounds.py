"""The size bounds of one model answer: what a token limit allows, and how passing it is said."""

from __future__ import annotations

import asyncio
from functools import partial

import httpx2
import pytest

from app.agents.llm.bounds import (
    MAX_RAW_BYTES,
    MIN_ANSWER_CHARS,
    MIN_RAW_BYTES,
    AnswerBounds,
    AnswerText,
    AnswerTooLargeError,
    RawLimitPassed,
    bounded_http_client,
    raw_limit,
    raw_limit_passed,
)
from app.agents.llm.port import PermanentLLMError


def test_the_bounds_grow_with_the_token_limit_between_a_floor_and_a_ceiling() -> None:
    default = AnswerBounds.for_tokens(2048)
    assert (default.chars, default.raw_bytes) == (204_800, 16 * 1024 * 1024)
    tiny = AnswerBounds.for_tokens(8)
    assert (tiny.chars, tiny.raw_bytes) == (MIN_ANSWER_CHARS, MIN_RAW_BYTES)
    assert AnswerBounds.for_tokens(200_000).raw_bytes == MAX_RAW_BYTES


def test_the_text_of_a_stream_is_kept_up_to_its_bound_and_not_a_character_more() -> None:
    text = AnswerText(AnswerBounds.for_tokens(8), "anthropic")
    text.add("a" * (MIN_ANSWER_CHARS - 1))
    text.add("b")
    with pytest.raises(AnswerTooLargeError) as caught:
        text.add("c")
    assert text.text() == "a" * (MIN_ANSWER_CHARS - 1) + "b"
    assert str(caught.value) == ("anthropic: the model's answer passed 4,096 characters (the limit "
                                 "for 8 output tokens); the stream was closed")
    assert isinstance(caught.value, PermanentLLMError)
    assert (caught.value.limit, caught.value.unit) == (MIN_ANSWER_CHARS, "characters")


def test_the_wire_bound_names_the_server_and_the_token_limit() -> None:
    error = AnswerBounds.for_tokens(2048).raw_passed("openai-compatible", "the server at X")
    assert str(error) == ("openai-compatible: the server at X sent more than 16,777,216 bytes "
                          "for one answer (the limit for 2,048 output tokens); the connection "
                          "was closed")


def test_a_passed_wire_bound_is_found_under_the_sdks_connection_error() -> None:
    try:
        try:
            raise RawLimitPassed(10)
        except RawLimitPassed as inner:
            raise ConnectionError("the SDK's wrapper") from inner
    except ConnectionError as outer:
        assert raw_limit_passed(outer) is not None
    assert raw_limit_passed(ConnectionError("another failure")) is None


def _body_of(size: int, *, declared: bool) -> httpx2.MockTransport:
    def answer(_request: httpx2.Request) -> httpx2.Response:
        if declared:
            return httpx2.Response(200, content=b"x" * size)

        async def chunks():  # no Content-Length: read as it comes
            for _ in range(size // 1000):
                yield b"x" * 1000

        return httpx2.Response(200, content=chunks())

    return httpx2.MockTransport(answer)


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_response_body_over_the_limit_of_the_answer_being_read_is_refused(
    declared: bool,
) -> None:
    async def read(limit: int, size: int) -> int:
        transport = _body_of(size, declared=declared)  # instead of the network
        client = bounded_http_client(partial(httpx2.AsyncClient, transport=transport), 5.0)
        try:
            with raw_limit(limit):
                response = await client.get("http://model.test/answer")
            return len(response.content)
        finally:
            await client.aclose()

    assert asyncio.run(read(10_000, 10_000)) == 10_000
    with pytest.raises(RawLimitPassed, match="passed 9,999 bytes"):
        asyncio.run(read(9_999, 10_000))
