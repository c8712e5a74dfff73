"""``kestrel mcp-serve``: Kestrel's market, indicator, account, trade and memory tools over MCP.

An external agent (any MCP client) connects over stdio and calls the same ToolSpecs Kestrel's own
agents call, through the same ``ToolExecutor``: the same validation and Risk Guard, every call in
the workspace's ``tool_calls`` audit trail under the agent id given (``mcp-client`` by default),
memory tools sandboxed to that agent's folder. Orders take the one order path
(``app.trading.entry``): the kill switch, the approval policy (an order it holds is refused with
its reason, since nobody can be asked from here) and the Risk Guard. Each ToolSpec becomes an
MCP tool whose JSON schema is generated from the spec's parameters; the answer is the tool's
``<tool_result>`` envelope as text, exactly what an agent inside Kestrel reads.

The SDK is imported here, and this module only by the ``mcp-serve`` command.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from app import __version__
from app.tools.executor import ToolExecutor
from app.tools.protocol.call import ParamNode, ToolCall
from app.tools.protocol.render import format_value
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext, ParamSpec, ParamType, Permission, ToolSpec

logger = logging.getLogger(__name__)

SERVED_PERMISSIONS = frozenset({
    Permission.MARKET, Permission.INDICATOR, Permission.ACCOUNT, Permission.TRADE,
    Permission.MEMORY,
})
DEFAULT_AGENT_ID = "mcp-client"


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format_value(value)
    if isinstance(value, bytes):
        return None
    return value


def param_schema(param: ParamSpec) -> dict[str, Any]:
    """The JSON schema of one parameter."""
    schema: dict[str, Any] = {"description": param.description.rstrip(". ") + "."}
    kind = param.type
    low = None if param.minimum is None else _json_number(param.minimum)
    high = None if param.maximum is None else _json_number(param.maximum)
    if kind in (ParamType.INTEGER, ParamType.LONG):
        schema["type"] = "integer"
        _bounds(schema, "minimum", low, "maximum", high)
    elif kind is ParamType.DECIMAL:
        schema["type"] = ["string", "number"]
        schema["description"] += " A decimal number; a string such as \"0.25\" keeps every digit."
        _bounds(schema, "minimum", low, "maximum", high)
    elif kind is ParamType.BOOLEAN:
        schema["type"] = "boolean"
    elif kind is ParamType.ENUM:
        schema["type"] = "string"
        schema["enum"] = list(param.choices)
    elif kind is ParamType.LIST:
        schema["type"] = "array"
        schema["items"] = {"type": "string"}
        _bounds(schema, "minItems", low, "maxItems", high)
    elif kind is ParamType.MAP:
        schema["type"] = "object"
        schema["additionalProperties"] = {"type": ["string", "number", "boolean"]}
    elif kind is ParamType.JSON_OBJECT:
        schema["type"] = "object"
    elif kind is ParamType.BASE64:
        schema["type"] = "string"
        schema["contentEncoding"] = "base64"
    else:
        schema["type"] = "string"
        if param.max_length is not None:
            schema["maxLength"] = param.max_length
    if param.default not in (None, "") and not isinstance(param.default, bytes):
        schema["default"] = json.loads(json.dumps(param.default, default=_json_default))
    return schema


def _json_number(value: int | Decimal) -> int | float:
    return value if isinstance(value, int) else (
        int(value) if value == value.to_integral_value() else float(value)
    )


def _bounds(schema: dict[str, Any], low_key: str, low: Any, high_key: str, high: Any) -> None:
    if low is not None:
        schema[low_key] = low
    if high is not None:
        schema[high_key] = high


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    """The JSON schema of a tool's parameters, generated from its ToolSpec."""
    return {
        "type": "object",
        "properties": {param.name: param_schema(param) for param in spec.params},
        "required": [param.name for param in spec.params if param.required],
        "additionalProperties": False,
    }


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float | int | Decimal):
        return format_value(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def to_call(spec: ToolSpec, arguments: Mapping[str, Any]) -> ToolCall:
    """The JSON arguments as the parsed XML call the executor validates (same checks, same
    messages as for an agent inside Kestrel)."""
    nodes: list[ParamNode] = []
    for name, value in arguments.items():
        if value is None:
            continue
        param = spec.param(name)
        kind = param.type if param is not None else None
        if kind is ParamType.LIST and isinstance(value, list):
            children = tuple(ParamNode(param.item_tag, _text(item)) for item in value)
            nodes.append(ParamNode(name, "", {}, children))
        elif kind is ParamType.MAP and isinstance(value, dict):
            children = tuple(
                ParamNode(param.item_tag, _text(item), {"name": str(key)})
                for key, item in value.items()
            )
            nodes.append(ParamNode(name, "", {}, children))
        else:
            nodes.append(ParamNode(str(name), _text(value)))
    return ToolCall(spec.name, tuple(nodes))


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
