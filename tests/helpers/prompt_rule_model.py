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
from typing import Any

from app.agents.llm.port import ChatMessage
from app.agents.rule_engine.engine import decide
from app.agents.rule_engine.transcript import read_transcript
from app.agents.template_files import load_templates
from app.agents.templates import AgentTemplate, validate_config
from app.runtime.providers import rule_policy
from tests.helpers.rule_model import RequestModel

_TEMPLATE = re.compile(r"\(template `([^`]+)`\)")
_CONFIG_LINE = re.compile(r"^  - ([a-z_]+): (.*)$", re.MULTILINE)


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


class PromptRuleModel(RequestModel):
    """``server.default = PromptRuleModel(malformed_every=5)``; ``native=True`` calls tools
    through the API when the request offers them (``RequestModel``)."""

    def __init__(self, *, malformed_every: int = 0, native: bool = False) -> None:
        super().__init__(malformed_every=malformed_every, native=native)
        self.templates = load_templates()
        self.systems: list[str] = []
        self.messages: list[str] = []

    def decide(self, model: str, system: str, agent_id: str, kept: list[ChatMessage]) -> str:
        template_id = _TEMPLATE.search(system)
        assert template_id is not None, "not an agent's system prompt"
        template = self.templates[template_id.group(1)]
        return decide(rule_policy(template), agent_id, _config(template, system),
                      read_transcript(kept), system=system).render()

    def seen(self, system: str, messages: list[ChatMessage]) -> None:
        self.systems.append(system)
        self.messages.extend(m.content for m in messages)
