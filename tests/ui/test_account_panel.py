"""The account panel over a real paper broker: orders, fills, positions, Cancel, and the mode."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from app.domain.clock import parse_time
from app.domain.trading import Mode, OrderStatus
from app.events import EventBus
from app.runtime.controls import PersonControls
from app.runtime.world import World
from app.tools.spec import AgentContext
from app.ui.panels.account_panel import AccountPanel
from app.ui.panels.style import COLORS, MODE_COLORS
from app.workspace import Workspace
from tests.helpers.agents import tool_world
from tests.helpers.eventually import eventually, eventually_on

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints")

HOUR_MS = 3_600_000
BUY_1000 = (
    "<create_order><symbol>BTC/USD</symbol><side>BUY</side><quote_amount>1000</quote_amount>"
    "</create_order>"
)


@pytest.fixture
def bus() -> EventBus:
    return EventBus()


@pytest.fixture
def world(tmp_path, qloop, bus) -> Iterator[World]:
    """A workspace's world whose broker announces its orders and fills on ``bus``."""
    rt = tool_world(Workspace(tmp_path), at_ms=parse_time("2019-10-10T00:00:00Z"), bus=bus)
    yield rt
    rt.close()


def make_panel(qtbot, qloop, world, bus, mode: Mode = Mode.PAPER) -> AccountPanel:
    controls = PersonControls(world.executor, world.orders, bus)
    panel = AccountPanel(world.venue.broker, world.venue.clock, mode, bus, world.venue.label,
                         controls=controls)
    qtbot.addWidget(panel)
    panel.resize(1100, 700)
    panel.show()
    qtbot.waitExposed(panel)
    eventually_on(qloop, lambda: panel.state is not None)
    return panel


def cell(model, row: int, column: str, role=Qt.ItemDataRole.DisplayRole):
    titles = [c.title for c in model.columns]
    return model.data(model.index(row, titles.index(column)), role)


async def place(world, bus, xml: str, agent: str = "trader-1") -> str:
    """Call a trade tool as an agent; the broker announces the order on the world's bus."""
    result = await world.executor.execute_text(AgentContext(agent), xml)
    assert result is not None and result.status == "success", result.xml
    order_id = result.data[0].attr("order_id")
    assert order_id is not None
    return order_id


def test_a_filled_paper_order_shows_as_a_position_fill_and_equity(world, bus, qtbot, qloop):
    panel = make_panel(qtbot, qloop, world, bus)
    assert panel.positions.rowCount() == 0

    async def scenario() -> None:
        order_id = await place(world, bus, BUY_1000)
        # the panel follows tool calls by itself: the order shows as open before it fills
        await eventually(lambda: [o.order_id for o in panel.orders.rows] == [order_id])
        world.venue.clock.advance_to(world.venue.clock.now_ms() + 2 * HOUR_MS)
        world.venue.broker.settle()
        await panel.refresh()

    qloop.run_until_complete(scenario())
    fill = world.ledger.fills()[0]
    (position,) = qloop.run_until_complete(world.venue.broker.positions("BTC/USD"))
    assert panel.positions.rowCount() == 1
    assert cell(panel.positions, 0, "Symbol") == "BTC/USD"
    assert cell(panel.positions, 0, "Size") == str(fill.quantity.normalize())
    assert cell(panel.positions, 0, "Avg cost") == f"{position.avg_price:,.2f}"
    pnl = panel.positions.rows[0].unrealized_pnl
    assert pnl != 0
    color = cell(panel.positions, 0, "Unrealized P&L", Qt.ItemDataRole.ForegroundRole).color()
    assert color == QColor(COLORS["up"] if pnl > 0 else COLORS["down"])
    assert panel.orders.rowCount() == 0
    assert panel.fills.rowCount() == 1
    assert cell(panel.fills, 0, "Price") == f"{fill.price:,.2f}"  # thousands separator, 2 dp
    assert "," in cell(panel.fills, 0, "Price")
    state = panel.state
    assert state is not None
    assert panel.cards["Equity"].value.text() == f"{state.equity.quantize(Decimal('0.01')):,}"
    assert panel.cards["Total P&L"].value.text().startswith("-" if state.total_pnl < 0 else "+")
    x, _y = panel.curve.getData()
    assert x is not None and len(x) >= 2  # the equity curve gained the settle's point


def test_cancel_on_an_open_limit_order_cancels_it_in_the_broker(world, bus, qtbot, qloop):
    panel = make_panel(qtbot, qloop, world, bus)

    async def scenario() -> None:
        price = await world.venue.broker.last_price("BTC/USD")
        limit = (price * Decimal("0.97")).quantize(Decimal("0.01"))
        order_id = await place(
            world, bus,
            "<create_order><symbol>BTC/USD</symbol><side>BUY</side><order_type>LIMIT</order_type>"
            f"<price>{limit}</price><quantity>0.01</quantity></create_order>",
        )
        await eventually(lambda: panel.order_button(order_id) is not None)
        button = panel.order_button(order_id)
        assert cell(panel.orders, 0, "Price") == f"{limit:,.2f}"
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        await eventually(lambda: panel.orders.rowCount() == 0)
        assert await world.venue.broker.open_orders() == []
        stored = {r.order.order_id: r.order.status for r in world.ledger.load().orders}
        assert stored[order_id] is OrderStatus.CANCELLED
        assert f"Cancelled {order_id}" in panel.message.text()
        assert panel.tabs.tabText(1) == "Open orders (0)"

    qloop.run_until_complete(scenario())


def test_a_cancel_the_broker_refuses_is_shown_with_its_reason(world, bus, qtbot, qloop):
    panel = make_panel(qtbot, qloop, world, bus)

    async def scenario() -> None:
        price = await world.venue.broker.last_price("BTC/USD")
        limit = (price * Decimal("0.97")).quantize(Decimal("0.01"))
        order_id = await place(
            world, bus,
            "<create_order><symbol>BTC/USD</symbol><side>BUY</side><order_type>LIMIT</order_type>"
            f"<price>{limit}</price><quantity>0.01</quantity></create_order>",
        )
        await eventually(lambda: panel.order_button(order_id) is not None)
        button = panel.order_button(order_id)
        # the agent cancels it first; the row on screen is now stale
        await world.venue.broker.cancel_order("trader-1", "BTC/USD", order_id=order_id)
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        await eventually(lambda: "Could not cancel" in panel.message.text())
        assert "already CANCELLED" in panel.message.text()
        await eventually(lambda: panel.orders.rowCount() == 0)

    qloop.run_until_complete(scenario())


def test_live_mode_is_an_unmistakable_red_bar_and_paper_is_not(world, bus, qtbot, qloop):
    live = make_panel(qtbot, qloop, world, bus, Mode.LIVE)
    assert "LIVE" in live.badge.text() and "REAL FUNDS" in live.badge.text()
    assert live.badge.color == MODE_COLORS[Mode.LIVE][0]
    image = live.badge.grab().toImage()
    drawn = image.pixelColor(4, image.height() // 2)
    assert drawn.red() > 200 and drawn.green() < 80 and drawn.blue() < 80
    assert live.badge.width() > live.width() // 2  # a bar across the panel, not a small tag

    paper = make_panel(qtbot, qloop, world, bus, Mode.PAPER)
    assert paper.badge.text().startswith("PAPER")
    drawn = paper.badge.grab().toImage().pixelColor(4, 8)
    assert not (drawn.red() > 200 and drawn.green() < 80)
