"""Write tool calls and answers the way the prompt tells a model to: XML, one call per answer.

The rule engine's answers go through the same parser, validation and audit trail as a model's, so
they are built as text here, with every value escaped.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from app.domain.numbers import plain

# a list parameter is written as (item_tag, [values]), e.g. ("reply", ["Yes", "No"])
ParamValue = str | int | bool | Decimal | tuple[str, list[str]] | Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Answer:
    """One turn: a call (with the reasoning behind it), or the final text of the task with the
    blocks the runtime writes after it (``app.agents.answer_blocks``): (name, content) pairs."""

    thinking: str
    call: str | None = None
    text: str | None = None
    blocks: tuple[tuple[str, str], ...] = ()

    def render(self) -> str:
        if self.call is None:
            # a newline opens each block's text, which the reader drops: the content is exact
            return (self.text or "") + "".join(
                f"\n<{name}>\n{escape(content)}</{name}>" for name, content in self.blocks
            )
        return f"<thinking>{escape(self.thinking)}</thinking>\n{self.call}"


def final(text: str, blocks: Mapping[str, str] | None = None) -> Answer:
    """The task's final answer; ``blocks`` (name -> content, in order) are written after it."""
    return Answer("", text=text, blocks=tuple((blocks or {}).items()))


def _text(value: str | int | bool | Decimal) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return plain(value)
    return str(value)


def call(name: str, tag: str, why: str, /, **params: ParamValue) -> Answer:
    """Build ``<name><param>value</param>…</name>``; ``None`` parameters are left out.

    The thinking is ``[tag] why``: the tag names the plan step, so later turns find its result.

    A mapping becomes JSON text (the ``*_json`` parameters); a list of strings becomes child
    elements named by the tool's item tag, given as ``(item_tag, [values])``.
    """
    parts = [f"<{name}>"]
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], list):
            item_tag, items = value
            inner = "".join(f"<{item_tag}>{escape(str(item))}</{item_tag}>" for item in items)
            parts.append(f"<{key}>{inner}</{key}>")
        elif isinstance(value, Mapping):
            text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
            parts.append(f"<{key}>{escape(text)}</{key}>")
        elif isinstance(value, (str, int, bool, Decimal)):
            parts.append(f"<{key}>{escape(_text(value))}</{key}>")
        else:
            raise TypeError(f"parameter {key} of {name}: cannot write {type(value).__name__}")
    parts.append(f"</{name}>")
    return Answer(f"[{tag}] {why}", "".join(parts))


def indicator_call(
    tag: str, why: str, symbol: str, interval: str, name: str, params: Mapping[str, Any],
    values: int,
) -> Answer:
    """``calculate_technical_indicator`` with named ``<param>`` children."""
    inner = "".join(
        f"<param name={quoteattr(key)}>{escape(_text(value))}</param>"
        for key, value in params.items()
    )
    xml = (
        "<calculate_technical_indicator>"
        f"<symbol>{escape(symbol)}</symbol><interval>{escape(interval)}</interval>"
        f"<indicator_name>{escape(name)}</indicator_name><params>{inner}</params>"
        f"<values>{values}</values></calculate_technical_indicator>"
    )
    return Answer(f"[{tag}] {why}", xml)


def b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def memory_text(first: Any) -> str:
    """The text of a ``<memory_file_content>`` element: its ``<content>`` when the file was read
    as text (a task's data block reads it so), else its decoded ``<content_base64>``."""
    if first is None:
        return ""
    text = first.findtext("content")
    return text if text is not None else unb64(first.findtext("content_base64"))


def unb64(text: str | None) -> str:
    """Decode a memory file's base64 content; undecodable bytes become U+FFFD, not an error."""
    if not text:
        return ""
    try:
        return base64.b64decode(text, validate=True).decode("utf-8", errors="replace")
    except ValueError:
        return ""
