"""Tool specifications: the one description of a tool that validation, coercion, permission checks
and the prompt's "Available Tools" section are all derived from, so they can never drift apart.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from app.domain.errors import InvalidParameterError, MissingParameterError
from app.domain.numbers import DECIMAL_SYNTAX, INTEGER_SYNTAX, is_plain_decimal, is_plain_integer
from app.tools.protocol.render import format_value

if TYPE_CHECKING:
    from app.tools.protocol.call import ParamNode
    from app.tools.protocol.render import Element


class ParamType(StrEnum):
    """How a parameter's XML is read; the value is the placeholder the model sees."""

    STRING = "string"
    INTEGER = "integer"
    LONG = "long"
    DECIMAL = "decimal"
    BOOLEAN = "boolean"
    ENUM = "enum"
    LIST = "list"
    MAP = "map"
    JSON_OBJECT = "string_json_object"
    BASE64 = "string_base64_encoded"


class Permission(StrEnum):
    """Permission groups an agent template grants; every tool belongs to exactly one."""

    MARKET = "market"
    INDICATOR = "indicator"
    ACCOUNT = "account"
    TRADE = "trade"
    MEMORY = "memory"
    AGENTS = "agents"
    TASKS = "tasks"
    JOBS = "jobs"
    NOTIFY = "notify"
    ASK_USER = "ask_user"
    # the person's own controls at the desk (moving an order from the chart): never granted to
    # an agent template, so no agent's prompt lists these tools
    DESK = "desk"


ALL_PERMISSIONS = frozenset(Permission)

_INT_RE = re.compile(r"[+-]?[0-9]{1,19}", re.ASCII)  # the one integer syntax, at most 19 digits
_LONG_LIMIT = 2**63 - 1
# an optional parameter left empty (<limit></limit> or <limit/>) means "use the default"
_EMPTY_MEANS_DEFAULT = frozenset({
    ParamType.STRING, ParamType.INTEGER, ParamType.LONG, ParamType.DECIMAL, ParamType.BOOLEAN,
    ParamType.ENUM,
})
_IMMUTABLE = frozenset({type(None), bool, int, float, str, bytes, Decimal})  # defaults used as-is
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One parameter of a tool.

    Attributes:
        minimum, maximum: inclusive bounds for numbers; for strings and lists, their length.
        choices: the allowed values of an ENUM (matched case-insensitively, returned canonical).
        item_tag: the child tag of a LIST (``symbol`` inside ``symbols``).
        example: what the invocation format shows between the tags, defaulting to the type.
        free_text: the value is prose a model writes (a note, a message, a reason): raw '<', '>'
            and '&' in it are read as text where they cannot be markup
            (``app.tools.protocol.free_text``). Elsewhere they must be escaped.
        verbatim: a STRING kept exactly as written (a file's content: its blank lines and final
            newline matter), not stripped; only a newline right after the opening tag is
            dropped, so ``<content>`` may start on a line of its own. Empty is a value (an
            empty file), not "use the default".
    """

    name: str
    type: ParamType
    description: str
    required: bool = False
    default: Any = None
    minimum: int | Decimal | None = None
    maximum: int | Decimal | None = None
    choices: tuple[str, ...] = ()
    item_tag: str = ""
    example: str = ""
    max_length: int | None = None
    free_text: bool = False
    verbatim: bool = False

    def placeholder(self) -> str:
        if self.example:
            return self.example
        if self.type is ParamType.ENUM:
            return "|".join(self.choices)
        return self.type.value


@dataclass(frozen=True, slots=True)
class AgentContext:
    """Who is calling a tool: identity, granted permissions and the agent's market focus."""

    agent_id: str
    permissions: frozenset[str] = ALL_PERMISSIONS
    role: str = "operator"
    watched_symbols: tuple[str, ...] = ()
    interval: str = "1h"
    # the task being worked on, and a key unique to this call within it ("<task_id>:<step>"):
    # a task redelivered after a crash repeats its keys, so tools that create things (orders,
    # dispatched tasks) recognise the repeat instead of doing it twice
    task_id: str = ""
    call_key: str = ""
    # a person approved this very call (the loop asked them after order entry held it)
    approved: bool = False
    # a person can be asked to approve what order entry holds (an agent's loop parks the task
    # and asks); False where nobody can answer (an external agent over kestrel mcp-serve)
    can_ask: bool = True


# a coroutine function, not any awaitable: the executor steps the coroutine itself (``send``) to
# arm the deadline only once the handler suspends
ToolHandler = Callable[
    [AgentContext, dict[str, Any]], Coroutine[Any, Any, "Element | Sequence[Element]"]
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """Everything about one tool: what it is called, what it takes, who may call it, how it runs."""

    name: str
    group: str
    description: str
    params: tuple[ParamSpec, ...]
    permission: Permission | str  # a core group, or ``mcp:<server>__<tool>`` (app.mcp)
    handler: ToolHandler
    returns: str = ""
    timeout_s: float | None = None  # None: the executor's default (settings.tools)
    extra_rules: tuple[str, ...] = field(default_factory=tuple)
    _by_name: dict[str, ParamSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # validate() looks every parameter of every call up by name
        object.__setattr__(self, "_by_name", {p.name: p for p in reversed(self.params)})

    def param(self, name: str) -> ParamSpec | None:
        return self._by_name.get(name)


def _fail(spec: ParamSpec, message: str, **details: Any) -> InvalidParameterError:
    return InvalidParameterError(
        f"Parameter <{spec.name}> {message}",
        details={"parameter": spec.name, **details},
    )


def _check_range(spec: ParamSpec, value: int | Decimal, what: str = "") -> None:
    """Check bounds, naming them as the prompt shows them (0.00000001, never 1E-8)."""
    if spec.minimum is None and spec.maximum is None:
        return
    if spec.minimum is not None and value < spec.minimum:
        low, got = format_value(spec.minimum), format_value(value)
        raise _fail(spec, f"must be at least {low}{what}, got {got}.", minimum=low, got=got)
    if spec.maximum is not None and value > spec.maximum:
        high, got = format_value(spec.maximum), format_value(value)
        raise _fail(spec, f"must be at most {high}{what}, got {got}.", maximum=high, got=got)


def _scalar_text(spec: ParamSpec, node: ParamNode) -> str:
    if node.children:
        found = node.children[0].tag
        fix = (
            f" To write '<{found}>' as text, write &lt;{found}&gt; or wrap the value in "
            "<![CDATA[ ... ]]>." if spec.free_text else ""
        )
        raise _fail(spec, f"must be plain text, not nested elements (found <{found}>).{fix}")
    return node.text


def coerce(spec: ParamSpec, node: ParamNode) -> Any:
    """Turn one parsed parameter element into a typed value, or raise INVALID_PARAMETER.

    Raises:
        InvalidParameterError: the message names the parameter, the expected type and the range.
    """
    kind = spec.type
    if kind is ParamType.LIST:
        return _coerce_list(spec, node)
    if kind is ParamType.MAP:
        return _coerce_map(spec, node)
    text = _scalar_text(spec, node)
    if kind is ParamType.BASE64:
        return _coerce_base64(spec, text)
    if spec.verbatim:
        return _verbatim(spec, text)
    text = text.strip()
    if kind is ParamType.STRING:
        if spec.max_length is not None and len(text) > spec.max_length:
            raise _fail(spec, f"is too long: {len(text)} characters > {spec.max_length}.")
        if spec.required and not text:
            raise _fail(spec, "must not be empty.")
        if text and (spec.minimum is not None or spec.maximum is not None):
            _check_range(spec, len(text), " characters")
        return text
    if kind in (ParamType.INTEGER, ParamType.LONG):
        if not _INT_RE.fullmatch(text):
            if is_plain_integer(text):
                raise _fail(spec, f"is far too large: {len(text)} digits.", got=text[:40])
            raise _fail(
                spec,
                f"must be {INTEGER_SYNTAX} ({kind.value}); got {text[:40]!r}.",
                got=text[:40],
            )
        value = int(text)
        if abs(value) > _LONG_LIMIT:
            raise _fail(spec, f"is out of range: {value} does not fit in 64 bits.", got=text)
        _check_range(spec, value)
        return value
    if kind is ParamType.DECIMAL:
        return _coerce_decimal(spec, text)
    if kind is ParamType.BOOLEAN:
        lowered = text.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise _fail(spec, f"must be true or false, got {text[:40]!r}.")
    if kind is ParamType.ENUM:
        for choice in spec.choices:
            if choice.lower() == text.lower():
                return choice
        raise _fail(
            spec,
            f"must be one of {', '.join(spec.choices)}; got {text[:40]!r}.",
            allowed=list(spec.choices),
        )
    if kind is ParamType.JSON_OBJECT:
        return _coerce_json(spec, text)
    raise AssertionError(f"unhandled parameter type {kind}")


def _verbatim(spec: ParamSpec, text: str) -> str:
    """A STRING as written, less one newline right after the opening tag."""
    if text.startswith("\n"):
        text = text[1:]
    if spec.max_length is not None and len(text) > spec.max_length:
        raise _fail(spec, f"is too long: {len(text)} characters > {spec.max_length}.")
    return text


def _coerce_decimal(spec: ParamSpec, text: str) -> Decimal:
    if len(text) > 64:
        raise _fail(spec, "is not a number: the text is longer than 64 characters.")
    if not is_plain_decimal(text):
        raise _fail(spec, f"must be {DECIMAL_SYNTAX}; got {text!r}.", got=text)
    value = Decimal(text)
    if value and abs(value.adjusted()) > 30:
        raise _fail(spec, f"is out of any sensible range: {text!r}.")
    _check_range(spec, value)
    return value


def _coerce_base64(spec: ParamSpec, text: str) -> bytes:
    compact = "".join(text.split())
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise _fail(
            spec,
            "is not valid base64: encode the content with the standard alphabet (A-Z a-z 0-9 + /) "
            "and '=' padding.",
        ) from None


def _coerce_json(spec: ParamSpec, text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(
            spec,
            f"is not valid JSON: {exc.msg} at character {exc.pos}. Write a JSON object such as "
            '{"key": "value"}, with & escaped as &amp; and < as &lt;.',
        ) from None
    except (ValueError, RecursionError):  # absurd nesting or a number of thousands of digits
        raise _fail(
            spec, "is not usable JSON: it is nested too deeply or holds a huge number."
        ) from None
    if not isinstance(value, dict):
        raise _fail(spec, f"must be a JSON object ({{...}}), got a JSON {type(value).__name__}.")
    return value


def _coerce_list(spec: ParamSpec, node: ParamNode) -> list[str]:
    items: list[str] = []
    for child in node.children:
        if child.tag != spec.item_tag:
            raise _fail(
                spec,
                f"may only contain <{spec.item_tag}> elements, found <{child.tag}>.",
            )
        if child.children:
            raise _fail(spec, f"items <{spec.item_tag}> must be plain text.")
        value = child.text.strip()
        if not value:
            raise _fail(spec, f"has an empty <{spec.item_tag}>.")
        items.append(value)
    if not node.children and node.text.strip():
        raise _fail(
            spec,
            f"must list each value in its own <{spec.item_tag}> element, e.g. "
            f"<{spec.name}><{spec.item_tag}>...</{spec.item_tag}></{spec.name}>.",
        )
    if spec.required and not items:
        raise _fail(spec, f"needs at least one <{spec.item_tag}>.")
    if spec.minimum is not None and items and len(items) < int(spec.minimum):
        raise _fail(spec, f"has {len(items)} items; at least {spec.minimum} are needed.")
    if spec.maximum is not None and len(items) > int(spec.maximum):
        raise _fail(spec, f"has {len(items)} items; at most {spec.maximum} are allowed.")
    return items


def _coerce_map(spec: ParamSpec, node: ParamNode) -> dict[str, str]:
    values: dict[str, str] = {}
    for child in node.children:
        name = child.attrs.get("name", "").strip()
        if child.tag != spec.item_tag or not name:
            raise _fail(
                spec,
                f'must contain only <{spec.item_tag} name="...">value</{spec.item_tag}> elements.',
            )
        if name in values:
            raise _fail(spec, f'names "{name}" twice.')
        if child.children:
            raise _fail(spec, f'entry "{name}" must hold plain text, not elements.')
        values[name] = child.text.strip()
    if not node.children and node.text.strip():
        raise _fail(
            spec,
            f'must hold <{spec.item_tag} name="...">value</{spec.item_tag}> elements, not text.',
        )
    return values


def validate(spec: ToolSpec, params: Sequence[ParamNode]) -> dict[str, Any]:
    """Check a call's parameters against the spec and return typed values with defaults filled.

    Raises:
        MissingParameterError, InvalidParameterError: naming the parameter and what is allowed.
    """
    values: dict[str, Any] = {}
    seen: set[str] = set()
    by_name = spec._by_name
    for node in params:
        param = by_name.get(node.tag)
        if param is None:
            known = {p.name for p in spec.params}
            allowed = ", ".join(sorted(known)) or "none"
            raise InvalidParameterError(
                f"<{spec.name}> has no parameter <{node.tag}>. Its parameters are: {allowed}.",
                details={"parameter": node.tag, "allowed": sorted(known)},
            )
        if param.name in seen:
            raise InvalidParameterError(
                f"Parameter <{param.name}> is given twice; give it once.",
                details={"parameter": param.name},
            )
        seen.add(param.name)
        if node.attrs and param.type is not ParamType.MAP:
            raise InvalidParameterError(
                f"Parameter <{param.name}> must not carry attributes; put the value between the "
                f"tags: <{param.name}>{param.placeholder()}</{param.name}>.",
                details={"parameter": param.name, "attributes": sorted(node.attrs)},
            )
        if (
            not param.required
            and param.type in _EMPTY_MEANS_DEFAULT
            and not param.verbatim
            and not node.children
            and not node.text.strip()
        ):
            continue  # an optional scalar left empty means "use the default"
        values[param.name] = coerce(param, node)
    if len(values) == len(spec.params):
        return values  # every parameter was given: no default to fill, none missing
    for param in spec.params:
        if param.name in values:
            continue
        if param.required:
            raise MissingParameterError(
                f"<{spec.name}> needs <{param.name}> ({param.description.rstrip('.')}). Add "
                f"<{param.name}>{param.placeholder()}</{param.name}> inside <{spec.name}>.",
                details={"parameter": param.name},
            )
        default = param.default
        if type(default) not in _IMMUTABLE:
            default = copy.deepcopy(default)  # a tool may mutate its list
        values[param.name] = default
    return values


def describe_params(params: Mapping[str, Any]) -> str:
    """Summarise parameters for cards and logs, shortening long values."""
    parts = []
    for key, value in params.items():
        text = str(value)
        parts.append(f"{key}={text[:40]}{'…' if len(text) > 40 else ''}")
    return ", ".join(parts)
