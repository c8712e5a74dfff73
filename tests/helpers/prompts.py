"""Build a template's system prompt the way the agent tests compare them: one agent id, name and
mode, so two builds differ only in what a test changes."""

from __future__ import annotations

from typing import Any

from app.agents.prompt import build_system_prompt
from app.agents.templates import AgentTemplate, validate_config
from app.tools.registry import ToolRegistry

TREND = "AnalystAgent_Trend_v1"
TRADER = "TraderAgent_Default_v1"
ORCHESTRATOR = "SystemOrchestrator_v1"
AGENT_ID = "0b7d1c9e-5f0a-4c1e-9a53-8d2f3e4a5b6c"
ROLE_NAMES = {"System Orchestrator": ORCHESTRATOR, "Analyst": TREND, "Trader": TRADER}


def build(template: AgentTemplate, registry: ToolRegistry, raw: dict[str, Any] | None = None,
          **kwargs: Any) -> str:
    options: dict[str, Any] = {"agent_id": AGENT_ID, "agent_name": "Desk 1", "mode": "PAPER"}
    options.update(kwargs)
    return build_system_prompt(
        template, validate_config(template, raw or {}), registry=registry, **options
    )
