"""The Anthropic Messages adapter, through the ``anthropic`` SDK.

Why it differs from the OpenAI-compatible one: the system prompt is a separate field, sent as a
block list with ``cache_control`` so the static prefix (prompt template, role, tools) is cached and
re-read at a tenth of the price on every step of an agent; the conversation also gets a cache
breakpoint on its last message, so each step re-reads the previous steps from the cache. Messages
must alternate user/assistant, so consecutive same-role messages are merged. SDK exceptions are
translated once, here, into the port's error tree, by the table both clients share
(``app.agents.llm.errors``).

Tools a request offers natively go out as ``tools`` (one call per answer: parallel tool use off);
the model's ``tool_use`` blocks come back as ``NativeCall``s, and a conversation's earlier native
calls and their results are sent as ``tool_use`` and ``tool_result`` blocks. A proxy that sends no
usage has its tokens counted here (estimated).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic

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
    CUT,
    REFUSAL,
    ChatMessage,
    LLMRequest,
    LLMResponse,
    LLMUsage,
    NativeCall,
    StreamCallback,
)
from app.agents.llm.retry import Backoff, Sleep, with_retries
from app.agents.llm.tokens import complete_usage

NAME = "anthropic"
DEFAULT_BASE_URL = "https://api.anthropic.com"
EPHEMERAL = {"type": "ephemeral"}
# "model_context_window_exceeded": the context filled up while answering, which also cuts it;
# "refusal" (the model declined) is kept as the port's REFUSAL
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": CUT,
                 "model_context_window_exceeded": CUT, "refusal": REFUSAL}
# The SDK's failures, for the shared table (app.agents.llm.errors).
ANTHROPIC_ERRORS = SdkErrors(
    provider=NAME, client="anthropic", timeout=anthropic.APITimeoutError,
    unreachable=anthropic.APIConnectionError, status=anthropic.APIStatusError,
    bad_format=anthropic.APIResponseValidationError, mid_answer=anthropic.APIError,
    base=anthropic.AnthropicError,
)


@dataclass(frozen=True, slots=True)
class _Answer:
    text: str
    usage: LLMUsage
    model: str
    finish_reason: str
    calls: tuple[NativeCall, ...] = ()


EMPTY_TURN = "(empty)"


def merge_alternating(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Join consecutive messages of the same role with a blank line (the API requires turns to
    alternate); the order and every character of the content are kept. An empty message (a model
    that answered nothing) becomes "(empty)": the API refuses empty text blocks."""
    merged: list[ChatMessage] = []
    for original in messages:
        message = original if original.content else ChatMessage(original.role, EMPTY_TURN)
        if merged and merged[-1].role == message.role:
            merged[-1] = ChatMessage(message.role, f"{merged[-1].content}\n\n{message.content}")
        else:
            merged.append(message)
    return merged


class AnthropicProvider:
    """Answers ``LLMRequest``s through ``POST {base_url}/v1/messages``.

    Args:
        api_key: the Anthropic key (required; the factory explains where to set it).
        base_url: ``None`` for Anthropic's own endpoint.
        default_model: used when a request names no model.
        timeout_s: the longest one answer may take, from the request to its last byte. Its size
            is bounded too, by the request's ``max_output_tokens`` (``app.agents.llm.bounds``).
        max_retries: extra attempts after a temporary error.
        stream: stream the answer through the SDK's ``messages.stream``. A retried stream sends
            ``on_delta`` the new attempt's pieces from its start.
        base_delay_s / max_delay_s / sleep / jitter: the backoff policy (see ``with_retries``).
        limiter: the endpoint's limiter shared with its other callers (``app.agents.llm.limits``):
            a Retry-After one call is given then holds them all; ``None``: this provider alone.
    """

    name = NAME
    is_llm = True

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str | None = None,
        default_model: str,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        stream: bool = True,
        base_delay_s: float = 1.0,
        max_delay_s: float = 30.0,
        sleep: Sleep = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        limiter: ProviderLimiter | None = None,
    ) -> None:
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.default_model = default_model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.stream = stream
        self._backoff: Backoff = {"base_delay_s": base_delay_s, "max_delay_s": max_delay_s,
                                  "sleep": sleep, "jitter": jitter, "limiter": limiter}
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=self.base_url, max_retries=0, timeout=timeout_s,
            http_client=bounded_http_client(anthropic.DefaultAsyncHttpxClient, timeout_s),
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
        """The Messages API arguments, with cache breakpoints on the system prompt and on the
        conversation's last message, and the tools when the request offers them natively.

        ``request.temperature`` is not sent: API version 2026-10-21 (which anthropic 2.x sends)
        rejects ``temperature``/``top_p``/``top_k`` with HTTP 400, and the SDK removed them.
        """
        native = bool(request.tools)
        if native:
            messages = _block_messages(request.messages)
        else:
            messages = [
                {"role": m.role, "content": m.content}
                for m in merge_alternating(request.messages)
            ]
        if messages:
            last = messages[-1]
            if isinstance(last["content"], str):
                last["content"] = [{"type": "text", "text": last["content"]}]
            last["content"][-1] = {**last["content"][-1], "cache_control": EPHEMERAL}
        params: dict[str, Any] = {
            "model": model, "messages": messages, "max_tokens": request.max_output_tokens,
        }
        if request.system:
            params["system"] = [
                {"type": "text", "text": request.system, "cache_control": EPHEMERAL}
            ]
        if native:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
            params["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
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
                    message = await self._client.messages.create(**params, timeout=timeout_s)
                    answer = _answer(message, model)
        except RawLimitPassed as exc:
            raise bounds.raw_passed(self.name, where) from exc
        except ANTHROPIC_ERRORS.caught as exc:
            if raw_limit_passed(exc) is not None:
                raise bounds.raw_passed(self.name, where) from exc
            raise translate_error(exc, ANTHROPIC_ERRORS, base_url=self.base_url, model=model,
                                  timeout_s=timeout_s, offered_tools="tools" in params) from exc
        if len(answer.text) > bounds.chars:
            raise bounds.text_passed(self.name, streamed=False)
        if on_delta is not None and answer.text:
            on_delta(answer.text)
        return answer

    async def _streamed(
        self, params: dict[str, Any], model: str, timeout_s: float, bounds: AnswerBounds,
        on_delta: StreamCallback | None,
    ) -> _Answer:
        text = AnswerText(bounds, self.name)
        async with self._client.messages.stream(**params, timeout=timeout_s) as stream:
            async for piece in stream.text_stream:
                if piece:
                    text.add(piece)  # past its bound: raises, and leaving closes the stream
                    if on_delta is not None:
                        on_delta(piece)
            message = await stream.get_final_message()
        return _answer(message, model)


def _block_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """The conversation as content blocks, for a request that offers tools: a native call as a
    ``tool_use`` block and its result as a ``tool_result`` block; consecutive same-role turns
    merged as ``merge_alternating`` merges them (text joined by a blank line)."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        for block in _blocks(message):
            if merged and merged[-1]["role"] == message.role:
                blocks = merged[-1]["content"]
                if blocks[-1]["type"] == "text" and block["type"] == "text":
                    blocks[-1] = {"type": "text",
                                  "text": f"{blocks[-1]['text']}\n\n{block['text']}"}
                else:
                    blocks.append(block)
            else:
                merged.append({"role": message.role, "content": [block]})
    return merged


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    call = message.call
    if call is not None:
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        use = {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}
        return [{"type": "text", "text": message.said}, use] if message.said else [use]
    if message.call_id:
        return [{"type": "tool_result", "tool_use_id": message.call_id,
                 "content": message.content or EMPTY_TURN}]
    return [{"type": "text", "text": message.content or EMPTY_TURN}]


def _answer(message: Any, model: str) -> _Answer:
    text = "".join(
        block.text for block in message.content if getattr(block, "type", "") == "text"
    )
    calls = tuple(
        NativeCall(str(block.id or ""), str(block.name or ""),
                   block.input if isinstance(block.input, dict) else str(block.input))
        for block in message.content if getattr(block, "type", "") == "tool_use"
    )
    reason = message.stop_reason or "end_turn"
    return _Answer(text, usage_from_anthropic(message.usage), message.model or model,
                   _STOP_REASONS.get(reason, reason), calls)


def usage_from_anthropic(usage: Any) -> LLMUsage:
    """Anthropic counts cache reads and writes apart from ``input_tokens``; the port's
    ``input_tokens`` is the whole prompt (as OpenAI counts it), ``cached_input_tokens`` the reads.
    """
    if usage is None:
        return LLMUsage(0, 0)
    cached = int(getattr(usage, "cache_read_input_tokens", None) or 0)
    written = int(getattr(usage, "cache_creation_input_tokens", None) or 0)
    return LLMUsage(
        input_tokens=int(usage.input_tokens or 0) + cached + written,
        output_tokens=int(usage.output_tokens or 0),
        cached_input_tokens=cached,
    )
