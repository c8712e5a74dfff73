"""Reading a ``<tool_result>`` envelope back: its status and either its data or its error.

Everything that shows or acts on a tool's answer after the fact reads it here (the rule engine's
transcript, the chat's cards, Telegram's alerts). The envelopes are our own, but they are parsed
with the same hardened settings as model output (no entities, no network, no DTD), and anything
unreadable becomes an error result, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from lxml import etree

# Parsed results kept for the next turns of their task (each turn re-reads the whole
# conversation): enough for every message of a few dozen agents' current tasks, and a bound on
# memory, since each parsed tool result holds an XML tree outside Python's heap.
CACHED_MESSAGES = 512


def xml_parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
        remove_comments=True, remove_pis=True,
    )


@dataclass(frozen=True, slots=True, eq=False)
class Result:
    """One ``<tool_result>``: its status and either the data elements or the error/refusal.

    Equal only to itself (and hashed by identity): ``parse_result`` hands back the same object
    for the same text, so the analyst's caches keyed by a result hit on every later turn.
    """

    status: str  # "success", "error", "rejected"
    data: tuple[etree._Element, ...] = ()
    error_code: str = ""
    message: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    rule: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "success"

    def first(self) -> etree._Element | None:
        return self.data[0] if self.data else None

    def attr(self, name: str) -> str | None:
        """The attribute ``name`` of the first data element that has it."""
        for element in self.data:
            value = element.get(name)
            if value is not None:
                return value
        return None

    def problem(self) -> str:
        """The failure in words, for a log line or a final answer."""
        if self.status == "rejected":
            return f"rejected by the Risk Guard ({self.rule}): {self.message}"
        code = f"{self.error_code}: " if self.error_code else ""
        return f"{code}{self.message}"


def result_tool(content: str) -> str:
    """The ``tool_name`` of a ``<tool_result>`` envelope, read from its opening tag."""
    start = content.find('tool_name="')
    end = content.find('"', start + 11) if start >= 0 else -1
    return content[start + 11:end] if end > start else ""


@lru_cache(maxsize=CACHED_MESSAGES)
def parse_result(content: str) -> Result:
    """A ``<tool_result>`` envelope as a ``Result``; unreadable text is an error result."""
    try:
        root = etree.fromstring(content.strip().encode("utf-8"), xml_parser())
    except etree.XMLSyntaxError as exc:
        return Result("error", error_code="PARSE_ERROR", message=f"unreadable tool result: {exc}")
    status = (root.findtext("status") or "").strip()
    if status == "success":
        data = root.find("data")
        return Result("success", tuple(data) if data is not None else ())
    if status == "rejected":
        return Result(
            "rejected", message=(root.findtext("reason") or "").strip(),
            rule=(root.findtext("rule") or "").strip(), details=_details(root.findtext(
                "details_json")),
        )
    error = root.find("error_details")
    if error is None:
        return Result("error", error_code="UNKNOWN", message="a tool result without a status")
    return Result(
        "error", error_code=(error.findtext("error_code") or "").strip(),
        message=(error.findtext("message") or "").strip(),
        details=_details(error.findtext("details_json")),
    )


def _details(text: str | None) -> Mapping[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
