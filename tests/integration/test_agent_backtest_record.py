"""A short agent backtest leaves exactly the record it left before the backtest was made faster.

The agent backtest batches its commits, reuses what it already parsed and skips work nobody
reads; none of that may change what the run did or what it recorded. This runs the two
rule-engine templates over 400 hourly bars and compares every table the run writes (orders,
fills, equity curve, the audit trail of tool calls and Risk Guard decisions, the agents'
conversations and usage, tasks, notifications) and every memory file with a digest recorded from
the code before those changes (``tests/data/agent_backtest_record.json``). Wall-clock columns
(``wall_ms``, durations, latencies) are left out: they differ between any two runs.

To record the file again after a deliberate change of what agents do, run this module as a
script: ``.venv/bin/python -m tests.integration.test_agent_backtest_record``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.runtime.agent_backtest import AgentBacktestOptions, run_agent_backtest
from app.store.texts import install
from tests.helpers.paths import BTC_USD_1H, TEST_DATA

RECORD = TEST_DATA / "agent_backtest_record.json"
TEMPLATES = ("AnalystAgent_Trend_v1", "TraderAgent_Default_v1")
BARS = 400
TABLES = {
    "orders": "SELECT * FROM orders ORDER BY seq",
    "fills": "SELECT * FROM fills ORDER BY seq",
    "equity_curve": "SELECT * FROM equity_curve ORDER BY time_ms",
    "balances": "SELECT * FROM balances ORDER BY asset",
    "positions": "SELECT * FROM positions ORDER BY symbol",
    "holdings": "SELECT * FROM holdings ORDER BY agent_id, symbol",
    "tool_calls": "SELECT agent_id, tool_name, params_json, status, error_code, result_xml, "
                  "started_ms FROM tool_calls ORDER BY id",
    "risk_decisions": "SELECT * FROM risk_decisions ORDER BY id",
    "messages": "SELECT agent_id, task_id, step, role, kind, content, market_ms FROM messages "
                "ORDER BY id",
    "llm_usage": "SELECT agent_id, task_id, run_id, provider, model, input_tokens, "
                 "output_tokens, cached_tokens, cost, market_ms FROM llm_usage ORDER BY id",
    "tasks": "SELECT task_id, agent_id, task_type, payload_json, source, reply_to, "
             "reply_expected, status, attempts, created_ms, taken_ms, done_ms, result, "
             "dedupe_key FROM tasks ORDER BY seq",
    "agents": "SELECT agent_id, name, template, role, state, config_json, provider, model, "
              "last_action, last_action_ms FROM agents ORDER BY agent_id",
    "jobs": "SELECT * FROM jobs ORDER BY job_id",
    "notifications": "SELECT * FROM notifications ORDER BY notification_id",
}


def _digest(value: Any) -> str:  # noqa: ANN401 - rows or bytes
    data = value if isinstance(value, bytes) else json.dumps(value, default=str).encode()
    return hashlib.sha256(data).hexdigest()


def run_record(out: Path) -> dict[str, Any]:
    """Run the short backtest into ``out``; what it left, as row counts and digests."""
    options = AgentBacktestOptions(
        templates=TEMPLATES, cash=Decimal(10_000), warmup_bars=60, bars=BARS,
    )
    outcome = asyncio.run(run_agent_backtest([BTC_USD_1H], options, out))
    workspace = out / "workspace"
    record: dict[str, Any] = {"trades": outcome.result.metrics.trades,
                              "final_equity": str(outcome.result.metrics.final_equity),
                              "tool_calls": outcome.tool_calls}
    with install(sqlite3.connect(workspace / "kestrel.db")) as db:
        for table, sql in TABLES.items():
            rows = [list(row) for row in db.execute(sql)]
            record[table] = {"rows": len(rows), "sha256": _digest(rows)}
    memory = workspace / "memory"
    for path in sorted(memory.rglob("*")):
        if path.is_file() and ".index" not in path.relative_to(memory).parts:
            record[f"memory/{path.relative_to(memory).as_posix()}"] = _digest(path.read_bytes())
    return record


def test_a_short_agent_backtest_records_exactly_what_it_recorded_before(tmp_path: Path) -> None:
    expected = json.loads(RECORD.read_text(encoding="utf-8"))
    got = run_record(tmp_path / "out")
    differing = sorted(k for k in expected.keys() | got.keys() if expected.get(k) != got.get(k))
    assert not differing, {k: (expected.get(k), got.get(k)) for k in differing}
    assert got["trades"] > 0 and got["fills"]["rows"] > 0  # the window does trade


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        RECORD.write_text(
            json.dumps(run_record(Path(tmp) / "out"), indent=1, sort_keys=True) + "\n",
            encoding="utf-8",
        )
    print(f"recorded {RECORD}", file=sys.stderr)
