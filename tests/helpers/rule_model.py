"""A scripted "model" for the fake LLM servers: it answers each HTTP request as the rule engine
would, and now and then answers with a malformed call first, as real models do.

Why: the whole agent flow must be proven through the real ``openai`` and ``anthropic`` SDKs over
real HTTP, which needs a model that makes the right calls for many steps. The rule engine's
policies are that model; the only difference from the built-in provider is the path the answer
travels. The agent's id is read from its system prompt and its configuration from the world's
own agents (kept current from the event bus, so the server thread never touches SQLite).
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from app.agents.llm.port import ChatMessage
from app.agents.rule_engine.engine import decide
from app.agents.rule_engine.transcript import blocks_of, read_transcript
from app.events import AgentStateChanged
from app.runtime.world import World
from app.tools.protocol.call import ToolCall
from app.tools.protocol.parser import parse_response
from tests.helpers.fake_llm_servers import Reply, call

_AGENT_ID = re.compile(r"Your agent id: `([^`]+)`")


def text_of(content: Any, calls: dict[str, str] | None = None) -> str:
    """A message's text, whether a string or the content blocks Anthropic sends (a
    ``tool_result`` block's content; a ``tool_use`` block as the XML call it stands for, looked
    up in ``calls``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use":
            parts.append(_native_xml(calls or {}, block.get("name", ""), block.get("input")))
        elif block.get("type") == "tool_result":
            parts.append(text_of(block.get("content")))
        else:
            parts.append(block.get("text", ""))
    return "".join(parts)


def _key(name: str, arguments: Any) -> str:
    """A call's identity whatever types its arguments were sent back with ("14" or 14)."""
    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return str(value).lower() if isinstance(value, bool) else str(value)

    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    return f"{name}:{json.dumps(plain(arguments), sort_keys=True)}"


def _native_xml(calls: dict[str, str], name: str, arguments: Any) -> str:
    """The XML call a native call of this model stood for (it made every one it is sent)."""
    return calls.get(_key(name, arguments), f"<{name}></{name}>")


def openai_messages(raw: list[dict[str, Any]], calls: dict[str, str]) -> list[ChatMessage]:
    """OpenAI's messages as text: an assistant's ``tool_calls`` as their XML, a ``tool``
    message as the user's."""
    messages = []
    for m in raw:
        role = "user" if m.get("role") == "tool" else m["role"]
        content = text_of(m.get("content"), calls)
        for native in m.get("tool_calls") or ():
            function = native["function"]
            content += _native_xml(calls, function["name"], function["arguments"])
        messages.append(ChatMessage(role, content))
    return messages


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


def json_arguments(made: ToolCall) -> dict[str, Any]:
    """A call's parameters as a model writes them in JSON: an element with named items an
    object, one with items an array, any other its text."""
    arguments: dict[str, Any] = {}
    for node in made.params:
        if node.children and all("name" in c.attrs for c in node.children):
            arguments[node.tag] = {c.attrs["name"]: c.text.strip() for c in node.children}
        elif node.children:
            arguments[node.tag] = [c.text.strip() for c in node.children]
        else:
            arguments[node.tag] = node.text.strip()
    return arguments


def corrupt_native(native: dict[str, Any], n: int) -> Reply:
    """One of three ways a model gets a native call wrong: arguments that are not JSON, a
    parameter the tool does not have, two calls at once."""
    match n % 3:
        case 0:
            return Reply(tool_calls=(call(native["name"], '{"symbol": "BTC'),))
        case 1:
            return Reply(tool_calls=(call(native["name"], {**native["arguments"],
                                                           "colour": "blue"}),))
        case _:
            return Reply(tool_calls=(native, native))


class RequestModel:
    """What both scripted models share: read the system prompt and the agent id from the request,
    leave out the model's own malformed answers and their errors, and spoil every
    ``malformed_every``-th well-formed answer (at most once per task; natively, every
    ``malformed_every``-th native call). A subclass decides.

    ``native``: when the request offers tools natively, answer a call through them (OpenAI
    ``tool_calls``, Anthropic ``tool_use``), as a model with automatic tool choice does; the
    calls it made are remembered, to read them back as XML when the conversation returns."""

    def __init__(self, *, malformed_every: int = 0, native: bool = False) -> None:
        self.malformed_every = malformed_every
        self.native = native
        self.calls = 0
        self.malformed = 0
        self.native_calls = 0
        self._made: dict[str, str] = {}
        self._lock = threading.Lock()

    def decide(self, model: str, system: str, agent_id: str, kept: list[ChatMessage]) -> str:
        """The answer to a request for ``model`` (the name the agent asked for)."""
        raise NotImplementedError

    def seen(self, system: str, messages: list[ChatMessage]) -> None:
        """Called under the lock with each request (to keep what a test wants to search)."""

    def __call__(self, body: dict[str, Any]) -> str | Reply:
        system = text_of(body.get("system", ""))
        raw = body["messages"]
        if raw and raw[0].get("role") == "system":  # OpenAI sends the system prompt first
            system, raw = text_of(raw[0]["content"]), raw[1:]
        agent = _AGENT_ID.search(system)
        assert agent is not None, "no agent id in the system prompt"
        with self._lock:
            made = dict(self._made)
        messages = openai_messages(raw, made)
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
        parsed = parse_response(answer)
        native = None
        if (self.native and body.get("tools") and parsed.call is not None
                and blocks_of(answer) is None):  # a final answer's blocks are text, not calls
            native = call(parsed.call.name, json_arguments(parsed.call))
        with self._lock:
            self.seen(system, messages)
            self.calls += 1
            if native is not None:
                self._made[_key(native["name"], native["arguments"])] = answer[
                    answer.find(f"<{native['name']}"):]
                self.native_calls += 1
            # natively, only calls are spoiled (a final answer's blocks are text), counted apart
            count = self.native_calls if self.native else self.calls
            spoil = (self.malformed_every and count % self.malformed_every == 0
                     and (parsed.call is not None or blocks_of(answer) is not None)
                     and (native is not None or not self.native)
                     and len(messages) == len(kept))  # at most once per task
            if spoil:
                self.malformed += 1
                if native is not None:
                    return corrupt_native(native, self.malformed)
                return corrupt(answer, self.malformed)
        if native is None:
            return answer
        return Reply(text=answer[:answer.find(f"<{native['name']}")], tool_calls=(native,))


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
