"""Tools as JSON: each ToolSpec's JSON schema, and a call given as JSON arguments as the same
``ToolCall`` the XML parser produces (and back).

Why one place: two transports carry calls as JSON, and both must end in the one executor with the
one validation. ``kestrel mcp-serve`` offers each tool to an external agent as an MCP tool; an
agent whose model answers with its API's native tool calls (OpenAI ``tool_calls``, Anthropic
``tool_use``) is offered the same schemas. Either way the JSON arguments become the parameter
elements ``validate`` reads (``to_call``), so a wrong value gets the same words as in XML. A call
stored in a conversation is kept as its XML (``call_xml``), which the parser reads back to the
same ``ToolCall``; ``call_arguments`` turns it into JSON again to send it back to the model as its
own earlier call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from app.tools.protocol.call import ParamNode, ToolCall
from app.tools.protocol.render import check_name, escape_attr, escape_text, format_value
from app.tools.spec import ParamSpec, ParamType, ToolSpec


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
    messages as for an agent inside Kestrel). The parameters come in the spec's order (names it
    does not know after them), whatever order the JSON object had: the same call is always the
    same XML."""
    order = {param.name: index for index, param in enumerate(spec.params)}
    nodes: list[ParamNode] = []
    for name, value in sorted(arguments.items(), key=lambda item: order.get(item[0], len(order))):
        if value is None:
            continue
        param = spec.param(name)
        if param is not None and param.type is ParamType.LIST and isinstance(value, list):
            children = tuple(ParamNode(param.item_tag, _text(item)) for item in value)
            nodes.append(ParamNode(name, "", {}, children))
        elif param is not None and param.type is ParamType.MAP and isinstance(value, dict):
            children = tuple(
                ParamNode(param.item_tag, _text(item), {"name": str(key)})
                for key, item in value.items()
            )
            nodes.append(ParamNode(name, "", {}, children))
        else:
            nodes.append(ParamNode(str(name), _text(value)))
    return ToolCall(spec.name, tuple(nodes))


def call_xml(call: ToolCall) -> str:
    """The call as the XML an agent writes, which ``parse_response`` reads back to ``call``.

    Raises:
        ValueError: a tool or parameter name that is no XML name (``"my param"``), which no tool
            has: the caller answers it as a parameter the tool does not have.
    """
    return _node_xml(ParamNode(call.name, "", call.attrs, call.params))


def _node_xml(node: ParamNode) -> str:
    tag = check_name(node.tag)
    attrs = "".join(f' {check_name(k)}="{escape_attr(v)}"' for k, v in node.attrs.items())
    inner = escape_text(node.text) + "".join(_node_xml(child) for child in node.children)
    return f"<{tag}{attrs}>{inner}</{tag}>"


def call_arguments(spec: ToolSpec | None, call: ToolCall) -> dict[str, Any]:
    """The JSON arguments of a call (``to_call`` backwards): a list as an array, a map as an
    object, a JSON object parameter as the object, integers and booleans typed; any other value,
    decimals included, as its text. A parameter the spec does not know (or any, without a spec)
    is read from its shape: named children an object, children an array, else its text."""
    arguments: dict[str, Any] = {}
    for node in call.params:
        param = spec.param(node.tag) if spec is not None else None
        kind = param.type if param is not None else None
        if kind is None and node.children:
            kind = ParamType.MAP if all("name" in c.attrs for c in node.children) else (
                ParamType.LIST)
        if kind is ParamType.LIST and node.children:
            arguments[node.tag] = [child.text.strip() for child in node.children]
        elif kind is ParamType.MAP and node.children:
            arguments[node.tag] = {c.attrs.get("name", ""): c.text.strip() for c in node.children}
        else:
            arguments[node.tag] = _typed(kind, node.text.strip())
    return arguments


def _typed(kind: ParamType | None, text: str) -> Any:
    """A parameter's text as the JSON value its schema asks for, when it reads as one."""
    try:
        if kind in (ParamType.INTEGER, ParamType.LONG):
            return int(text)
        if kind is ParamType.BOOLEAN and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind is ParamType.JSON_OBJECT and text:
            value = json.loads(text)
            return value if isinstance(value, dict) else text
    except (ValueError, RecursionError):
        pass
    return text
