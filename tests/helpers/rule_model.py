"""A scripted "model" for the fake LLM servers: it answers each HTTP request as the rule engine
would, and now and then answers with a malformed call first, as real models do.

Why: the whole agent flow must be proven through the real ``openai`` and ``anthropic`` SDKs over
real HTTP, which needs a model that makes the right calls for many steps. The rule engine's
policies are that model; the only difference from the built-in provider is the path the answer
travels. The agent's id is read from its system prompt and its configuration from the world's
own agents (kept current from the event bus, so the server thread never touches SQLite).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from app.agents.llm.port import ChatMessage
from app.agents.rules.engine import decide
from app.agents.rules.transcript import blocks_of, read_transcript
from app.events import AgentStateChanged
from app.runtime.world import World
from app.tools.protocol.parser import parse_response

_AGENT_ID = re.compile(r"Your agent id: `([^`]+)`")


def text_of(content: Any) -> str:
    """A message's text, whether a string or the content blocks Anthropic sends."""
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


def corrupt(answer: str, n: int) -> str:
    """One of three ways a model gets the protocol wrong, each a different error to recover from:
    the call wrapped in a ``<tool_call>`` element, a call cut off, two calls at once. (Fences
    around a call are read as the call itself.) A final answer with blocks is wrapped the same
    way, or loses its text and keeps only its blocks."""
    if blocks_of(answer) is not None:
        blocks = answer[answer.index("\n<") + 1:]
        return f"<tool_call>{answer}</tool_call>" if n % 2 == 0 else blocks
    call_start = answer.find("<", answer.find("</thinking>") + 1) if "</thinking>" in answer else 0
    call = answer[call_start:]
    match n % 3:
        case 0:
            return f"<tool_call>{call}</tool_call>"
        case 1:
            return call[: max(1, len(call) * 2 // 3)]
        case _:
            return f"{call}\n{call}"


class RequestModel:
    """What both scripted models share: read the system prompt and the agent id from the request,
    leave out the model's own malformed answers and their errors, and spoil every
    ``malformed_every``-th well-formed answer (at most once per task). A subclass decides."""

    def __init__(self, *, malformed_every: int = 0) -> None:
        self.malformed_every = malformed_every
        self.calls = 0
        self.malformed = 0
        self._lock = threading.Lock()

    def decide(self, model: str, system: str, agent_id: str, kept: list[ChatMessage]) -> str:
        """The answer to a request for ``model`` (the name the agent asked for)."""
        raise NotImplementedError

    def seen(self, system: str, messages: list[ChatMessage]) -> None:
        """Called under the lock with each request (to keep what a test wants to search)."""

    def __call__(self, body: dict[str, Any]) -> str:
        system = text_of(body.get("system", ""))
        raw = body["messages"]
        if raw and raw[0].get("role") == "system":  # OpenAI sends the system prompt first
            system, raw = text_of(raw[0]["content"]), raw[1:]
        agent = _AGENT_ID.search(system)
        assert agent is not None, "no agent id in the system prompt"
        messages = [ChatMessage(m["role"], text_of(m["content"])) for m in raw]
        kept: list[ChatMessage] = messages[:1]
        index = 1
        while index < len(messages):  # leave out our own malformed answers and their errors
            content = messages[index].content
            if (messages[index].role == "assistant" and blocks_of(content) is None
                    and parse_response(content).call is None):
                index += 2
                continue
            kept.append(messages[index])
            index += 1
        answer = self.decide(body["model"], system, agent.group(1), kept)
        with self._lock:
            self.seen(system, messages)
            self.calls += 1
            spoil = (self.malformed_every and self.calls % self.malformed_every == 0
                     and (parse_response(answer).call is not None
                          or blocks_of(answer) is not None)
                     and len(messages) == len(kept))  # at most once per task
            if spoil:
                self.malformed += 1
                return corrupt(answer, self.malformed)
        return answer


class RuleModel(RequestModel):
    """``server.default = RuleModel(world, malformed_every=7)``."""

    def __init__(self, world: World, *, malformed_every: int = 0) -> None:
        super().__init__(malformed_every=malformed_every)
        self.configs: dict[str, dict[str, Any]] = {
            a.agent_id: dict(a.config) for a in world.agents.manager.list_agents()
        }
        self._world = world
        world.bus.subscribe(AgentStateChanged, self._on_agent)

    def _on_agent(self, event: AgentStateChanged) -> None:
        info = self._world.agents.store.get(event.agent_id)
        if info is not None:
            self.configs[info.agent_id] = dict(info.config)

    def decide(self, model: str, system: str, agent_id: str, kept: list[ChatMessage]) -> str:
        return decide(model, agent_id, self.configs.get(agent_id, {}),
                      read_transcript(kept), system=system).render()
