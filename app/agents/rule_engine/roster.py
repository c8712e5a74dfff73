"""The agents as the rule-engine Orchestrator reads them back from ``list_agent_instances``.

Both its setups (``orchestrator.py``) and its agent commands (``agent_commands.py``) list the
agents first and decide from what the listing says; this holds the listing's reading and the
small answers both make (the listing call itself, the announcement of what was done).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.agents.rule_engine.calls import Answer, call, final
from app.agents.rule_engine.transcript import Step, Transcript

TRADER_TEMPLATE = "TraderAgent_Default_v1"
MAX_ASKS = 3


@dataclass(frozen=True, slots=True)
class Listed:
    """One agent as ``list_agent_instances`` reported it."""

    agent_id: str
    name: str
    role: str
    state: str
    template: str
    config: Mapping[str, Any]
    last_action: str
    last_action_time: str
    fault_reason: str
    jobs: tuple[Mapping[str, str], ...]


def listed_agents(step: Step | None) -> list[Listed] | None:
    """The agents a ``list_agent_instances`` step returned; ``None`` when it failed."""
    if step is None or step.result is None or not step.result.ok:
        return None
    root = step.result.first()
    agents = []
    for item in root if root is not None else ():
        try:
            config = json.loads(item.findtext("config_json") or "{}")
        except ValueError:
            config = {}
        agents.append(Listed(
            agent_id=item.get("agent_id", ""), name=item.get("name", ""),
            role=item.get("role", ""), state=item.get("state", ""),
            template=item.get("template", ""), config=config if isinstance(config, dict) else {},
            last_action=item.get("last_action", ""),
            last_action_time=item.get("last_action_time_iso", ""),
            fault_reason=item.get("fault_reason", ""),
            jobs=tuple(dict(job.attrib) for job in item.findall("job")),
        ))
    return agents


def symbols_label(symbols: tuple[str, ...] | list[str]) -> str:
    if not symbols:
        return "All-symbol"
    return ", ".join(symbols) if len(symbols) <= 3 else f"{len(symbols)}-symbol"


def agents_of(t: Transcript, why: str) -> list[Listed] | Answer:
    """The agents listed earlier in this task, or the call that lists them (tagged "agents")."""
    listed = t.tagged("agents") or t.carried("list_agent_instances")
    if listed is None:
        return call("list_agent_instances", "agents", why)
    agents = listed_agents(listed)
    if agents is None:
        problem = listed.result.problem() if listed.result else "no result"
        return final(f"I could not list the agents: {problem}")
    return agents


def announce(summary: str) -> Answer:
    """Tell the person on the UI alert channel what was done (tagged "announce")."""
    return call(
        "send_notification", "announce", "Announcing what was set up.",
        channels=("channel", ["UI_ALERT"]), message_text=summary,
        subject_text="Agents set up", urgency_level="LOW",
    )
