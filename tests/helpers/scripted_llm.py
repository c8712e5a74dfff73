"""A hand-written LLM double for loop tests: answers from a script, records every request.

Only the loop's own behaviour is under test with it; the real SDKs are tested over real HTTP
against the fake servers in ``fake_llm_servers.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from app.agents.llm.port import LLMRequest, LLMResponse, LLMUsage, StreamCallback
from tests.helpers.fake_llm_servers import count_tokens

Answer = str | Exception | Callable[[LLMRequest], str]


@dataclass
class ScriptedProvider:
    """``usage``: what every answer reports; by default what a server would count: the
    request's prompt (``prompt_size``) and 100 tokens for the answer."""

    answers: list[Answer]
    model: str = "gpt-4o-mini"
    usage: LLMUsage | None = None
    name: str = "openai-compatible"
    is_llm: bool = True
    requests: list[LLMRequest] = field(default_factory=list)
    repeat_last: bool = False

    async def complete(
        self, request: LLMRequest, on_delta: StreamCallback | None = None
    ) -> LLMResponse:
        self.requests.append(request)
        if not self.answers:
            raise AssertionError("the script ran out of answers")
        answer = self.answers[0] if self.repeat_last and len(self.answers) == 1 else (
            self.answers.pop(0))
        if isinstance(answer, Exception):
            raise answer
        text = answer(request) if callable(answer) else answer
        if on_delta is not None:
            half = len(text) // 2
            on_delta(text[:half])
            on_delta(text[half:])
        usage = self.usage or LLMUsage(prompt_size(request), 100)
        return LLMResponse(text, usage, self.model, self.name, 5.0)

    async def aclose(self) -> None:
        return None


def prompt_size(request: LLMRequest) -> int:
    """A request's prompt as a server counts it: cl100k_base over the system prompt, the
    messages and any tools offered natively, 4 tokens around each message."""
    tools = getattr(request, "tools", ())
    return (count_tokens(request.system) + 4
            + sum(count_tokens(m.content) + 4 for m in request.messages)
            + (count_tokens(json.dumps([repr(t) for t in tools])) if tools else 0))
