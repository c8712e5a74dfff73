"""What the chat shows, as plain data: one entry per card, and the parsing that fills it.

A stored conversation is a list of raw protocol messages (a ``<task>``, the model's answer with its
``<thinking>`` and XML call, the ``<tool_result>`` envelope, the person's reply…). The person wants
to read something else: who asked what, which tool ran with which parameters and how it went, and
the agent's answer. This module turns raw text into those facts; ``builder`` decides which card
each message becomes and merges a call with its result. Nothing here imports Qt, so a page of
history can be parsed in a worker thread, off the event loop.

Every value that reaches a card is a string meant to be shown as plain text: the model controls
these texts, so they are never interpreted as markup (the Markdown answer is sanitised separately
by the card that renders it).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from lxml import etree

from app.agents.conversation_store import StoredMessage
from app.events import ConversationMessageAdded
from app.tools.protocol.call import ParamNode, ToolCall
from app.tools.protocol.free_text import DISPLAY
from app.tools.protocol.parser import parse_response
from app.tools.protocol.result import Result, parse_result

PARAM_CHARS = 90  # one parameter's shown value; the full call is one click away (raw XML)
SUMMARY_CHARS = 140
_SPACES = re.compile(r"\s+")

# tool status words as the card shows them
RUNNING = "running"
SUCCESS = "success"
ERROR = "error"
REJECTED = "rejected"
AWAITING = "awaiting approval"


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message as the chat reads it, from the store or from a bus event.

    ``message_id`` is the store's row id (where "load earlier" continues); a live event has none.
    """

    agent_id: str
    task_id: str
    step: int
    role: str
    kind: str
    content: str
    market_ms: int | None = None
    message_id: int | None = None

    @classmethod
    def stored(cls, m: StoredMessage) -> Message:
        return cls(m.agent_id, m.task_id, m.step, m.role, m.kind, m.content, m.market_ms, m.id)

    @classmethod
    def added(cls, e: ConversationMessageAdded, market_ms: int) -> Message:
        return cls(e.agent_id, e.task_id, e.step, e.role, e.kind, e.content, market_ms)


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    value: str


@dataclass(eq=False, slots=True)
class Entry:
    """One card. Mutable: a later message (a result, an answer) updates the card in place.

    Args:
        key: unique within one agent's chat; derived from the message, so feeding the same
            message twice finds the card already there.
        origin: the first message the card was made from ("load earlier" continues before it).
    """

    key: str
    agent_id: str
    task_id: str
    market_ms: int | None
    origin: Message | None

    @property
    def starts_task(self) -> bool:
        """True for the card that opens a task: the chat draws a divider above it."""
        return False


@dataclass(eq=False, slots=True)
class PersonEntry(Entry):
    """What the person wrote: a chat message (a task) or a reply to a question."""

    text: str = ""
    reply: bool = False
    queued: bool = False  # sent, but the agent has not started on it yet

    @property
    def starts_task(self) -> bool:
        return not self.reply


@dataclass(eq=False, slots=True)
class TaskEntry(Entry):
    """A task the person did not type: another agent's dispatch, a job, a reply between agents."""

    task_type: str = ""
    source: str = ""
    payload: Mapping[str, Any] = field(default_factory=dict)
    raw: str = ""

    @property
    def starts_task(self) -> bool:
        return True


@dataclass(eq=False, slots=True)
class ToolEntry(Entry):
    """One tool call and its result, drawn as one card."""

    tool_name: str = ""
    params: tuple[Param, ...] = ()
    thinking: str = ""
    call_xml: str = ""
    result_xml: str = ""
    status: str = RUNNING
    error_code: str = ""
    message: str = ""
    rule: str = ""
    summary: str = ""
    duration_ms: float | None = None

    def set_result(self, xml: str) -> None:
        """Take the ``<tool_result>`` envelope: status, error or refusal, and a summary."""
        result = parse_result(xml)
        self.result_xml = xml
        self.status = result.status if result.status in (SUCCESS, ERROR, REJECTED) else ERROR
        self.error_code = result.error_code
        self.message = result.message
        self.rule = result.rule
        self.summary = summarize(result) if result.ok else ""
        if not self.tool_name:
            self.tool_name = result_tool_name(xml)


@dataclass(eq=False, slots=True)
class AnswerEntry(Entry):
    """The agent's text answer (Markdown), ending its task."""

    text: str = ""
    thinking: str = ""


@dataclass(eq=False, slots=True)
class QuestionEntry(Entry):
    """A clarification the agent asks, or an order waiting for the person's approval."""

    question_id: str = ""
    question_kind: str = "clarification"
    text: str = ""
    replies: tuple[str, ...] = ()
    hint: str = "TEXT"
    answer: str | None = None
    thinking: str = ""

    @property
    def pending(self) -> bool:
        return self.answer is None


@dataclass(eq=False, slots=True)
class FillEntry(Entry):
    """A fill on the account (anyone's: every chat shows it), worded for the person: who
    traded what at which price, and for a sell what it realized (``app.ui.notices``).

    ``market_ms`` is the fill's time: history and fills meet in time order.
    """

    title: str = ""
    line: str = ""
    pnl: str = ""
    pnl_value: Decimal | None = None
    side: str = ""  # BUY or SELL


@dataclass(eq=False, slots=True)
class NoticeEntry(Entry):
    """The loop's own remark: a step limit, a spent budget, a provider failure, a missing price."""

    text: str = ""


# -- parsing -------------------------------------------------------------------------------------


def _xml_parser() -> etree.XMLParser:
    """Hardened: our envelopes carry model-written text, so no entities, DTDs or network."""
    return etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
        remove_comments=True, remove_pis=True,
    )


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (whitespace collapsed), cut to ``limit`` characters with an ellipsis."""
    flat = _SPACES.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def decode_base64(value: str) -> str | None:
    """The UTF-8 text inside a base64 value (undecodable bytes as U+FFFD), or None if not base64."""
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.decode("utf-8", errors="replace")


def _param_value(node: ParamNode) -> str:
    if node.children:
        if all(not child.children for child in node.children):
            named = [c for c in node.children if "name" in c.attrs]
            if len(named) == len(node.children):
                return ", ".join(f"{c.attrs['name']}={c.text.strip()}" for c in node.children)
            return ", ".join(c.text.strip() for c in node.children)
        return f"{len(node.children)} items"
    if node.tag.endswith("_base64"):
        decoded = decode_base64(node.text)
        if decoded is None:
            return "(not valid base64)"
        return f"“{decoded.strip()}”" if decoded.strip() else "(empty)"
    return node.text.strip()


def call_params(call: ToolCall) -> tuple[Param, ...]:
    """A call's parameters as short readable values; base64 contents are decoded to their text."""
    params = []
    for node in call.params:
        name = node.tag.removesuffix("_base64")
        params.append(Param(name, one_line(_param_value(node), PARAM_CHARS)))
    return tuple(params)


def decoded_contents(call_xml: str, result_xml: str) -> list[Param]:
    """Every base64 value of a call and its result, decoded (for the card's XML view): memory
    files travel as base64, which no person can read."""
    found: list[Param] = []
    call = parse_response(call_xml, free_text=DISPLAY).call if call_xml else None
    for node in call.params if call is not None else ():
        if node.tag.endswith("_base64"):
            found.append(Param(f"{node.tag} (call)", decode_base64(node.text) or ""))
    if result_xml:
        try:
            root = etree.fromstring(result_xml.strip().encode("utf-8"), _xml_parser())
        except etree.XMLSyntaxError:
            root = None
        for element in root.iter() if root is not None else ():
            if isinstance(element.tag, str) and element.tag.endswith("_base64") and element.text:
                found.append(Param(f"{element.tag} (result)",
                                   decode_base64(element.text) or ""))
    return found


def result_tool_name(xml: str) -> str:
    """The ``tool_name`` attribute of a ``<tool_result>`` envelope (for a result seen alone)."""
    match = re.search(r'<tool_result\s+tool_name="([^"]*)"', xml)
    return match.group(1) if match else "tool"


def _words(tag: str) -> str:
    return tag.replace("_", " ")


def summarize(result: Result) -> str:
    """One line on what a successful call returned: the data's kind, its count, key values."""
    first = result.first()
    if first is None:
        return "no data"
    parts = [_words(str(first.tag))]
    children = [c for c in first if isinstance(c.tag, str)]
    for name, value in first.attrib.items():
        if len(parts) >= 4:
            break
        if name.endswith(("_ms", "_id", "_iso")) or name in ("time_iso", "status"):
            continue
        if len(value) <= 40:
            parts.append(f"{_words(str(name))} {value}")
    encoded = [c for c in children if str(c.tag).endswith("_base64")]
    if encoded:
        text = decode_base64(encoded[0].text or "")
        parts.append(f"“{text.strip()}”" if text and text.strip() else "empty")
    elif children:
        parts.append(f"{len(children)} item{'s' if len(children) != 1 else ''}")
    return one_line(" · ".join(parts), SUMMARY_CHARS)


def question_id_of(xml: str) -> tuple[str, str, str]:
    """From a parked ``question`` message: (question id, kind, reason) or empty strings.

    The message is either the clarification tool's result envelope
    (``<clarification_requested question_id=…>``) or the loop's ``<approval_requested …/>``.
    """
    try:
        root = etree.fromstring(xml.strip().encode("utf-8"), _xml_parser())
    except etree.XMLSyntaxError:
        return "", "", ""
    if root.tag == "approval_requested":
        return root.get("question_id", ""), "approval", root.get("reason", "")
    found = root.find(".//clarification_requested")
    if found is not None:
        return found.get("question_id", ""), "clarification", ""
    return "", "", ""


def short_id(agent_id: str) -> str:
    """An unknown agent's id, short enough for a line (a UUID's first block)."""
    return agent_id if len(agent_id) <= 12 else f"{agent_id[:8]}…"


def task_source_words(source: str, agent_name: Mapping[str, str]) -> str:
    """Who sent a task, in words: "you", an agent's name, or "a scheduled job"."""
    if source in ("", "user"):
        return "you"
    if source.startswith("agent:"):
        agent_id = source.removeprefix("agent:")
        return agent_name.get(agent_id) or short_id(agent_id)
    if source.startswith("job:"):
        return "a scheduled job"
    return source


def payload_params(payload: Mapping[str, Any]) -> tuple[Param, ...]:
    """A task payload's fields as short values (nested values as compact JSON)."""
    params = []
    for key, value in payload.items():
        if isinstance(value, str):
            text = value
        else:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        params.append(Param(str(key), one_line(text, PARAM_CHARS)))
    return tuple(params)


def readable_hint(hint: str) -> str:
    """``YES_NO`` -> "yes no": the expected answer format in words, for the input's placeholder."""
    return _words(hint).lower().strip() or "text"
