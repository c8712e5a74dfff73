"""Every SDK exception maps to the right port error, and so to the right number of attempts.

The table in ``app.agents.llm.errors`` is shared by both clients: each of its rows is exercised
below for each vendor, with the exact words the person reads, and the rows are checked to be
covered, so a row added without a case fails here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import anthropic
import httpx2
import openai
import pytest
from anthropic._error_classes import make_status_error as anthropic_status_error

from app.agents.llm.anthropic_provider import ANTHROPIC_ERRORS
from app.agents.llm.errors import (
    ERROR_TABLE,
    Failure,
    SdkErrors,
    facts_of,
    row_for,
    server_detail,
    translate_error,
)
from app.agents.llm.openai_compat import OPENAI_ERRORS
from app.agents.llm.port import (
    LLMError,
    PermanentLLMError,
    TemporaryLLMError,
    ToolsRefusedError,
)
from app.agents.llm.retry import ThrottledLLMError, with_retries

URL = "http://127.0.0.1:11434/v1"
ANTHROPIC_URL = "https://api.anthropic.com"
REQUEST = httpx2.Request("POST", f"{URL}/chat/completions")
ATTEMPTS = 3


def response(status: int, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(status, headers=headers or {}, request=REQUEST)


def openai_status(status: int, message: str = "boom", **headers: str) -> openai.APIStatusError:
    client = openai.OpenAI(api_key="k", base_url=URL)
    return client._make_status_error(message, body={"message": message},
                                     response=response(status, headers))


def anthropic_status(status: int, kind: str = "api_error", **headers: str) -> Exception:
    body = {"type": "error", "error": {"type": kind, "message": f"{kind} says no"}}
    return anthropic_status_error("x", body=body, response=response(status, headers))


def attempts_used(error: LLMError) -> int:
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1
        raise error

    async def no_sleep(_: float) -> None:
        return None

    with pytest.raises(LLMError):
        asyncio.run(with_retries(call, attempts=ATTEMPTS, base_delay_s=0, max_delay_s=0,
                                 sleep=no_sleep))
    return calls


# --- each row of the shared table, for each vendor --------------------------------------------


@dataclass(frozen=True)
class RowCase:
    """One failure, the row it must hit (by its index in ERROR_TABLE) and what it must say."""

    row: int
    sdk: SdkErrors
    make: Callable[[], BaseException]
    kind: type[LLMError]
    words: str
    offered_tools: bool = False

    @property
    def url(self) -> str:
        return URL if self.sdk is OPENAI_ERRORS else ANTHROPIC_URL

    def translate(self) -> LLMError:
        model = "llama3" if self.sdk is OPENAI_ERRORS else "claude-x"
        return translate_error(self.make(), self.sdk, base_url=self.url, model=model,
                               timeout_s=5, offered_tools=self.offered_tools)


OAI, ANT = OPENAI_ERRORS, ANTHROPIC_ERRORS
OW, AW = f"the server at {URL}", f"the server at {ANTHROPIC_URL}"
KEY_HINT = ("Check the key stored in the OS keyring (or the KESTREL_<NAME> environment "
            "variable).")
ROW_CASES = [
    # 0: the SDK's own timeout
    RowCase(0, OAI, lambda: openai.APITimeoutError(request=REQUEST), TemporaryLLMError,
            f"{OW} did not answer within 5 s"),
    RowCase(0, ANT, lambda: anthropic.APITimeoutError(request=REQUEST), TemporaryLLMError,
            f"{AW} did not answer within 5 s"),
    # 1: unreachable; a local OpenAI-compatible server may simply not be running
    RowCase(1, OAI, lambda: openai.APIConnectionError(request=REQUEST), TemporaryLLMError,
            f"cannot reach {OW} (is it running? Connection error.)"),
    RowCase(1, ANT, lambda: anthropic.APIConnectionError(request=REQUEST), TemporaryLLMError,
            f"cannot reach {AW} (Connection error.)"),
    # 2: tools offered natively and refused in words naming them
    RowCase(2, OAI, lambda: openai_status(400, "this model does not support tools"),
            ToolsRefusedError,
            f"{OW} refused the tools offered natively (HTTP 400): this model does not support "
            "tools", offered_tools=True),
    RowCase(2, ANT, lambda: anthropic_status(500, "tool_use_unsupported"), ToolsRefusedError,
            f"{AW} refused the tools offered natively (HTTP 500): tool_use_unsupported says no",
            offered_tools=True),
    # 3: rate limited
    RowCase(3, OAI, lambda: openai_status(429, "slow down"), ThrottledLLMError,
            f"{OW} is rate limiting (HTTP 429): slow down"),
    RowCase(3, ANT, lambda: anthropic_status(429, "rate_limit_error"), ThrottledLLMError,
            f"{AW} is rate limiting (HTTP 429): rate_limit_error says no"),
    # 4: the server failed or was busy
    RowCase(4, OAI, lambda: openai_status(503), ThrottledLLMError, f"{OW} failed (HTTP 503): boom"),
    RowCase(4, ANT, lambda: anthropic_status(529, "overloaded_error"), ThrottledLLMError,
            f"{AW} failed (HTTP 529): overloaded_error says no"),
    # 5: the key
    RowCase(5, OAI, lambda: openai_status(401, "bad key"), PermanentLLMError,
            f"the API key was refused by {OW} (HTTP 401): bad key. {KEY_HINT}"),
    RowCase(5, ANT, lambda: anthropic_status(401, "authentication_error"), PermanentLLMError,
            f"the API key was refused by {AW} (HTTP 401): authentication_error says no. "
            f"{KEY_HINT}"),
    # 6: the model is not this key's
    RowCase(6, OAI, lambda: openai_status(403, "no"), PermanentLLMError,
            f"{OW} refused access to the model 'llama3' (HTTP 403): no"),
    RowCase(6, ANT, lambda: anthropic_status(403, "permission_error"), PermanentLLMError,
            f"{AW} refused access to the model 'claude-x' (HTTP 403): permission_error says no"),
    # 7: an unknown model; on an OpenAI-compatible server often a base URL without /v1
    RowCase(7, OAI, lambda: openai_status(404, "model 'llama3' not found"), PermanentLLMError,
            f"{OW} does not know the model 'llama3' (HTTP 404: model 'llama3' not found); check "
            "the model name, and that the base URL ends in /v1"),
    RowCase(7, ANT, lambda: anthropic_status(404, "not_found_error"), PermanentLLMError,
            f"{AW} does not know the model 'claude-x' (HTTP 404: not_found_error says no)"),
    # 8: payment (OpenRouter's credits, Anthropic's billing)
    RowCase(8, OAI, lambda: openai_status(402, "insufficient credits"), PermanentLLMError,
            f"{OW} asks for payment (HTTP 402): insufficient credits"),
    RowCase(8, ANT, lambda: anthropic_status(402, "billing_error"), PermanentLLMError,
            f"{AW} asks for payment (HTTP 402): billing_error says no"),
    # 9: any other refusal of the request itself
    RowCase(9, OAI, lambda: openai_status(400, "max_tokens too large"), PermanentLLMError,
            f"{OW} refused the request (HTTP 400): max_tokens too large"),
    RowCase(9, ANT, lambda: anthropic_status(413, "request_too_large"), PermanentLLMError,
            f"{AW} refused the request (HTTP 413): request_too_large says no"),
    # 10: a status that is neither the request's fault nor the server's failure
    RowCase(10, OAI, lambda: openai_status(302, "moved"), PermanentLLMError,
            f"{OW} answered HTTP 302: moved"),
    RowCase(10, ANT, lambda: anthropic_status(302), PermanentLLMError,
            f"{AW} answered HTTP 302: api_error says no"),
    # 11: an answer the SDK could not read
    RowCase(11, OAI, lambda: openai.APIResponseValidationError(response(200), None),
            PermanentLLMError,
            f"{OW} sent an answer in an unexpected format: Data returned by API invalid for "
            "expected schema."),
    RowCase(11, ANT, lambda: anthropic.APIResponseValidationError(response(200), None),
            PermanentLLMError,
            f"{AW} sent an answer in an unexpected format: Data returned by API invalid for "
            "expected schema."),
    # 12: an error event in the middle of a stream
    RowCase(12, OAI, lambda: openai.APIError("stream broke", REQUEST, body=None),
            TemporaryLLMError, f"{OW} reported an error mid-answer: stream broke"),
    RowCase(12, ANT, lambda: anthropic.APIError("overloaded", REQUEST, body=None),
            TemporaryLLMError, f"{AW} reported an error mid-answer: overloaded"),
    # 13: a read below the SDK timed out
    RowCase(13, OAI, lambda: httpx2.ReadTimeout("timed out", request=REQUEST), TemporaryLLMError,
            f"{OW} stopped answering for 5 s"),
    RowCase(13, ANT, lambda: httpx2.ReadTimeout("timed out", request=REQUEST), TemporaryLLMError,
            f"{AW} stopped answering for 5 s"),
    # 14: the connection failed below the SDK
    RowCase(14, OAI, lambda: httpx2.RemoteProtocolError("peer closed", request=REQUEST),
            TemporaryLLMError, f"the connection to {URL} failed: peer closed"),
    RowCase(14, ANT, lambda: httpx2.ReadError("reset", request=REQUEST), TemporaryLLMError,
            f"the connection to {ANTHROPIC_URL} failed: reset"),
    # 15: the whole answer's time limit
    RowCase(15, OAI, TimeoutError, TemporaryLLMError,
            f"no complete answer from {URL} within 5 s (the time limit of one answer); the "
            "connection was closed"),
    RowCase(15, ANT, TimeoutError, TemporaryLLMError,
            f"no complete answer from {ANTHROPIC_URL} within 5 s (the time limit of one "
            "answer); the connection was closed"),
    # 16: anything else the SDK raised
    RowCase(16, OAI, lambda: openai.OpenAIError("odd"), PermanentLLMError,
            "the openai client failed: odd"),
    RowCase(16, ANT, lambda: anthropic.AnthropicError("odd"), PermanentLLMError,
            "the anthropic client failed: odd"),
]


@pytest.mark.parametrize("case", ROW_CASES,
                         ids=[f"row{c.row}-{c.sdk.client}" for c in ROW_CASES])
def test_each_row_gives_its_error_and_words_for_each_vendor(case: RowCase) -> None:
    facts = facts_of(case.make(), case.sdk, base_url=case.url, model="m", timeout_s=5,
                     offered_tools=case.offered_tools)
    assert row_for(facts) is ERROR_TABLE[case.row]
    error = case.translate()
    assert type(error) is case.kind
    assert str(error) == f"{case.sdk.provider}: {case.words}"
    assert error.provider == case.sdk.provider
    assert attempts_used(error) == (ATTEMPTS if isinstance(error, TemporaryLLMError) else 1)


def test_every_row_has_a_case_for_each_vendor() -> None:
    covered = {(case.row, case.sdk.client) for case in ROW_CASES}
    assert covered == {(row, sdk.client) for row in range(len(ERROR_TABLE)) for sdk in (OAI, ANT)}


def test_every_failure_ends_in_a_row_that_always_applies() -> None:
    for failure in Failure:
        last = [row for row in ERROR_TABLE if row.failure is failure][-1]
        assert last.applies.__name__ == "_always", failure


def test_tools_named_in_a_refusal_of_a_request_that_offered_none_are_a_plain_refusal() -> None:
    error = translate_error(openai_status(400, "this model does not support tools"), OAI,
                            base_url=URL, model="m", timeout_s=5, offered_tools=False)
    assert type(error) is PermanentLLMError and "refused the request (HTTP 400)" in str(error)


@pytest.mark.parametrize(("sdk", "exc"), [
    (OAI, openai_status(429, **{"retry-after": "3"})),
    (OAI, openai_status(503, **{"retry-after-ms": "1500"})),
    (ANT, anthropic_status(429, "rate_limit_error", **{"retry-after": "3"})),
    (ANT, anthropic_status(529, "overloaded_error", **{"retry-after-ms": "1500"})),
])
def test_a_throttled_error_carries_the_servers_retry_after(sdk: SdkErrors, exc: Exception) -> None:
    error = translate_error(exc, sdk, base_url=URL, model="m", timeout_s=5)
    assert isinstance(error, ThrottledLLMError)
    assert error.retry_after_s == (3.0 if "429" in str(error) else 1.5)


def test_an_exception_of_neither_sdk_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match="ValueError is not an error of the openai client"):
        translate_error(ValueError("x"), OAI, base_url=URL, model="m", timeout_s=5)
    with pytest.raises(TypeError, match="is not an error of the anthropic client"):
        translate_error(openai.OpenAIError("x"), ANT, base_url=URL, model="m", timeout_s=5)


@pytest.mark.parametrize(("body", "detail"), [
    ({"error": {"message": "nested"}}, "nested"),
    ({"message": "flat"}, "flat"),
    ({"error": "not a dict"}, "fallback"),
    ("  plain text  ", "plain text"),
    ("x" * 400, "x" * 300),
    (None, "fallback"),
])
def test_the_servers_own_words_are_read_from_any_error_body(body: object, detail: str) -> None:
    assert server_detail(body, "fallback") == detail


# --- what the two SDKs raise for common statuses ----------------------------------------------


OPENAI_CASES = [
    (openai_status(500), TemporaryLLMError, "failed (HTTP 500)"),
    (openai_status(409), TemporaryLLMError, "failed (HTTP 409)"),
    (openai_status(422), PermanentLLMError, "refused the request (HTTP 422)"),
]


@pytest.mark.parametrize(("exc", "kind", "words"), OPENAI_CASES,
                         ids=[type(c[0]).__name__ + str(i) for i, c in enumerate(OPENAI_CASES)])
def test_openai_exceptions_map_to_port_errors_and_retry_counts(
    exc: openai.OpenAIError, kind: type[LLMError], words: str
) -> None:
    error = translate_error(exc, OAI, base_url=URL, model="llama3", timeout_s=5)
    assert isinstance(error, kind)
    assert words in str(error)
    assert error.provider == "openai-compatible"
    expected = ATTEMPTS if isinstance(error, TemporaryLLMError) else 1
    assert attempts_used(error) == expected


ANTHROPIC_CASES = [
    (anthropic_status(500), TemporaryLLMError, "HTTP 500"),
    (anthropic_status(503), TemporaryLLMError, "HTTP 503"),
    (anthropic_status(504), TemporaryLLMError, "HTTP 504"),
    (anthropic_status(408), TemporaryLLMError, "HTTP 408"),
    (anthropic_status(400, "invalid_request_error"), PermanentLLMError, "refused the request"),
]


@pytest.mark.parametrize(("exc", "kind", "words"), ANTHROPIC_CASES,
                         ids=[type(c[0]).__name__ + str(i) for i, c in enumerate(ANTHROPIC_CASES)])
def test_anthropic_exceptions_map_to_port_errors_and_retry_counts(
    exc: anthropic.AnthropicError, kind: type[LLMError], words: str
) -> None:
    error = translate_error(exc, ANT, base_url=ANTHROPIC_URL, model="claude-x", timeout_s=5)
    assert isinstance(error, kind)
    assert words in str(error)
    assert error.provider == "anthropic"
    expected = ATTEMPTS if isinstance(error, TemporaryLLMError) else 1
    assert attempts_used(error) == expected
