"""Audit-trail recorders backed by the ledger: Risk Guard decisions and tool calls.

The guard and the executor each accept a small recorder protocol; these put the records in the same
SQLite file as the orders they explain, so an audit can join "why" with "what happened". They join
the tools and the guard to the store, so they live with the composition, not in either: the store
knows nothing of tools or risk. The announcing recorders also tell the bus what they stored (a
tool call completed; an order refused by the Risk Guard).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Mapping
from json.encoder import encode_basestring_ascii
from typing import Any

from app.domain.clock import ms_to_iso
from app.events import EventBus, OrderRejected, ToolCallCompleted
from app.risk.guard import RiskDecisionRecorder
from app.risk.types import RiskDecision
from app.store.disk_full import AUDIT_CALLS, RISK_DECISIONS, DiskFullWatch
from app.store.ledger import Ledger
from app.tools.executor import ToolCallRecord, ToolCallRecorder
from app.tools.protocol.render import format_value

logger = logging.getLogger(__name__)


class SqliteRiskRecorder:
    """Stores every Risk Guard decision, accepted or rejected."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def record(self, decision: RiskDecision) -> None:
        self._ledger.record_risk_decision(
            (decision.now_ms, decision.agent_id, decision.symbol, decision.side.value,
             decision.order_type.value, str(decision.quantity), str(decision.notional),
             int(decision.accepted), decision.rule, decision.reason)
        )


class SqliteToolCallRecorder:
    """Implements the executor's ``ToolCallRecorder``; storage trouble is logged, never raised.

    A full disk is not logged: it trips ``disk`` (the run stops and says so), and the row stays
    pending in the ledger, written with its next transaction if space comes back, else named
    as not recorded when the world closes (``report_unwritten``).
    """

    def __init__(self, ledger: Ledger, disk: DiskFullWatch | None = None) -> None:
        self._ledger = ledger
        self._disk = disk

    def record(self, entry: ToolCallRecord) -> None:
        try:
            params = params_json(entry.params)
            self._ledger.record_tool_call(
                (entry.agent_id, entry.tool_name, params, entry.status, entry.error_code,
                 entry.result_xml, entry.started_ms, entry.duration_ms)
            )
        except sqlite3.Error as exc:
            if self._disk is not None and self._disk.check(exc):
                return
            logger.exception("could not store the call to %s", entry.tool_name)


def report_unwritten(ledger: Ledger, disk: DiskFullWatch) -> None:
    """Name to ``disk`` every audit row the ledger could not write before it closed: each
    tool call by its tool, agent and market time, each Risk Guard decision by its order."""
    calls, risk = ledger.unwritten()
    for agent_id, tool_name, *_, started_ms, _duration in calls:
        disk.unrecorded(AUDIT_CALLS, f"{tool_name} at {_minute(started_ms)}", agent_id)
    for now_ms, agent_id, symbol, side, order_type, quantity, *_ in risk:
        disk.unrecorded(
            RISK_DECISIONS, f"{side} {quantity} {symbol} {order_type} at {_minute(now_ms)}",
            agent_id,
        )


def _minute(ms: int) -> str:
    return ms_to_iso(ms)[:16].replace("T", " ")


class AnnouncingRecorder:
    """Stores each call through ``inner``, then announces it on the bus as ``ToolCallCompleted``
    (the audit, account and chart panels and the tray follow tool calls as they happen)."""

    def __init__(self, inner: ToolCallRecorder, bus: EventBus) -> None:
        self._inner = inner
        self._bus = bus

    def record(self, entry: ToolCallRecord) -> None:
        self._inner.record(entry)
        self._bus.publish_nowait(ToolCallCompleted(
            entry.agent_id, entry.tool_name, entry.status,
            None if entry.error_code is None else str(entry.error_code), entry.duration_ms,
        ))


class AnnouncingRiskRecorder:
    """Stores each Risk Guard decision through ``inner``; a refusal is then announced as
    ``OrderRejected`` (the Risk Guard decides it, so it is published here)."""

    def __init__(self, inner: RiskDecisionRecorder, bus: EventBus) -> None:
        self._inner = inner
        self._bus = bus

    def record(self, decision: RiskDecision) -> None:
        self._inner.record(decision)
        if not decision.accepted:
            self._bus.publish_nowait(OrderRejected(
                agent_id=decision.agent_id, symbol=decision.symbol, side=decision.side.value,
                order_type=decision.order_type.value, quantity=decision.quantity, source="risk",
                rule=decision.rule, reason=decision.reason, time_ms=decision.now_ms,
            ))


def _json_value(value: object) -> str:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return format_value(value)  # type: ignore[arg-type]


# json.dumps with a ``default`` builds a new encoder per call; this one is built once.
_PARAMS_JSON = json.JSONEncoder(default=_json_value, sort_keys=True)


def params_json(params: Mapping[str, Any]) -> str:
    """``json.dumps(params, sort_keys=True, default=...)``, exactly, for any parameters.

    Most calls hold only strings, integers and absent values under plain names; those are
    written directly, a good deal cheaper than the general encoder every other value goes through.
    """
    try:
        keys = sorted(params)
    except TypeError:  # keys of mixed types: the encoder says what it makes of them
        keys = []
    parts = []
    for key in keys:
        if type(key) is not str or not (key.isascii() and key.isidentifier()):
            break
        value = params[key]
        kind = type(value)
        if kind is str:
            parts.append(f'"{key}": {encode_basestring_ascii(value)}')
        elif kind is int:
            parts.append(f'"{key}": {int.__repr__(value)}')
        elif value is None:
            parts.append(f'"{key}": null')
        else:
            break
    else:
        if len(parts) == len(params):
            return "{" + ", ".join(parts) + "}"
    return _PARAMS_JSON.encode(params if type(params) is dict else dict(params))
