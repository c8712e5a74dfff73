"""The MCP client side of one runtime: connections, approvals and the tools in the registry.

``attach_mcp`` is the one call the composition makes. With no server configured it returns None
and imports nothing of the SDK; otherwise it registers the approved tools and hands back the hub
that the agent manager asks for each agent's MCP permissions and that the Settings page uses to
list, approve and enable tools.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.config.mcp import McpSettings
from app.mcp.approvals import (
    Approval,
    McpApprovals,
    agent_target,
    template_target,
)
from app.mcp.servers import McpConnections
from app.mcp.tools import ListedTool, McpToolSet
from app.secrets import SecretSource
from app.tools.registry import ToolRegistry


@dataclass
class McpHub:
    connections: McpConnections
    approvals: McpApprovals
    toolset: McpToolSet
    now_ms: Callable[[], int]

    def grants(self, agent_id: str, template_id: str) -> frozenset[str]:
        """The MCP permissions an agent holds (see ``McpApprovals.grants``), limited to the
        tools of servers that are configured and enabled."""
        configured = self.connections.settings
        return frozenset(
            permission for permission in self.approvals.grants(agent_id, template_id)
            if permission.removeprefix("mcp:").split("__", 1)[0] in configured
        )

    async def inspect(self, server: str) -> list[ListedTool]:
        return await self.toolset.inspect(server)

    def approve(self, listed: ListedTool) -> Approval:
        """A person approves the definition shown to them (re-approving keeps its targets)."""
        return self.approvals.approve(listed.server, listed.name, listed.definition,
                                      self.now_ms())

    def enable_for_template(self, server: str, tool: str, template_id: str, on: bool) -> None:
        self.approvals.set_enabled(server, tool, template_target(template_id), on)

    def enable_for_agent(self, server: str, tool: str, agent_id: str, on: bool) -> None:
        self.approvals.set_enabled(server, tool, agent_target(agent_id), on)

    async def aclose(self) -> None:
        await self.connections.aclose()


def attach_mcp(
    registry: ToolRegistry,
    settings: McpSettings,
    workspace_root: Path,
    secrets: SecretSource,
    now_ms: Callable[[], int],
) -> McpHub | None:
    """Register the approved MCP tools of the configured servers; None when none is configured.

    Call it after every core tool is registered: the core names it sees are the ones an MCP tool
    may never take.
    """
    servers = settings.active()
    if not servers:
        return None
    connections = McpConnections(servers, secrets)
    approvals = McpApprovals.for_workspace(workspace_root)
    toolset = McpToolSet(registry, connections, approvals, now_ms)
    toolset.sync()
    approvals.subscribe(toolset.sync)
    return McpHub(connections, approvals, toolset, now_ms)
