"""``kestrel mcp-serve``: Kestrel's market, indicator, account, trade and memory tools over MCP.

An external agent (any MCP client) connects over stdio and calls the same ToolSpecs Kestrel's own
agents call, through the same ``ToolExecutor``: the same validation and Risk Guard, every call in
the workspace's ``tool_calls`` audit trail under the agent id given (``mcp-client`` by default),
memory tools sandboxed to that agent's folder. Orders take the one order path
(``app.trading.entry``): the kill switch, the approval policy (an order it holds is refused with
its reason, since nobody can be asked from here) and the Risk Guard. Each ToolSpec becomes an
MCP tool whose JSON schema is generated from the spec's parameters (``app.tools.schema``, shared
with the agents' native tool calls); the answer is the tool's ``<tool_result>`` envelope as text,
exactly what an agent inside Kestrel reads.

The SDK is imported here, and this module only by the ``mcp-serve`` command.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from app import __version__
from app.tools.executor import ToolExecutor
from app.tools.protocol.call import ToolCall
from app.tools.registry import ToolRegistry
from app.tools.schema import input_schema, to_call
from app.tools.spec import AgentContext, Permission

logger = logging.getLogger(__name__)

SERVED_PERMISSIONS = frozenset({
    Permission.MARKET, Permission.INDICATOR, Permission.ACCOUNT, Permission.TRADE,
    Permission.MEMORY,
})
DEFAULT_AGENT_ID = "mcp-client"


def served_registry(registry: ToolRegistry) -> ToolRegistry:
    """The tools an external agent may call: market, indicators, account, trading, memory."""
    served = ToolRegistry()
    for spec in registry:
        if spec.permission in SERVED_PERMISSIONS:
            served.register(spec)
    return served


def build_server(executor: ToolExecutor, ctx: AgentContext) -> Server[Any]:
    """An MCP server whose tools are the executor's registry, called as ``ctx``."""
    registry = executor.registry
    tools = [
        types.Tool(
            name=spec.name,
            title=spec.name.replace("_", " ").capitalize(),
            description=f"[{spec.permission}] {spec.description}",
            input_schema=input_schema(spec),
        )
        for spec in registry
    ]

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = registry.get(params.name)
        call = to_call(spec, params.arguments or {}) if spec is not None else ToolCall(
            params.name, ()
        )
        result = await executor.execute(ctx, call)  # unknown tools get UNKNOWN_TOOL, recorded
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.xml)],
            is_error=not result.ok,
        )

    return Server(
        "kestrel", version=__version__,
        instructions=(
            "Kestrel's trading tools on one workspace. Every result is Kestrel's XML "
            "<tool_result> envelope. Orders pass the Risk Guard and the approval policy; a "
            "refusal answers <status>rejected</status> with the rule and the reason."
        ),
        on_list_tools=list_tools, on_call_tool=call_tool,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve until the client closes stdin."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run(server: Server[Any]) -> None:
    anyio.run(serve_stdio, server)
