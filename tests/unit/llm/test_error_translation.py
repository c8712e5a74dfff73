"""Every SDK exception maps to the right port error, and so to the right number of attempts."""

from __future__ import annotations

import asyncio

import anthropic
import httpx2
import openai
import pytest
from anthropic._error_classes import make_status_error as anthropic_status_error

from app.agents.llm.anthropic_provider import translate_anthropic_error
from app.agents.llm.openai_compat import translate_openai_error
from app.agents.llm.port import LLMError, PermanentLLMError, TemporaryLLMError
from app.agents.llm.retry import ThrottledLLMError, with_retries

URL = "http://127.0.0.1:11434/v1"
REQUEST = httpx2.Request("POST", f"{URL}/chat/completions")
ATTEMPTS = 3


def response(status: int, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(status, headers=headers or {}, request=REQUEST)


def openai_status(status: int, message: str = "boom", **headers: str) -> openai.APIStatusError:
    client = openai.OpenAI(api_key="k", base_url=URL)
    return client._make_status_error(message, body={"message": message},
                                     response=response(status, headers))


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


OPENAI_CASES = [
    (openai.APITimeoutError(request=REQUEST), TemporaryLLMError, "did not answer within 5 s"),
    (openai.APIConnectionError(request=REQUEST), TemporaryLLMError, "cannot reach the server"),
    (openai_status(429, "slow down"), ThrottledLLMError, "rate limiting (HTTP 429): slow down"),
    (openai_status(500), TemporaryLLMError, "failed (HTTP 500)"),
    (openai_status(503), TemporaryLLMError, "failed (HTTP 503)"),
    (openai_status(409), TemporaryLLMError, "failed (HTTP 409)"),
    (openai_status(401), PermanentLLMError, "the API key was refused"),
    (openai_status(403), PermanentLLMError, "refused access to the model 'llama3'"),
    (openai_status(404, "model 'llama3' not found"), PermanentLLMError,
     f"the server at {URL} does not know the model 'llama3'"),
    (openai_status(400, "max_tokens too large"), PermanentLLMError,
     "refused the request (HTTP 400): max_tokens too large"),
    (openai_status(422), PermanentLLMError, "refused the request (HTTP 422)"),
    (openai.APIError("stream broke", REQUEST, body=None), TemporaryLLMError, "mid-answer"),
    (openai.OpenAIError("odd"), PermanentLLMError, "the openai client failed"),
]


@pytest.mark.parametrize(("exc", "kind", "words"), OPENAI_CASES,
                         ids=[type(c[0]).__name__ + str(i) for i, c in enumerate(OPENAI_CASES)])
def test_openai_exceptions_map_to_port_errors_and_retry_counts(
    exc: openai.OpenAIError, kind: type[LLMError], words: str
) -> None:
    error = translate_openai_error(exc, base_url=URL, model="llama3", timeout_s=5)
    assert isinstance(error, kind)
    assert words in str(error)
    assert error.provider == "openai-compatible"
    expected = ATTEMPTS if isinstance(error, TemporaryLLMError) else 1
    assert attempts_used(error) == expected


def test_openai_rate_limit_carries_the_retry_after_hint() -> None:
    error = translate_openai_error(openai_status(429, **{"retry-after": "3"}), base_url=URL,
                                   model="m", timeout_s=5)
    assert isinstance(error, ThrottledLLMError) and error.retry_after_s == 3.0


def anthropic_status(status: int, kind: str = "api_error", **headers: str) -> Exception:
    body = {"type": "error", "error": {"type": kind, "message": f"{kind} says no"}}
    return anthropic_status_error("x", body=body, response=response(status, headers))


ANTHROPIC_CASES = [
    (anthropic.APITimeoutError(request=REQUEST), TemporaryLLMError, "did not answer"),
    (anthropic.APIConnectionError(request=REQUEST), TemporaryLLMError, "cannot reach"),
    (anthropic_status(429, "rate_limit_error"), ThrottledLLMError, "rate_limit_error says no"),
    (anthropic_status(529, "overloaded_error"), TemporaryLLMError, "HTTP 529"),
    (anthropic_status(500), TemporaryLLMError, "HTTP 500"),
    (anthropic_status(503), TemporaryLLMError, "HTTP 503"),
    (anthropic_status(504), TemporaryLLMError, "HTTP 504"),
    (anthropic_status(408), TemporaryLLMError, "HTTP 408"),
    (anthropic_status(401, "authentication_error"), PermanentLLMError, "API key was refused"),
    (anthropic_status(403, "permission_error"), PermanentLLMError, "refused access"),
    (anthropic_status(404, "not_found_error"), PermanentLLMError,
     "does not know the model 'claude-x'"),
    (anthropic_status(400, "invalid_request_error"), PermanentLLMError, "refused the request"),
    (anthropic_status(402, "billing_error"), PermanentLLMError, "asks for payment"),
    (anthropic_status(413, "request_too_large"), PermanentLLMError, "HTTP 413"),
    (anthropic.AnthropicError("odd"), PermanentLLMError, "the anthropic client failed"),
]


@pytest.mark.parametrize(("exc", "kind", "words"), ANTHROPIC_CASES,
                         ids=[type(c[0]).__name__ + str(i) for i, c in enumerate(ANTHROPIC_CASES)])
def test_anthropic_exceptions_map_to_port_errors_and_retry_counts(
    exc: anthropic.AnthropicError, kind: type[LLMError], words: str
) -> None:
    error = translate_anthropic_error(exc, base_url="https://api.anthropic.com",
                                      model="claude-x", timeout_s=5)
    assert isinstance(error, kind)
    assert words in str(error)
    assert error.provider == "anthropic"
    expected = ATTEMPTS if isinstance(error, TemporaryLLMError) else 1
    assert attempts_used(error) == expected
