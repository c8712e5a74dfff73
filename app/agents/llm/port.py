"""The ``LLMProvider`` port: what the agent loop needs from any model, and its error tree.

Every adapter (OpenAI-compatible, Anthropic, the rule engine, replay) answers one ``LLMRequest``
with one ``LLMResponse``. Foreign SDK exceptions are translated at the adapter's border, once, into
``TemporaryLLMError`` (retry with backoff: timeouts, 429, 5xx, dropped connections) or
``PermanentLLMError`` (a person must act: a wrong key, an unknown model, a refused request).
The message is redacted as the error is made: a server that echoes the key in its error text
(some proxies echo the Authorization header; OpenAI shows a masked key) never puts it into a
fault reason, a task result or a log line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from app.redaction import redact

MessageRole = Literal["user", "assistant"]
CUT = "length"  # the finish reason of an answer the server cut at its token limit


@dataclass(frozen=True, slots=True)
class NativeCall:
    """A tool call the model made through its API's own tool calling (OpenAI ``tool_calls``,
    Anthropic ``tool_use``), not written as XML in its text.

    ``arguments`` is the JSON object the model gave, or, when it sent something that is not a
    JSON object, the raw text it sent (the loop answers that with an error the model can fix).
    """

    id: str
    name: str
    arguments: dict[str, Any] | str


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool as a model's API offers it: its name, what it does, its parameters' JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]

# ``LLMResponse.finish_reason`` of an answer the provider itself says the model declined
# (Anthropic's ``stop_reason: "refusal"``): the loop ends the task there, and ``kestrel eval``
# counts the task as a refusal, whatever text came with it.
REFUSAL = "refusal"


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One turn. ``call`` marks an assistant turn that was a native tool call and ``call_id`` a
    user turn that answers one (``content`` is then the ``<tool_result>`` envelope): providers
    send those as the API's tool call and tool result when the request offers tools, and as the
    plain text of the call and of the result otherwise. ``said`` is the text the model wrote
    with its native call (sent beside the call; ``content`` holds it too, before the call's
    XML)."""

    role: MessageRole
    content: str
    call: NativeCall | None = None
    call_id: str = ""
    said: str = ""


@dataclass(slots=True)
class LLMRequest:
    """One call. ``system`` is the static prefix (prompt template, role, tools): it comes first and
    stays byte-identical across the calls of an agent, so providers' prompt caches hit.

    ``role`` and ``agent_config`` are for the rule engine, which reads them instead of the prompt;
    real providers never send them anywhere.
    """

    agent_id: str
    task_id: str
    model: str
    system: str
    messages: list[ChatMessage]
    max_output_tokens: int = 2048
    temperature: float = 0.0
    role: str = ""
    agent_config: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 120.0
    # offered through the API's native tool calling (empty: the tools are only the XML ones the
    # system prompt describes)
    tools: tuple[ToolSchema, ...] = ()


@dataclass(frozen=True, slots=True)
class LLMUsage:
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """One answer.

    Attributes:
        finish_reason: "stop", or ``CUT`` ("length") when the server stopped the answer at its
            token limit (OpenAI's ``finish_reason``, Anthropic's ``stop_reason`` "max_tokens").
        tool_calls: the native tool calls of the answer (usually with an empty ``text``).
        usage_estimated: the server reported no usage (or none for one side), so Kestrel
            counted those tokens itself (``app.agents.llm.tokens``).
    """

    text: str
    usage: LLMUsage
    model: str
    provider: str
    latency_ms: float
    finish_reason: str = "stop"
    tool_calls: tuple[NativeCall, ...] = ()
    usage_estimated: bool = False

    @property
    def cut(self) -> bool:
        """The server cut the answer at its token limit: it is incomplete."""
        return self.finish_reason == CUT


StreamCallback = Callable[[str], None]


class LLMProvider(Protocol):
    """An adapter that answers requests.

    Attributes:
        name: the provider kind shown to the person ("openai-compatible", "anthropic",
            "rule-engine", "replay").
        is_llm: false for the rule engine, which must never be presented as a language model.
    """

    name: str
    is_llm: bool

    async def complete(
        self, request: LLMRequest, on_delta: StreamCallback | None = None
    ) -> LLMResponse: ...

    async def aclose(self) -> None: ...


class LLMError(Exception):
    """A provider could not answer; ``provider`` names which, the message says why in words."""

    def __init__(self, provider: str, message: str) -> None:
        super().__init__(redact(f"{provider}: {message}"))
        self.provider = provider


class TemporaryLLMError(LLMError):
    """Worth retrying later: timeout, rate limit, server error, connection dropped."""


class PermanentLLMError(LLMError):
    """Retrying will not help: authentication, unknown model, invalid request, bad configuration."""


class ToolsRefusedError(PermanentLLMError):
    """The server refused a request because it offered tools natively (a model or server without
    tool support): the same request without them may be answered."""


class ReplayMismatchError(PermanentLLMError):
    """A replayed run asked something the recording never answered: reported, never papered over."""
