"""The ``agents`` table: every agent instance, its lifecycle state and what it last did.

State changes go through ``check_transition`` so a stopped agent can never quietly become paused,
and each one is committed before it is announced on the bus, so the GUI never shows a state the
database does not hold. A fault reason and an action are redacted before they are stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.domain.agents import AgentInfo, AgentRole, AgentState, check_transition
from app.domain.clock import Clock
from app.domain.errors import NotFoundError
from app.events import AgentActed, AgentStateChanged, EventBus
from app.redaction import redact
from app.store.db import StoreDb, store_db

_COLUMNS = (
    "agent_id, name, template, role, state, config_json, provider, model, created_ms, "
    "updated_ms, fault_reason, current_task_id, last_action, last_action_ms"
)


class AgentStore:
    def __init__(
        self,
        db_path: Path | str | StoreDb,
        clock: Clock,
        bus: EventBus | None = None,
        *,
        durable: bool = True,
    ) -> None:
        self._db = store_db(db_path, durable=durable)
        self._clock = clock
        self._bus = bus

    def close(self) -> None:
        self._db.close()

    def insert(self, info: AgentInfo) -> None:
        self._db.insert("agents", {
            "agent_id": info.agent_id, "name": info.name, "template": info.template,
            "role": info.role.value, "state": info.state.value,
            "config_json": json.dumps(info.config, sort_keys=True), "provider": info.provider,
            "model": info.model, "created_ms": info.created_ms, "updated_ms": info.updated_ms,
            "fault_reason": info.fault_reason, "current_task_id": info.current_task_id,
            "last_action": info.last_action, "last_action_ms": info.last_action_ms,
        })
        self._announce(AgentStateChanged(info.agent_id, info.state.value, None))

    def get(self, agent_id: str) -> AgentInfo | None:
        row = self._db.conn.execute(
            f"SELECT {_COLUMNS} FROM agents WHERE agent_id=? AND deleted=0",  # noqa: S608
            (agent_id,),
        ).fetchone()
        return None if row is None else _info(row)

    def state(self, agent_id: str) -> AgentState | None:
        """The agent's state alone (None: no such agent): what the agent loop checks before
        every step and the manager for idleness, without reading and decoding the whole row."""
        row = self._db.conn.execute(
            "SELECT state FROM agents WHERE agent_id=? AND deleted=0", (agent_id,)
        ).fetchone()
        return None if row is None else AgentState(row[0])

    def ids_in_state(self, state: AgentState) -> list[str]:
        rows = self._db.conn.execute(
            "SELECT agent_id FROM agents WHERE state=? AND deleted=0 ORDER BY created_ms, rowid",
            (state.value,),
        ).fetchall()
        return [row[0] for row in rows]

    def require(self, agent_id: str) -> AgentInfo:
        info = self.get(agent_id)
        if info is None:
            raise NotFoundError(
                f"There is no agent with id {agent_id!r}.", details={"agent_id": agent_id}
            )
        return info

    def all(self) -> list[AgentInfo]:
        rows = self._db.conn.execute(
            f"SELECT {_COLUMNS} FROM agents WHERE deleted=0 ORDER BY created_ms, rowid"  # noqa: S608
        ).fetchall()
        return [_info(row) for row in rows]

    def find(self, name_or_id: str) -> AgentInfo | None:
        """An agent by id, or by its name (case-insensitive) when exactly one has it."""
        info = self.get(name_or_id)
        if info is not None:
            return info
        matches = [a for a in self.all() if a.name.casefold() == name_or_id.casefold()]
        return matches[0] if len(matches) == 1 else None

    def set_state(
        self, agent_id: str, state: AgentState, reason: str | None = None
    ) -> AgentInfo:
        """Move an agent along an allowed transition; ``reason`` is kept for FAULTED (and shown).

        Raises:
            NotFoundError: no such agent.
            InvalidTransitionError: the table does not allow the change.
        """
        info = self.require(agent_id)
        if info.state is state:
            return info
        check_transition(info.state, state)
        reason = None if reason is None else redact(reason)
        fault = reason if state is AgentState.FAULTED else None
        self._db.conn.execute(
            "UPDATE agents SET state=?, fault_reason=?, updated_ms=? WHERE agent_id=?",
            (state.value, fault, self._clock.now_ms(), agent_id),
        )
        self._announce(AgentStateChanged(agent_id, state.value, reason))
        return self.require(agent_id)

    def set_config(self, agent_id: str, config: dict[str, Any]) -> AgentInfo:
        """Replace the agent's (already validated) configuration."""
        self.require(agent_id)
        self._db.conn.execute(
            "UPDATE agents SET config_json=?, updated_ms=? WHERE agent_id=?",
            (json.dumps(config, sort_keys=True), self._clock.now_ms(), agent_id),
        )
        info = self.require(agent_id)
        self._announce(AgentStateChanged(agent_id, info.state.value, None))
        return info

    def set_current_task(self, agent_id: str, task_id: str | None) -> None:
        self._db.conn.execute(
            "UPDATE agents SET current_task_id=? WHERE agent_id=?", (task_id, agent_id)
        )

    def record_action(self, agent_id: str, task_id: str | None, action: str) -> None:
        action = redact(action)
        self._db.conn.execute(
            "UPDATE agents SET last_action=?, last_action_ms=? WHERE agent_id=?",
            (action, self._clock.now_ms(), agent_id),
        )
        self._announce(AgentActed(agent_id, task_id, action))

    def delete(self, agent_id: str) -> None:
        """Hide the agent; its rows (conversations, orders, usage) stay for the audit trail."""
        self.require(agent_id)
        self._db.conn.execute(
            "UPDATE agents SET deleted=1, state=?, updated_ms=? WHERE agent_id=?",
            (AgentState.STOPPED.value, self._clock.now_ms(), agent_id),
        )
        self._announce(AgentStateChanged(agent_id, "deleted", None))

    def _announce(self, event: AgentStateChanged | AgentActed) -> None:
        if self._bus is not None:
            self._bus.publish_nowait(event)


def _info(row: tuple[Any, ...]) -> AgentInfo:
    return AgentInfo(
        agent_id=row[0], name=row[1], template=row[2], role=AgentRole(row[3]),
        state=AgentState(row[4]), config=json.loads(row[5]), provider=row[6], model=row[7],
        created_ms=row[8], updated_ms=row[9], fault_reason=row[10], current_task_id=row[11],
        last_action=row[12], last_action_ms=row[13],
    )
