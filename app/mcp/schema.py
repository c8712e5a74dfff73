"""Map an MCP tool's JSON input schema to ToolSpec parameters, and the typed values back to JSON.

Agents call every tool in the same XML form, so an MCP tool's parameters must become ParamSpecs.
Only shapes that map without guessing are accepted: string, number, integer, boolean, a string
enum, an array or a nested object (both written as JSON text), each optionally nullable. Anything
else (``$ref``, ``oneOf``, a parameter name that is not an XML name, ...) is refused with the
reason, and the tool is not offered: a half-understood tool would be called wrongly.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.domain.errors import InvalidParameterError
from app.tools.protocol.render import escape_text
from app.tools.spec import ParamSpec, ParamType

MAX_PARAMS = 30
MAX_DESCRIPTION = 400
_XML_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u2028\u2029]")
_UNSUPPORTED = ("$ref", "oneOf", "allOf", "not", "if", "patternProperties", "$defs")


class SchemaRefused(ValueError):
    """The schema cannot be offered as XML parameters; the message says why."""


@dataclass(frozen=True, slots=True)
class MappedParam:
    """One parameter: its ParamSpec and the JSON type its value is sent back as."""

    spec: ParamSpec
    json_type: str  # string | number | integer | boolean | array | object


def one_line(text: object) -> str:
    """Untrusted text on one line: control characters and runs of white space become a space."""
    return _SPACE.sub(" ", _CONTROL.sub(" ", str(text or ""))).strip()


def clean_text(text: object, limit: int = MAX_DESCRIPTION) -> str:
    """An untrusted description made safe to show in a prompt: one line, no control
    characters, capped, and XML-escaped (``&``, ``<``, ``>``), so it reads as data."""
    value = one_line(text)
    value = value if len(value) <= limit else value[: limit - 1] + "…"
    return escape_text(value)


def _non_null_type(prop: Mapping[str, Any], name: str) -> tuple[str, bool]:
    """The property's one JSON type and whether null is also allowed."""
    if "anyOf" in prop:  # pydantic writes Optional[X] as anyOf [X, null]
        options = prop["anyOf"]
        if not isinstance(options, list):
            raise SchemaRefused(f"parameter {name!r}: anyOf is not a list")
        kinds = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(kinds) != 1 or not isinstance(kinds[0], dict) or len(options) > 2:
            raise SchemaRefused(f"parameter {name!r}: a choice between several types (anyOf)")
        inner, _ = _non_null_type(kinds[0], name)
        return inner, len(options) == 2
    kind = prop.get("type")
    if kind is None and "enum" in prop:
        kind = "string"
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise SchemaRefused(f"parameter {name!r}: several types {kind}")
        return str(kinds[0]), len(kinds) != len(kind)
    if not isinstance(kind, str):
        raise SchemaRefused(f"parameter {name!r}: no type given")
    return kind, False


def _bound(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _param(name: str, prop: Any, required: bool) -> MappedParam:
    if not _XML_NAME.match(name) or name.lower().startswith("xml"):
        raise SchemaRefused(f"parameter name {name[:40]!r} cannot be an XML element name")
    if not isinstance(prop, dict):
        raise SchemaRefused(f"parameter {name!r}: its schema is not an object")
    for key in _UNSUPPORTED:
        if key in prop:
            raise SchemaRefused(f"parameter {name!r}: uses {key}, which cannot be mapped")
    kind, nullable = _non_null_type(prop, name)
    description = clean_text(prop.get("description") or prop.get("title") or name)
    default = prop.get("default")
    required = required and not nullable
    common: dict[str, Any] = {"name": name, "description": description, "required": required}
    if "enum" in prop:
        choices = prop["enum"]
        if (not isinstance(choices, list) or not choices
                or not all(isinstance(c, str) for c in choices)):
            raise SchemaRefused(f"parameter {name!r}: only an enum of strings can be mapped")
        if any(not c or len(c) > 100 or _CONTROL.search(c) or "|" in c for c in choices):
            raise SchemaRefused(f"parameter {name!r}: an enum value cannot be shown safely")
        spec = ParamSpec(type=ParamType.ENUM, choices=tuple(choices),
                         default=default if default in choices else None, **common)
        return MappedParam(spec, "string")
    if kind == "string":
        max_length = prop.get("maxLength")
        spec = ParamSpec(
            type=ParamType.STRING, default=default if isinstance(default, str) else None,
            max_length=max_length if isinstance(max_length, int) and max_length > 0 else None,
            **common,
        )
        return MappedParam(spec, "string")
    if kind in ("integer", "number"):
        low: int | Decimal | None = _bound(prop.get("minimum"))
        high: int | Decimal | None = _bound(prop.get("maximum"))
        if kind == "integer":  # the whole numbers within the bounds: 1.5 as a minimum is 2
            low = None if low is None else math.ceil(low)
            high = None if high is None else math.floor(high)
        spec = ParamSpec(
            type=ParamType.INTEGER if kind == "integer" else ParamType.DECIMAL,
            minimum=low, maximum=high, default=_bound(default) if kind == "number" else (
                default if isinstance(default, int) and not isinstance(default, bool) else None
            ), **common,
        )
        return MappedParam(spec, kind)
    if kind == "boolean":
        spec = ParamSpec(type=ParamType.BOOLEAN,
                         default=default if isinstance(default, bool) else None, **common)
        return MappedParam(spec, "boolean")
    if kind == "array":
        items = prop.get("items")
        shape = "" if not isinstance(items, dict) else f" of {items.get('type', 'values')}"
        spec = ParamSpec(
            type=ParamType.STRING, example="JSON array", **{
                **common, "description": f"{description} (a JSON array{shape}, e.g. [\"a\"])"
            },
        )
        return MappedParam(spec, "array")
    if kind == "object":
        spec = ParamSpec(type=ParamType.JSON_OBJECT, **common)
        return MappedParam(spec, "object")
    raise SchemaRefused(f"parameter {name!r}: type {kind!r} cannot be mapped")


def map_input_schema(schema: Any) -> tuple[MappedParam, ...]:
    """The parameters of a tool from its ``inputSchema``.

    Raises:
        SchemaRefused: the schema holds something that cannot be offered safely; says what.
    """
    if not isinstance(schema, dict):
        raise SchemaRefused("the input schema is not a JSON object")
    if schema.get("type", "object") != "object":
        raise SchemaRefused(f"the input schema has type {schema.get('type')!r}, not object")
    for key in _UNSUPPORTED[:4]:
        if key in schema:
            raise SchemaRefused(f"the input schema uses {key}, which cannot be mapped")
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict):
        raise SchemaRefused("the input schema's properties are not an object")
    if len(properties) > MAX_PARAMS:
        raise SchemaRefused(f"the tool has {len(properties)} parameters (at most {MAX_PARAMS})")
    required = schema.get("required") or []
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaRefused("the input schema's required list is not a list of names")
    missing = [name for name in required if name not in properties]
    if missing:
        raise SchemaRefused(f"required parameter {missing[0][:40]!r} is not described")
    return tuple(_param(name, prop, name in required) for name, prop in properties.items())


def to_arguments(params: tuple[MappedParam, ...], values: Mapping[str, Any]) -> dict[str, Any]:
    """The validated XML values as the JSON arguments the server expects; unset ones left out.

    Raises:
        InvalidParameterError: an array parameter is not a JSON array.
    """
    arguments: dict[str, Any] = {}
    for mapped in params:
        name = mapped.spec.name
        value = values.get(name)
        if value is None or (value == "" and not mapped.spec.required):
            continue
        if mapped.json_type == "number" and isinstance(value, Decimal):
            arguments[name] = int(value) if value == value.to_integral_value() else float(value)
        elif mapped.json_type == "array":
            arguments[name] = _json_array(name, str(value))
        else:
            arguments[name] = value
    return arguments


def _json_array(name: str, text: str) -> list[Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, list):
        raise InvalidParameterError(
            f"Parameter <{name}> must be a JSON array such as [\"a\", \"b\"], got {text[:40]!r}.",
            details={"parameter": name},
        )
    return value
