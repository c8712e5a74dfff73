"""A hand-written ``AgentDirectory`` for the tool tests: agents in a dict, the real lifecycle table.

It behaves as the AgentManager's port promises (unknown template -> NotFoundError listing the known
ones; an invalid config -> InvalidParameterError naming the field; control along the allowed
transitions only), so the tools are tested against the contract, not against a mock's echo.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.domain.agents import AgentInfo, AgentRole, AgentState, check_transition
from app.domain.clock import Clock
from app.domain.errors import InvalidParameterError, NotFoundError
from app.orchestration.ids import IdFactory

TEMPLATES = {
    "SystemOrchestrator_v1": AgentRole.ORCHESTRATOR,
    "AnalystAgent_Trend_v1": AgentRole.ANALYST,
    "TraderAgent_Default_v1": AgentRole.TRADER,
}
ACTIONS = {"pause": AgentState.PAUSED, "resume": AgentState.RUNNING, "stop": AgentState.STOPPED}


class FakeDirectory:
    def __init__(self, clock: Clock, ids: IdFactory) -> None:
        self.clock = clock
        self.ids = ids
        self.agents: dict[str, AgentInfo] = {}
        self.deleted: set[str] = set()
        self.created_by: dict[str, str] = {}
        self.controls: list[tuple[str, str]] = []
        self.keys: dict[str, str] = {}

    def add(self, name: str, template: str = "AnalystAgent_Trend_v1",
            state: AgentState = AgentState.RUNNING) -> AgentInfo:
        now = self.clock.now_ms()
        info = AgentInfo(
            agent_id=self.ids.new(), name=name, template=template, role=TEMPLATES[template],
            state=state, config={}, provider="rule-engine", model="rules-v1", created_ms=now,
            updated_ms=now,
        )
        self.agents[info.agent_id] = info
        return info

    async def create_agent(
        self, template: str, name: str, config: dict[str, Any], *, start: bool, created_by: str,
        key: str | None = None,
    ) -> AgentInfo:
        if key is not None and key in self.keys:
            return self.agents[self.keys[key]]
        if template not in TEMPLATES:
            raise NotFoundError(
                f"There is no agent template {template!r}. Known templates: "
                f"{', '.join(sorted(TEMPLATES))}.",
                details={"parameter": "agent_type_template"},
            )
        symbols = config.get("symbols", [])
        if not isinstance(symbols, list):
            raise InvalidParameterError(
                "initial_config_json field 'symbols' must be a list of symbols.",
                details={"parameter": "initial_config_json", "field": "symbols"},
            )
        info = self.add(name, template, AgentState.RUNNING if start else AgentState.CREATED)
        info.config = dict(config)
        self.created_by[info.agent_id] = created_by
        if key is not None:
            self.keys[key] = info.agent_id
        return info

    def list_agents(self) -> list[AgentInfo]:
        return [a for a in self.agents.values() if a.agent_id not in self.deleted]

    async def update_config(self, agent_id: str, changes: dict[str, Any]) -> AgentInfo:
        unknown = sorted(set(changes) - {"symbols", "interval", "trader_agent_id"})
        if unknown:
            raise InvalidParameterError(
                f"initial_config_json has no field {unknown[0]!r}.",
                details={"parameter": "task_payload_json", "field": unknown[0]},
            )
        info = self.agents[agent_id]
        self.agents[agent_id] = replace(info, config={**info.config, **changes})
        return self.agents[agent_id]

    def get_agent(self, agent_id: str) -> AgentInfo | None:
        return None if agent_id in self.deleted else self.agents.get(agent_id)

    async def control(self, agent_id: str, action: str) -> AgentInfo:
        info = self.agents[agent_id]
        new = ACTIONS[action]
        if info.state is not new:
            check_transition(info.state, new)
        self.controls.append((agent_id, action))
        self.agents[agent_id] = replace(info, state=new)
        return self.agents[agent_id]
