"""A scripted "model" for the fake LLM servers that knows only what a real model is sent.

Why: ``kestrel eval`` builds its own worlds, so a test's model cannot peek at their agents (as
``RuleModel`` does). This one reads everything from the request, as a real model must: the agent
id, its template and its configuration from the system prompt, the conversation from the
messages; it then answers as that template's rule policy would, and every ``malformed_every``-th
answer first goes wrong in one of ``corrupt``'s three ways (the model then gets the error back and
answers properly), so a run has refusals to count. Deterministic: the same requests give the same
answers, which is what a recorded run needs.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from app.agents.llm.port import ChatMessage
from app.agents.rules.engine import decide
from app.agents.rules.transcript import read_transcript
from app.agents.template_files import load_templates
from app.agents.templates import AgentTemplate, validate_config
from app.runtime.providers import rule_policy
from app.tools.protocol.parser import parse_response
from tests.helpers.rule_model import corrupt

_AGENT_ID = re.compile(r"Your agent id: `([^`]+)`")
_TEMPLATE = re.compile(r"\(template `([^`]+)`\)")
_CONFIG_LINE = re.compile(r"^  - ([a-z_]+): (.*)$", re.MULTILINE)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


def _config(template: AgentTemplate, system: str) -> dict[str, Any]:
    """The configuration the prompt shows, one ``  - name: value`` line per setting."""
    section = system.split("Your configuration", 1)[1]
    raw: dict[str, Any] = {}
    for name, shown in _CONFIG_LINE.findall(section):
        field = template.config.get(name)
        if field is None or shown == "(not set)":
            continue
        if field.type == "symbols":
            raw[name] = [] if shown.startswith("(none") else shown.split(", ")
        elif field.type == "integer":
            raw[name] = int(shown)
        elif field.type == "boolean":
            raw[name] = shown == "true"
        else:
            raw[name] = shown
    return validate_config(template, raw)


class PromptRuleModel:
    """``server.default = PromptRuleModel(malformed_every=5)``."""

    def __init__(self, *, malformed_every: int = 0) -> None:
        self.templates = load_templates()
        self.malformed_every = malformed_every
        self.calls = 0
        self.malformed = 0
        self.systems: list[str] = []
        self.messages: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        system = _text(body.get("system", ""))
        raw = body["messages"]
        if raw and raw[0].get("role") == "system":  # OpenAI sends the system prompt first
            system, raw = _text(raw[0]["content"]), raw[1:]
        agent = _AGENT_ID.search(system)
        template_id = _TEMPLATE.search(system)
        assert agent is not None and template_id is not None, "not an agent's system prompt"
        template = self.templates[template_id.group(1)]
        messages = [ChatMessage(m["role"], _text(m["content"])) for m in raw]
        kept: list[ChatMessage] = messages[:1]
        index = 1
        while index < len(messages):  # leave out our own malformed answers and their errors
            if messages[index].role == "assistant" and parse_response(
                messages[index].content
            ).call is None:
                index += 2
                continue
            kept.append(messages[index])
            index += 1
        answer = decide(rule_policy(template), agent.group(1), _config(template, system),
                        read_transcript(kept)).render()
        with self._lock:
            self.systems.append(system)
            self.messages.extend(m.content for m in messages)
            self.calls += 1
            spoil = (self.malformed_every and self.calls % self.malformed_every == 0
                     and parse_response(answer).call is not None
                     and len(messages) == len(kept))  # at most once per task
            if spoil:
                self.malformed += 1
                return corrupt(answer, self.malformed)
        return answer
