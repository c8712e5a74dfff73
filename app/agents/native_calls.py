"""Native tool calls: the second transport of the one toolset, beside the XML calls in the text.

Why: a model given tools through its API (any OpenAI or Anthropic model, vLLM with
``--enable-auto-tool-choice``, Ollama's and LM Studio's tool templates) answers with the API's own
tool calls (``tool_calls``, ``tool_use``) and an empty text, which the XML parser can only read as
an empty answer. Through this transport:

- each tool the agent may use is offered as its ToolSpec's JSON schema (``app.tools.schema``);
- a native call becomes the ``ToolCall`` the XML parser would produce for the same call
  (``to_call``), stored as that call's XML (kind ``native_call``), so the executor, the approval
  flow, the audit trail, a resumed task and the chat treat it like any call;
- its result is the same ``<tool_result>`` envelope, sent back as the tool result the API
  expects (``chat_messages``: a native call and the message answering it carry the same id).

``[llm] tool_transport`` chooses: "xml" (tools only in the system prompt), "native" (tools also
offered natively on every request), or "auto" (``ToolTransport``: offered until the model's
first answer shows which it uses; native from then on when it called natively, XML otherwise,
and XML at once when the server refuses tools). XML answers are read in every mode.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from app.agents.llm.port import ChatMessage, LLMResponse, MessageRole, NativeCall, ToolSchema
from app.domain.errors import ErrorCode, ToolError
from app.tools.protocol.call import ToolCall
from app.tools.protocol.parser import ParsedResponse
from app.tools.protocol.render import escape_text
from app.tools.registry import ToolRegistry
from app.tools.schema import call_arguments, call_xml, input_schema, to_call

NATIVE_CALL = "native_call"  # message kind: a call made through the API's tool calling
TransportMode = Literal["xml", "native", "auto"]
TRANSPORTS: tuple[TransportMode, ...] = ("xml", "native", "auto")
_EXCERPT = 200


def tool_schemas(registry: ToolRegistry, permissions: frozenset[str]) -> tuple[ToolSchema, ...]:
    """The tools an agent may use, as its model's API offers them."""
    schemas = []
    for spec in registry.permitted(permissions):
        description = spec.description.strip()
        if spec.returns:
            description += f" Returns: {spec.returns.strip()}"
        schemas.append(ToolSchema(spec.name, description, input_schema(spec)))
    return tuple(schemas)


class ToolTransport:
    """Whether an agent's next request offers its tools natively (see the module docstring)."""

    def __init__(self, mode: TransportMode) -> None:
        self.mode = mode
        self.state: Literal["xml", "native", "undecided"] = (
            "undecided" if mode == "auto" else mode)

    def offers(self) -> bool:
        return self.state != "xml"

    def answered(self, response: LLMResponse) -> None:
        """Auto: the first answer decides, by whether the model called a tool natively."""
        if self.state == "undecided" and not response.cut:
            self.state = "native" if response.tool_calls else "xml"

    def fall_back(self) -> bool:
        """The server refused tools or they do not fit its context: XML from now on in auto
        (True: ask again without them); in "native" the refusal stands (False)."""
        if self.mode != "auto":
            return False
        self.state = "xml"
        return True


@dataclass(frozen=True, slots=True)
class NativeReading:
    """A native answer as stored and acted on.

    ``content`` is what the conversation stores: the call's XML (what the parser reads back to
    the same ``ToolCall``), or a description of a call that cannot be read; ``error`` (then set)
    is what the model is told instead of running anything.
    """

    content: str
    error: ToolError | None = None
    tool_name: str = ""

    def parsed(self) -> ParsedResponse:
        return ParsedResponse(error=self.error, tool_name=self.tool_name)


def read_native(calls: Sequence[NativeCall], registry: ToolRegistry) -> NativeReading:
    """The calls of one answer as a ``NativeReading``: one call with a JSON object of arguments
    is read as its XML; several calls, arguments that are no JSON object, or a name that cannot
    be a tool's are refused with what to do."""
    if len(calls) > 1:
        names = [c.name for c in calls]
        return NativeReading(
            "\n".join(_describe(c) for c in calls),
            ToolError(f"The answer holds {len(calls)} tool calls ({', '.join(names)}). Make "
                      "exactly one call per answer and wait for its result before the next.",
                      code=ErrorCode.MULTIPLE_TOOL_CALLS, details={"tools": names}),
            calls[0].name,
        )
    native = calls[0]
    if isinstance(native.arguments, str):
        return NativeReading(
            _describe(native),
            ToolError(f"The arguments of the {native.name} call are not a JSON object "
                      f"({_excerpt(native.arguments)!r}). Send them as one JSON object with a "
                      "key for each parameter.", code=ErrorCode.PARSE_ERROR),
            native.name,
        )
    spec = registry.get(native.name)
    call = to_call(spec, native.arguments) if spec is not None else ToolCall(native.name, ())
    try:
        return NativeReading(call_xml(call), None, native.name)
    except ValueError:
        pass
    if spec is None:
        return NativeReading(_describe(native), ToolError(
            f"There is no tool named {_excerpt(native.name)!r}. Only the tools offered exist.",
            code=ErrorCode.UNKNOWN_TOOL, details={"tool": native.name[:_EXCERPT]}), native.name)
    known = ", ".join(sorted(p.name for p in spec.params)) or "none"
    return NativeReading(_describe(native), ToolError(
        f"{spec.name} has a parameter name that no parameter has. Its parameters are: {known}.",
        code=ErrorCode.INVALID_PARAMETER, details={"allowed": sorted(p.name for p in spec.params)}),
        spec.name)


def _excerpt(text: str) -> str:
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…"


def _describe(native: NativeCall) -> str:
    """A call that is not stored as XML, in words (the chat shows it; never read as a call);
    its keys sorted, so a replayed answer reads the same."""
    arguments = native.arguments if isinstance(native.arguments, str) else json.dumps(
        native.arguments, ensure_ascii=False, sort_keys=True)
    return escape_text(f"(native tool call {native.name} with arguments {_excerpt(arguments)})")


Parse = Callable[[str], ParsedResponse]


def chat_messages(
    stored: Sequence[tuple[str, str, str, int]], parse: Parse, registry: ToolRegistry
) -> list[ChatMessage]:
    """The conversation as sent: ``stored`` is (role, kind, content, step) of each message sent
    to the model. A native call that reads as one call, followed by the user message answering it
    (its result, or the person's reply to a question it asked), becomes a ``ChatMessage`` with
    ``call`` and one with the same ``call_id``; any other message is sent as its text."""
    messages: list[ChatMessage] = []
    for index, (role, kind, content, step) in enumerate(stored):
        chat_role: MessageRole = "assistant" if role == "assistant" else "user"
        previous = messages[-1] if messages else None
        if previous is not None and previous.call is not None and chat_role == "user":
            messages.append(ChatMessage("user", content, call_id=previous.call.id))
            continue
        answered = index + 1 < len(stored) and stored[index + 1][0] != "assistant"
        parsed = parse(content) if kind == NATIVE_CALL and answered else None
        if parsed is None or parsed.call is None:
            messages.append(ChatMessage(chat_role, content))
            continue
        spec = registry.get(parsed.call.name)
        native = NativeCall(f"call_{step}", parsed.call.name, call_arguments(spec, parsed.call))
        said = content.replace(call_xml(parsed.call), "", 1).strip()
        messages.append(ChatMessage(chat_role, content, call=native, said=said))
    return messages


def with_words(reading: NativeReading, text: str, parse: Parse) -> str:
    """What to store for a native call the model made with ``text`` beside it: the words, then
    the call's XML, when that reads back as the same call (so the words go back to the model
    with its call); the call's XML alone otherwise."""
    words = text.strip()
    if not words or reading.error is not None:
        return reading.content
    combined = f"{words}\n{reading.content}"
    alone, together = parse(reading.content).call, parse(combined).call
    if alone is not None and together is not None and call_xml(together) == call_xml(alone):
        return combined
    return reading.content
