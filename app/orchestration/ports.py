"""The ports the orchestration tools reach the agent manager through.

The tools live below ``app/agents`` (imports point down only), so they cannot import the manager;
the manager implements ``AgentDirectory`` and is handed to ``OrchestrationTools``.
"""

from __future__ import annotations

from typing import Any, Protocol

from app.domain.agents import AgentInfo
from app.domain.trading import Order


class AgentDirectory(Protocol):
    async def create_agent(
        self,
        template: str,
        name: str,
        config: dict[str, Any],
        *,
        start: bool,
        created_by: str,
        key: str | None = None,
    ) -> AgentInfo:
        """Create an agent from a template, optionally start it, and return it.

        ``key`` (a tool call's ``call_key``) makes the call repeatable: a task redelivered after a
        crash gets the agent its first attempt created instead of a second one.

        Raises:
            NotFoundError: unknown template; the message lists the known ones.
            InvalidParameterError: the config is invalid; the message names the field and why.
        """
        ...

    def get_agent(self, agent_id: str) -> AgentInfo | None:
        """The agent with this id, or ``None`` when there is none (or it was deleted)."""
        ...

    def list_agents(self) -> list[AgentInfo]:
        """Every agent that exists (deleted ones excluded), oldest first."""
        ...

    async def control(self, agent_id: str, action: str) -> AgentInfo:
        """Carry out ``"pause"``, ``"resume"`` or ``"stop"`` at once and return the agent."""
        ...

    async def update_config(self, agent_id: str, changes: dict[str, Any]) -> AgentInfo:
        """Merge ``changes`` into the agent's configuration, validated against its template.

        Raises:
            InvalidParameterError: a field is unknown or its value invalid (named in the message).
        """
        ...


class OpenOrders(Protocol):
    """What the kill switch needs of the account: its open orders, and cancelling one.

    Order entry (``app.trading``) is built on this layer, so the switch names only this much;
    the runtime hands it the order path, which implements it."""

    async def open_orders(
        self, agent_id: str | None = None, symbol: str | None = None
    ) -> list[Order]:
        ...

    async def cancel_order(
        self, agent_id: str, symbol: str, order_id: str | None = None,
        client_order_id: str | None = None,
    ) -> Order:
        ...
