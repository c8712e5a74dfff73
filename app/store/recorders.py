"""Audit-trail recorders backed by the ledger: Risk Guard decisions and tool calls.

The guard and the executor each accept a small recorder protocol; these put the records in the same
SQLite file as the orders they explain, so an audit can join "why" with "what happened".
"""

from __future__ import annotations

import json
import logging
import sqlite3

from app.risk.types import RiskDecision
from app.store.ledger import Ledger
from app.tools.executor import ToolCallRecord
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
    """Implements the executor's ``ToolCallRecorder``; storage trouble is logged, never raised."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def record(self, entry: ToolCallRecord) -> None:
        try:
            params = json.dumps(dict(entry.params), default=_json_value, sort_keys=True)
            self._ledger.record_tool_call(
                (entry.agent_id, entry.tool_name, params, entry.status, entry.error_code,
                 entry.result_xml, entry.started_ms, entry.duration_ms)
            )
        except sqlite3.Error:
            logger.exception("could not store the call to %s", entry.tool_name)


def _json_value(value: object) -> str:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return format_value(value)  # type: ignore[arg-type]
