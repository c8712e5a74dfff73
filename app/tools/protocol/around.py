"""What models write around their one call: fences, thinking blocks, prose.

The parser reads the call itself; this module finds it. A model wraps its call in a markdown
fence, opens with ``<thinking>`` (or, as reasoning models through Ollama or llama.cpp do,
``<think>``, or only the ``</think>`` that ends reasoning its chat template opened), or says a
sentence before or after it. Each function here takes one such layer off, names what it did in
``notes`` (for the transcript), and leaves any refusal to the parser as a ``Refusal``. Every scan
is linear in the response: ``rfind`` and regular expressions, with Python looking at no more than
a bounded number of tags.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from app.domain.errors import ErrorCode
from app.tools.protocol.free_text import MARKUP

FENCE_REMOVED = "code fence removed"
FENCE_OPENER = re.compile(r"```[\w+.\-]*[ \t]*\r?\n")
THINKING_ANY = re.compile(r"</?think(?:ing)?\s*>")
_FENCE_TAIL = re.compile(r"(?:^|\n)[ \t]*```[\w+.\-]*[ \t]*$")  # a fence opener ending the text
_THINKING_OPEN = re.compile(r"<(thinking|think)\s*>")
_THINKING_CLOSE = re.compile(r"</thinking\s*>")
_THINK_CLOSE = re.compile(r"</think\s*>")
_OPENING_TAG = re.compile(r"<([A-Za-z_][\w.\-]*)(?=[\s>/])")
_MAX_PROSE_TAGS = 2_000  # tags looked at to find a call inside prose
_MAX_THINKING_BLOCKS = 3
_LOOKAHEAD = 2_000  # how far past "<name" a self-closing "/>" is looked for


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a response cannot be read, for the parser to return as its error."""

    message: str
    code: ErrorCode = ErrorCode.PARSE_ERROR
    tool_name: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@lru_cache(maxsize=512)
def _closing(name: str) -> re.Pattern[str]:
    return re.compile(rf"</{re.escape(name)}\s*>")


@lru_cache(maxsize=512)
def _opening(name: str) -> re.Pattern[str]:
    return re.compile(rf"<{re.escape(name)}(?=[\s>/])")


def unfence(body: str, notes: list[str]) -> str:
    """``body`` without a markdown fence that wraps it whole (or opens it and is never closed),
    when what the fence holds starts with a tag; otherwise ``body`` unchanged."""
    if not body.startswith("```"):
        return body
    opener = FENCE_OPENER.match(body)
    if opener is None or not body[opener.end():].lstrip().startswith("<"):
        return body
    inner = body[opener.end():].strip()
    if inner.endswith("```") and not inner.endswith("````"):
        inner = inner[:-3].rstrip()
    notes.append(FENCE_REMOVED)
    return inner


def leading_thinking(body: str, notes: list[str]) -> tuple[str | None, str, Refusal | None]:
    """The thinking blocks that open ``body`` (``<thinking>`` or ``<think>``), the rest, or the
    refusal of a block never closed."""
    if not body.startswith("<think") and "</think" not in body:
        return None, body, None
    blocks: list[str] = []
    for _ in range(_MAX_THINKING_BLOCKS):
        opening = _THINKING_OPEN.match(body)
        if opening is None:
            break
        tag = opening.group(1)
        closing = (_THINK_CLOSE if tag == "think" else _THINKING_CLOSE).search(body, opening.end())
        if closing is None:
            return None, body, Refusal(
                f"The <{tag}> block is never closed. End it with </{tag}> before the tool call or "
                "answer."
            )
        blocks.append(body[opening.end():closing.start()].strip())
        if tag == "think":
            notes.append("<think> read as <thinking>")
        body = body[closing.end():].strip()
    if not blocks and not body.startswith("<"):
        lone = _THINK_CLOSE.search(body)
        if lone is not None and "<think" not in body[:lone.start()]:
            notes.append("reasoning before a lone </think> read as thinking")
            blocks.append(body[:lone.start()].strip())
            body = body[lone.end():].strip()
    return ("\n\n".join(blocks) if blocks else None), body, None


def call_in_prose(body: str, known_tools: Collection[str]) -> tuple[int, str] | None:
    """Where the call inside ``body`` starts, and its tool: the first known tool (any name when
    none are known) whose tag is closed later or closes itself; of that tool's openings before
    its first closing tag, the last (``use <get_order_book> for depth: <get_order_book>...``).

    Linear: the openings are looked at in order (at most ``_MAX_PROSE_TAGS``), and each name's
    last closing tag and the last opening before a closing are found by ``rfind``, not by
    walking every tag in Python.
    """
    if "<" not in body:
        return None
    last_closing: dict[str, int] = {}
    for tried, found in enumerate(_OPENING_TAG.finditer(body)):
        if tried >= _MAX_PROSE_TAGS:
            return None
        name = found.group(1)
        if known_tools:
            if name not in known_tools:
                continue
        elif name in ("thinking", "think"):
            continue
        if name not in last_closing:
            last_closing[name] = _last(body, _closing(name), f"</{name}", 0, len(body))
        if last_closing[name] > found.start():
            first_close = _closing(name).search(body, found.end())
            assert first_close is not None  # a closing of ``name`` lies after ``found``
            later = _last(body, _opening(name), f"<{name}", found.end(), first_close.start())
            return (later if later >= 0 else found.start()), name
        tail = body.find(">", found.end(), found.end() + _LOOKAHEAD)
        if tail > 0 and body[tail - 1] == "/" and "<" not in body[found.end():tail]:
            return found.start(), name
    return None


def _last(body: str, pattern: re.Pattern[str], prefix: str, start: int, end: int) -> int:
    """The start of the last match of ``pattern`` in ``body[start:end]`` (each match begins
    with ``prefix``), or -1: ``rfind`` for the prefix, checked by the pattern."""
    while True:
        at = body.rfind(prefix, start, end)
        if at < 0:
            return -1
        found = pattern.match(body, at)
        if found is not None and found.end() <= len(body):
            return at
        end = at


def call_end(body: str, start: int, name: str) -> int:
    """Where the call that starts at ``start`` ends: after its last closing tag, after itself
    when it closes itself, else the end of the body (an unclosed call, for lxml to explain)."""
    if body.endswith(f"</{name}>"):
        return len(body)
    last = _last(body, _closing(name), f"</{name}", start, len(body))
    if last >= 0:
        found = _closing(name).match(body, last)
        assert found is not None
        return found.end()
    self_closing = re.compile(rf"<{re.escape(name)}(?=[\s/])[^<>]{{0,{_LOOKAHEAD}}}/>")
    found = self_closing.match(body, start)
    return found.end() if found is not None else len(body)


def commentary(
    leading: str, trailing: str, known_tools: Collection[str], name: str, notes: list[str]
) -> str | Refusal | None:
    """The prose around the call, joined; the refusal of a second call or a misplaced thinking
    block in it; or ``None`` when it is not plain prose."""
    lead, trail = leading.strip(), trailing.strip()
    fence = _FENCE_TAIL.search(lead)
    if fence is not None:
        lead = lead[:fence.start()].rstrip()
        notes.append(FENCE_REMOVED)
    if trail.startswith("```"):
        newline = trail.find("\n")
        trail = "" if newline < 0 else trail[newline + 1:].lstrip()
        notes.append(FENCE_REMOVED)
    for part in (lead, trail):
        if MARKUP.search(_mentions_off(part, known_tools)) is None:
            continue
        other = call_in_prose(part, known_tools) if known_tools else None
        if other is not None:
            return Refusal(
                f"The response holds more than one tool call (<{name}> and <{other[1]}>). Make "
                "exactly one call per response and wait for its result before the next.",
                ErrorCode.MULTIPLE_TOOL_CALLS, name, {"calls": [name, other[1]]},
            )
        if THINKING_ANY.search(part):
            return Refusal(
                "The <thinking> block must be the very first thing in the response, before the "
                "call and before any other text.",
                tool_name=name,
            )
        return None
    if lead:
        notes.append("text before the call kept as commentary")
    if trail:
        notes.append("text after the call kept as commentary")
    return "\n\n".join(part for part in (lead, trail) if part)


def _mentions_off(text: str, known_tools: Collection[str]) -> str:
    """``text`` without bare mentions of known tools (``use <get_order_book> for depth``): an
    opening tag alone names a tool, it does not call it."""
    if not known_tools or "<" not in text:
        return text
    return _mention_of(frozenset(known_tools)).sub("", text)


@lru_cache(maxsize=32)
def _mention_of(known_tools: frozenset[str]) -> re.Pattern[str]:
    names = "|".join(re.escape(name) for name in sorted(known_tools, key=len, reverse=True))
    return re.compile(f"<(?:{names})>")
