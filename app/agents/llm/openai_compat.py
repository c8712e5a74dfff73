"""The OpenAI-compatible chat-completions adapter (OpenAI, DeepSeek, OpenRouter, Ollama, LM Studio,
vLLM, llama.cpp's server), through the ``openai`` SDK with a configurable base URL.

Why one adapter for all of them: they speak the same ``/chat/completions`` wire format, so the
differences (key or no key, usage reported or not, cache fields) are handled as data here. SDK
exceptions are translated once, at this border, by the table both clients share
(``app.agents.llm.errors``): into ``TemporaryLLMError`` (retried by ``with_retries``) or
``PermanentLLMError``, with a sentence a person can act on.

Tools a request offers natively go out as ``tools`` (one call per answer:
``parallel_tool_calls`` off); the model's ``tool_calls`` come back as ``NativeCall``s, and a
conversation's earlier native calls and their results are sent as the assistant's ``tool_calls``
and ``tool`` messages. A server that sends no usage has its tokens counted here (estimated).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import openai

from app.agents.llm.bounds import (
    AnswerBounds,
    AnswerText,
    RawLimitPassed,
    bounded_http_client,
    raw_limit,
    raw_limit_passed,
)
from app.agents.llm.errors import SdkErrors, translate_error
from app.agents.llm.limits import ProviderLimiter
from app.agents.llm.port import (
    ChatMessage,
    LLMRequest,
    LLMResponse,
    LLMUsage,
    NativeCall,
    PermanentLLMError,
    StreamCallback,
)
from app.agents.llm.retry import Backoff, Sleep, with_retries
from app.agents.llm.tokens import complete_usage

NAME = "openai-compatible"
# Local servers (Ollama, LM Studio, llama.cpp) accept any key, but the SDK sends what it is given.
PLACEHOLDER_API_KEY = "not-needed"  # noqa: S105 - not a secret: sent to servers that need none
OPENAI_HOST = "api.openai.com"
# OpenAI's reasoning models refuse a temperature other than their default (HTTP 400).
_NO_TEMPERATURE_PREFIXES = ("o1", "o3", "o4", "gpt-5")
# The SDK's failures, for the shared table (app.agents.llm.errors); a local server may simply not
# be running, and an unknown model is often a base URL without its /v1.
OPENAI_ERRORS = SdkErrors(
    provider=NAME, client="openai", timeout=openai.APITimeoutError,
    unreachable=openai.APIConnectionError, status=openai.APIStatusError,
    bad_format=openai.APIResponseValidationError, mid_answer=openai.APIError,
    base=openai.OpenAIError, unreachable_hint="is it running? ",
    not_found_hint="; check the model name, and that the base URL ends in /v1",
)


@dataclass(frozen=True, slots=True)
class _Answer:
    text: str
    usage: LLMUsage
    model: str
    finish_reason: str
    calls: tuple[NativeCall, ...] = ()


class OpenAICompatibleProvider:
    """Answers ``LLMRequest``s through ``POST {base_url}/chat/completions``.

    Args:
        base_url: e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:11434/v1``.
        api_key: the key; empty or ``None`` sends a placeholder (local servers need none).
        default_model: used when a request names no model.
        timeout_s: the longest one answer may take, from the request to its last byte (the
            request's own ``timeout_s`` may shorten it). Its size is bounded too, by the request's
            ``max_output_tokens`` (``app.agents.llm.bounds``).
        max_retries: extra attempts after a temporary error (0 = try once).
        stream: stream the answer (``on_delta`` gets each piece as it arrives). When a stream
            breaks and the call is retried, ``on_delta`` then gets the new attempt's pieces from
            its start; the returned text is the successful attempt's alone.
        extra_headers: sent with every call (e.g. OpenRouter's ``HTTP-Referer``).
        base_delay_s / max_delay_s / sleep / jitter: the backoff policy (see ``with_retries``).
        limiter: the endpoint's limiter shared with its other callers (``app.agents.llm.limits``):
            a Retry-After one call is given then holds them all; ``None``: this provider alone.
    """

    name = NAME
    is_llm = True

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        default_model: str,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        stream: bool = True,
        extra_headers: dict[str, str] | None = None,
        base_delay_s: float = 1.0,
        max_delay_s: float = 30.0,
        sleep: Sleep = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        limiter: ProviderLimiter | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.default_model = default_model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.stream = stream
        self._backoff: Backoff = {"base_delay_s": base_delay_s, "max_delay_s": max_delay_s,
                                  "sleep": sleep, "jitter": jitter, "limiter": limiter}
        self._client = openai.AsyncOpenAI(
            base_url=self.base_url, api_key=api_key or PLACEHOLDER_API_KEY, max_retries=0,
            timeout=timeout_s, default_headers=extra_headers,
            http_client=bounded_http_client(openai.DefaultAsyncHttpxClient, timeout_s),
        )

    async def complete(
        self, request: LLMRequest, on_delta: StreamCallback | None = None
    ) -> LLMResponse:
        model = request.model or self.default_model
        timeout_s = min(self.timeout_s, request.timeout_s)
        params = self.request_params(request, model)
        bounds = AnswerBounds.for_tokens(request.max_output_tokens)
        started = time.perf_counter()
        answer = await with_retries(
            lambda: self._attempt(params, model, timeout_s, bounds, on_delta),
            attempts=self.max_retries + 1, **self._backoff,
        )
        usage, estimated = complete_usage(answer.usage, request, answer.text, answer.calls)
        return LLMResponse(
            text=answer.text, usage=usage, model=answer.model, provider=self.name,
            latency_ms=(time.perf_counter() - started) * 1000.0, finish_reason=answer.finish_reason,
            tool_calls=answer.calls, usage_estimated=estimated,
        )

    def request_params(self, request: LLMRequest, model: str) -> dict[str, Any]:
        """The chat-completions arguments: the static system prompt first, then the conversation,
        and the tools when the request offers them natively."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        native = bool(request.tools)
        messages.extend(_message(m, native) for m in request.messages)
        # OpenAI itself wants max_completion_tokens (newer models refuse max_tokens); every other
        # compatible server (Ollama, vLLM, DeepSeek, OpenRouter...) knows max_tokens.
        on_openai = urlsplit(self.base_url).hostname == OPENAI_HOST
        limit_field = "max_completion_tokens" if on_openai else "max_tokens"
        params: dict[str, Any] = {
            "model": model, "messages": messages, limit_field: request.max_output_tokens,
        }
        if not model.lower().split("/")[-1].startswith(_NO_TEMPERATURE_PREFIXES):
            params["temperature"] = request.temperature
        if native:
            params["tools"] = [
                {"type": "function", "function": {"name": t.name, "description": t.description,
                                                  "parameters": t.parameters}}
                for t in request.tools
            ]
            params["parallel_tool_calls"] = False  # one call per answer, as in XML
        if self.stream:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
        return params

    async def aclose(self) -> None:
        await self._client.close()

    async def _attempt(
        self, params: dict[str, Any], model: str, timeout_s: float, bounds: AnswerBounds,
        on_delta: StreamCallback | None,
    ) -> _Answer:
        where = f"the server at {self.base_url}"
        try:
            # The SDK's timeout bounds each read; this bounds the whole answer (a trickling stream).
            with raw_limit(bounds.raw_bytes):
                async with asyncio.timeout(timeout_s + 1.0):
                    if self.stream:
                        return await self._streamed(params, model, timeout_s, bounds, on_delta)
                    answer = await self._plain(params, model, timeout_s, bounds)
        except RawLimitPassed as exc:
            raise bounds.raw_passed(self.name, where) from exc
        except OPENAI_ERRORS.caught as exc:
            if raw_limit_passed(exc) is not None:
                raise bounds.raw_passed(self.name, where) from exc
            raise translate_error(exc, OPENAI_ERRORS, base_url=self.base_url, model=model,
                                  timeout_s=timeout_s, offered_tools="tools" in params) from exc
        if on_delta is not None and answer.text:
            on_delta(answer.text)
        return answer

    async def _plain(
        self, params: dict[str, Any], model: str, timeout_s: float, bounds: AnswerBounds
    ) -> _Answer:
        completion = await self._client.chat.completions.create(**params, timeout=timeout_s)
        if not completion.choices:
            raise PermanentLLMError(self.name, f"the server at {self.base_url} sent no answer")
        choice = completion.choices[0]
        text = choice.message.content or ""
        calls = tuple(
            native_call(c.id, c.function.name, c.function.arguments)
            for c in choice.message.tool_calls or () if getattr(c, "function", None) is not None
        )
        if len(text) + sum(len(str(c.arguments)) for c in calls) > bounds.chars:
            raise bounds.text_passed(self.name, streamed=False)
        return _Answer(
            text=text, usage=usage_from_openai(completion.usage),
            model=completion.model or model, finish_reason=choice.finish_reason or "stop",
            calls=calls,
        )

    async def _streamed(
        self, params: dict[str, Any], model: str, timeout_s: float, bounds: AnswerBounds,
        on_delta: StreamCallback | None,
    ) -> _Answer:
        text = AnswerText(bounds, self.name)
        calls = _StreamedCalls(AnswerText(bounds, self.name))
        usage = LLMUsage(0, 0)
        finish = "stop"
        reported_model = ""
        stream = await self._client.chat.completions.create(**params, timeout=timeout_s)
        try:
            async for chunk in stream:
                reported_model = chunk.model or reported_model
                if chunk.usage is not None:
                    usage = usage_from_openai(chunk.usage)
                for choice in chunk.choices:
                    delta = choice.delta
                    piece = delta.content if delta is not None else None
                    if piece:
                        text.add(piece)  # past its bound: raises, and the stream is closed
                        if on_delta is not None:
                            on_delta(piece)
                    if delta is not None and delta.tool_calls:
                        calls.add(delta.tool_calls)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        finally:
            await stream.close()
        return _Answer(text.text(), usage, reported_model or model, finish, calls.calls())


class _StreamedCalls:
    """Native tool calls as a stream sends them: each by its index, its id and name in its first
    piece, its arguments' JSON text in pieces (bounded like the answer's text)."""

    def __init__(self, arguments: AnswerText) -> None:
        self._bound = arguments
        self._parts: dict[int, list[str]] = {}

    def add(self, deltas: Any) -> None:
        for delta in deltas:
            index = int(getattr(delta, "index", 0) or 0)
            part = self._parts.setdefault(index, ["", "", ""])
            part[0] = part[0] or (delta.id or "")
            function = delta.function
            if function is not None:
                part[1] = part[1] or (function.name or "")
                if function.arguments:
                    self._bound.add(function.arguments)
                    part[2] += function.arguments

    def calls(self) -> tuple[NativeCall, ...]:
        return tuple(native_call(id_, name, arguments)
                     for _, (id_, name, arguments) in sorted(self._parts.items()) if name)


def native_call(call_id: str | None, name: str, arguments: str | None) -> NativeCall:
    """A call as the API sent it: its arguments' JSON text read as an object; text that is no
    JSON object is kept as it came, for the model to be told what is wrong with it."""
    raw = arguments or ""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError):
        value = raw
    return NativeCall(call_id or "", name, value if isinstance(value, dict) else raw)


def _message(message: ChatMessage, native: bool) -> dict[str, Any]:
    """One turn in the chat-completions format: with tools offered, a native call as the
    assistant's ``tool_calls`` and its result as a ``tool`` message; otherwise both as text."""
    call = message.call
    if native and call is not None:
        arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(
            call.arguments, ensure_ascii=False)
        return {"role": "assistant", "content": message.said or None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": call.name, "arguments": arguments}}]}
    if native and message.call_id:
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    return {"role": message.role, "content": message.content}


def usage_from_openai(usage: Any) -> LLMUsage:
    """Token counts, cached prompt tokens included (OpenAI's ``prompt_tokens_details.cached_tokens``
    or DeepSeek's ``prompt_cache_hit_tokens``). A server that reports none gives zeros."""
    if usage is None:
        return LLMUsage(0, 0)
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if cached is None:
        extra = getattr(usage, "model_extra", None) or {}
        cached = extra.get("prompt_cache_hit_tokens")
    return LLMUsage(
        input_tokens=int(usage.prompt_tokens or 0),
        output_tokens=int(usage.completion_tokens or 0),
        cached_input_tokens=int(cached or 0),
    )
