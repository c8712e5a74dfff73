"""The audit panel over the workspace ledger: live calls, filters, details, and 100,000 rows."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt

from app.domain.clock import parse_time
from app.events import EventBus, ToolCallCompleted
from app.runtime.world import World
from app.store.audit_trail import AuditTrailReader
from app.tools.spec import AgentContext
from app.ui.panels.audit_panel import AuditPanel
from app.workspace import Workspace
from tests.helpers.agents import tool_world
from tests.helpers.eventually import eventually, eventually_on

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints")

CALLS = [
    ("analyst-1", "<get_account_balance/>"),
    ("trader-1", "<get_account_balance/>"),
    ("trader-1", "<create_order><symbol>BTC/USD</symbol><side>BUY</side>"
                 "<quote_amount>5000</quote_amount></create_order>"),  # over the weight limit
    ("trader-1", "<create_order><symbol>BTC/USD</symbol><side>BUY</side>"
                 "<quote_amount>1000</quote_amount></create_order>"),
    ("analyst-1", "<get_order_book><symbol>NOPE/USD</symbol></get_order_book>"),
]


@pytest.fixture
def bus() -> EventBus:
    return EventBus()


@pytest.fixture
def world(tmp_path, qloop) -> Iterator[World]:
    rt = tool_world(Workspace(tmp_path), at_ms=parse_time("2019-10-10T00:00:00Z"))
    yield rt
    rt.close()


@pytest.fixture
def panel(world, bus, qtbot, qloop) -> AuditPanel:
    w = AuditPanel(AuditTrailReader(world.ledger), bus)
    qtbot.addWidget(w)
    w.resize(1100, 650)
    w.show()
    qtbot.waitExposed(w)
    eventually_on(qloop, lambda: w.count_label.text() != "")
    return w


async def run_calls(world, bus, calls) -> None:
    """Run tool calls as agents do, each announced on the bus when it completes."""
    for agent, xml in calls:
        result = await world.executor.execute_text(AgentContext(agent), xml)
        assert result is not None
        await bus.publish(ToolCallCompleted(agent, xml[1:].split(">")[0].rstrip("/"),
                                            result.status, result.error_code, 1.0))


def choose(combo, text: str) -> None:
    index = combo.findText(text)
    assert index >= 0, f"{text!r} is not offered"
    combo.setCurrentIndex(index)


def test_filters_by_tool_and_status_and_shows_the_selected_calls_result(
    panel, world, bus, qtbot, qloop
):
    async def scenario() -> None:
        await run_calls(world, bus, CALLS)
        await eventually(lambda: panel.model.rowCount() == len(CALLS))
        assert panel.count_label.text() == "5 calls"

        choose(panel.tool_filter, "create_order")
        assert panel.proxy.rowCount() == 2
        choose(panel.status_filter, "rejected")
        assert panel.proxy.rowCount() == 1
        assert panel.count_label.text() == "1 of 5 calls"

        rect = panel.table.visualRect(panel.proxy.index(0, 0))
        qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        await eventually(lambda: "<status>rejected</status>" in panel.result_view.toPlainText())
        assert "<rule>max_position_weight</rule>" in panel.result_view.toPlainText()
        assert '"quote_amount": "5000"' in panel.params_view.toPlainText()
        assert "create_order · trader-1" in panel.detail_title.text()

        choose(panel.tool_filter, "All")
        choose(panel.status_filter, "All")
        qtbot.keyClicks(panel.search, "not_found")
        await eventually(lambda: panel.proxy.rowCount() == 1)
        index = panel.proxy.index(0, 2)
        assert panel.proxy.data(index) == "get_order_book"
        assert panel.proxy.data(panel.proxy.index(0, 4)) == "NOT_FOUND"

    qloop.run_until_complete(scenario())


def test_live_calls_arrive_in_batches_newest_first(panel, world, bus, qloop):
    reads: list[int] = []
    read = panel.reader.tool_calls

    async def counted(after_id: int = 0, limit: int = 1_000_000):
        reads.append(after_id)
        return await read(after_id, limit)

    panel.reader.tool_calls = counted  # type: ignore[method-assign]

    async def scenario() -> None:
        await run_calls(world, bus, CALLS * 8)
        await eventually(lambda: panel.model.rowCount() == 40)

    qloop.run_until_complete(scenario())
    assert 1 <= len(reads) <= 3, reads  # 40 events, a few incremental reads
    ids = [panel.proxy.call_id(row) for row in range(panel.proxy.rowCount())]
    assert ids == sorted(ids, reverse=True) and ids[0] == 40


def test_a_hundred_thousand_calls_are_all_listed_filtered_and_sorted(world, bus, qtbot, qloop):
    """A long-running workspace's history is listed whole, and its filters and sorting apply to
    every row, not to a first page. How fast is measured by tests/benchmarks/bench_audit.py."""
    conn = world.ledger.connection
    tools = ("get_klines", "get_ticker", "create_order", "recall_memory")
    statuses = ("success", "success", "error", "rejected")
    rows = [
        (f"agent-{i % 10}", tools[i % 4], '{"symbol": "BTC/USD"}', statuses[i % 4 - (i % 3 == 0)],
         None, f"<tool_result>{i}</tool_result>", 1_570_000_000_000 + i * 1000, 1.5)
        for i in range(100_000)
    ]
    with world.ledger.transaction():
        conn.executemany(
            "INSERT INTO tool_calls (agent_id, tool_name, params_json, status, error_code, "
            "result_xml, started_ms, duration_ms) VALUES (?,?,?,?,?,?,?,?)",
            rows,
        )
    panel = AuditPanel(AuditTrailReader(world.ledger), bus)
    qtbot.addWidget(panel)
    panel.resize(1000, 600)
    panel.show()
    eventually_on(qloop, lambda: panel.model.rowCount() == 100_000)

    choose(panel.tool_filter, "create_order")
    choose(panel.status_filter, "error")
    expected = sum(1 for r in rows if r[1] == "create_order" and r[3] == "error")
    eventually_on(qloop, lambda: panel.proxy.rowCount() == expected > 0)

    def agents() -> list[str]:
        return [panel.proxy.data(panel.proxy.index(r, 1)) for r in range(panel.proxy.rowCount())]

    assert agents() != sorted(agents()), "the rows start out of agent order"
    panel.table.sortByColumn(1, Qt.SortOrder.AscendingOrder)
    eventually_on(qloop, lambda: agents() == sorted(agents()))
    assert len(agents()) == expected


def test_a_reopened_workspace_lists_each_recorded_call_once(world, bus, qtbot, qloop):
    """After a relaunch the window reads the ledger's history while the resumed agents' first
    calls are announced: two reads at once must not list the same calls twice."""
    qloop.run_until_complete(run_calls(world, bus, CALLS))
    # the relaunched window's panel: history in the DB
    panel = AuditPanel(AuditTrailReader(world.ledger), bus)
    qtbot.addWidget(panel)

    async def scenario() -> None:
        # the window's start-up read and a read for a call announced meanwhile, side by side
        await asyncio.gather(panel.refresh(), panel.refresh())
        await eventually(lambda: not panel.throttle.pending)

    qloop.run_until_complete(scenario())
    ids = [panel.model.row(r).call_id for r in range(panel.model.rowCount())]
    assert sorted(ids) == list(range(1, len(CALLS) + 1)), ids
    assert panel.count_label.text() == f"{len(CALLS)} calls"
