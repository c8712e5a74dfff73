"""Render tool results in the exact Part A envelope, escaping every piece of data.

Results are built as a small tree of ``Element`` values and serialised here, in one place, so no
tool can emit unescaped text: a tool result that contains ``<create_order>`` is data, never a call.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from app.domain.errors import ErrorCode
from app.domain.numbers import plain

# Characters XML 1.0 cannot carry at all, not even as character references.
_INVALID_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_INDENT = "    "
# Plain XML names, no namespace prefix: what every tag and attribute of a result uses.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_GOOD_NAMES: set[str] = set()
_TEXT_SPECIAL = re.compile("[&<>\r\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_ATTR_SPECIAL = re.compile('[&<>"\r\n\t\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]')

AttrValue = str | int | Decimal | bool | float | datetime | None


# Element and ToolResult are slotted but not frozen: several are built for every tool call of every
# agent, and a frozen dataclass's __init__ costs about four times as much. Nothing changes them
# after they are built; the rendered text is made from them once, when the result is created.
@dataclass(slots=True)
class Element:
    """An XML element of a result payload: tag, attributes, optional text and children."""

    tag: str
    attrs: tuple[tuple[str, str], ...] = ()
    text: str | None = None
    children: tuple[Element, ...] = ()

    def attr(self, name: str) -> str | None:
        for key, value in self.attrs:
            if key == name:
                return value
        return None

    def find_all(self, tag: str) -> list[Element]:
        return [child for child in self.children if child.tag == tag]




def format_value(value: AttrValue) -> str:
    """Render one attribute or text value; floats go through their shortest repr, never noise."""
    kind = type(value)  # exact-type fast paths first: this runs for every attribute of every row
    if kind is str:
        return value  # type: ignore[return-value]
    if kind is Decimal:
        return plain(value)  # type: ignore[arg-type]
    if kind is int:
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return plain(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return plain(Decimal(repr(value)))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def el(tag: str, text: AttrValue = None, *children: Element, **attrs: AttrValue) -> Element:
    """Build an Element; ``None`` attributes are left out, other values are formatted."""
    rendered = tuple(
        [(key, format_value(value)) for key, value in attrs.items() if value is not None]
    )
    body = None if text is None else format_value(text)
    return Element(tag, rendered, body, children)  # positional: ~25% cheaper, once per result row


def clean_text(text: str) -> str:
    """Replace characters XML cannot represent with U+FFFD so the envelope always parses."""
    return _INVALID_XML_CHARS.sub("\ufffd", text)


def escape_text(text: str) -> str:
    """Escape element text; a carriage return becomes ``&#13;`` (parsers turn a raw one to LF)."""
    if _TEXT_SPECIAL.search(text) is None:
        return text
    return (
        clean_text(text)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\r", "&#13;")
    )


def escape_attr(text: str) -> str:
    if _ATTR_SPECIAL.search(text) is None:
        return text
    return escape_text(text).replace('"', "&quot;").replace("\n", "&#10;").replace("\t", "&#9;")


def check_name(name: str) -> str:
    """Return ``name`` if it is a plain XML name; a tool building any other tag has a bug.

    Raises:
        ValueError: for a name that would make the envelope malformed (spaces, ``<``, ``:``, ...).
    """
    if name in _GOOD_NAMES:
        return name
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid XML element or attribute name")
    if len(_GOOD_NAMES) < 10_000:  # tags repeat on every row; remember the ones seen
        _GOOD_NAMES.add(name)
    return name


def _attr_text(pairs: tuple[tuple[str, str], ...]) -> str:
    """The attributes as ``' k="v"'`` pieces; one scan decides whether any value needs escaping,
    since almost none do (numbers, symbols, times)."""
    for key, _value in pairs:
        if key not in _GOOD_NAMES:
            check_name(key)
    if _ATTR_SPECIAL.search("".join([value for _key, value in pairs])) is None:
        return "".join([f' {key}="{value}"' for key, value in pairs])
    return "".join([f' {key}="{escape_attr(value)}"' for key, value in pairs])


def _serialise(element: Element, depth: int, out: list[str]) -> None:
    pad = _INDENT * depth
    if element.tag not in _GOOD_NAMES:
        check_name(element.tag)
    attrs = _attr_text(element.attrs) if element.attrs else ""
    if not element.children and element.text is None:
        out.append(f"{pad}<{element.tag}{attrs} />")
        return
    if not element.children:
        out.append(f"{pad}<{element.tag}{attrs}>{escape_text(element.text or '')}</{element.tag}>")
        return
    out.append(f"{pad}<{element.tag}{attrs}>")
    if element.text:
        out.append(f"{pad}{_INDENT}{escape_text(element.text)}")
    for child in element.children:
        _serialise(child, depth + 1, out)
    out.append(f"{pad}</{element.tag}>")


def serialise(element: Element, depth: int = 0) -> str:
    """Serialise an element tree with four-space indentation, as the seeds show it."""
    out: list[str] = []
    _serialise(element, depth, out)
    return "\n".join(out)


Status = Literal["success", "error", "rejected"]


@dataclass(slots=True)
class ToolResult:
    """A rendered result plus the structured facts the runtime and the audit trail need."""

    tool_name: str
    status: Status
    xml: str
    data: tuple[Element, ...] = ()
    error_code: ErrorCode | None = None
    message: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    rule: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "success"


def _open(tool_name: str) -> str:
    opening = _OPENINGS.get(tool_name)
    if opening is None:
        opening = f'<tool_result tool_name="{escape_attr(tool_name)}">'
        if len(_OPENINGS) < 1_000:  # the registry's names, plus a few misspelt ones at most
            _OPENINGS[tool_name] = opening
    return opening


_OPENINGS: dict[str, str] = {}


def render_success(tool_name: str, data: Element | Iterable[Element]) -> ToolResult:
    """Render ``<status>success</status>`` with the payload inside ``<data>``."""
    payload = (data,) if isinstance(data, Element) else tuple(data)
    for item in payload:
        if not isinstance(item, Element):
            raise TypeError(f"{tool_name} returned {type(item).__name__}, not an Element")
    lines = [_open(tool_name), _SUCCESS_HEAD]
    for item in payload:
        _serialise(item, 2, lines)
    lines.append(_SUCCESS_TAIL)
    return ToolResult(tool_name, "success", "\n".join(lines), payload)


_SUCCESS_HEAD = f"{_INDENT}<status>success</status>\n{_INDENT}<data>"
_SUCCESS_TAIL = f"{_INDENT}</data>\n</tool_result>"


def _json_safe(value: Any, depth: int = 0) -> Any:
    """Make details JSON-safe whatever a tool put in them: str keys, no NaN, bounded depth."""
    if depth > 20:
        return "…"
    if isinstance(value, Mapping):
        return {str(key): _json_safe(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [_json_safe(item, depth + 1) for item in items]
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<integer of {value.bit_length()} bits>"
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, Decimal) and not value.is_finite():
        return str(value)
    if isinstance(value, (float, Decimal, datetime)):
        return format_value(value)
    return str(value)


def _details_json(details: Mapping[str, Any]) -> str:
    return json.dumps(_json_safe(details), ensure_ascii=False, sort_keys=True)


def render_error(
    tool_name: str,
    code: ErrorCode,
    message: str,
    details: Mapping[str, Any] | None = None,
) -> ToolResult:
    """Render ``<status>error</status>`` with code, message and optional JSON details."""
    lines = [
        _open(tool_name),
        f"{_INDENT}<status>error</status>",
        f"{_INDENT}<error_details>",
        f"{_INDENT * 2}<error_code>{escape_text(code.value)}</error_code>",
        f"{_INDENT * 2}<message>{escape_text(message)}</message>",
    ]
    if details:
        details_text = escape_text(_details_json(details))
        lines.append(f"{_INDENT * 2}<details_json>{details_text}</details_json>")
    lines += [f"{_INDENT}</error_details>", "</tool_result>"]
    return ToolResult(
        tool_name=tool_name,
        status="error",
        xml="\n".join(lines),
        error_code=code,
        message=message,
        details=dict(details or {}),
    )


def render_rejected(
    tool_name: str,
    rule: str,
    reason: str,
    details: Mapping[str, Any] | None = None,
) -> ToolResult:
    """Render a Risk Guard refusal: ``<status>rejected</status>``, ``<rule>`` and ``<reason>``."""
    lines = [
        _open(tool_name),
        f"{_INDENT}<status>rejected</status>",
        f"{_INDENT}<rule>{escape_text(rule)}</rule>",
        f"{_INDENT}<reason>{escape_text(reason)}</reason>",
    ]
    if details:
        lines.append(f"{_INDENT}<details_json>{escape_text(_details_json(details))}</details_json>")
    lines.append("</tool_result>")
    return ToolResult(
        tool_name=tool_name,
        status="rejected",
        xml="\n".join(lines),
        message=reason,
        details=dict(details or {}),
        rule=rule,
    )
