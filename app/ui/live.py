"""Keep the market panels live: what happens when the replay clock moves or an agent trades.

The driver publishes ``ClockAdvanced`` for every move, up to ten a second at 600x; each panel
already batches its own redraws, so this module only fans the event out and, for the agents'
trades on the chart (fills, open orders, position lines), reads the broker and the ledger at most
once a second, off the loop where it touches SQLite: once at start-up (so a relaunched workspace's
open position is drawn at once), then after fills and order tool calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.events import ClockAdvanced, ToolCallCompleted
from app.ui.charts.book_widget import BookWidget
from app.ui.charts.chart_widget import ChartWidget
from app.ui.panels.account_panel import AccountPanel
from app.ui.panels.ledger_reader import LedgerReader
from app.ui.panels.tasks import BusLink, TaskSet, Throttle

if TYPE_CHECKING:
    from app.runtime.world import World

TRADE_HISTORY = 2_000
TRADES_INTERVAL_MS = 1_000
ACCOUNT_INTERVAL_MS = 500


class LiveMarket:
    """Fans clock moves and tool calls out to the chart, the book and the account panel."""

    def __init__(
        self,
        world: World,
        chart: ChartWidget,
        book: BookWidget,
        account: AccountPanel,
    ) -> None:
        self.world = world
        self.chart = chart
        self.book = book
        self.account = account
        self.reader = LedgerReader(world.ledger)
        self.tasks = TaskSet(on_error=self._failed)
        self.tasks.attach(chart)
        self.errors: list[str] = []
        self.trades = Throttle(self.refresh_trades, self.tasks, interval_ms=TRADES_INTERVAL_MS,
                               parent=chart)
        self.account_refresh = Throttle(account.refresh, self.tasks,
                                        interval_ms=ACCOUNT_INTERVAL_MS, parent=account)
        self.link = BusLink(world.bus)
        self.link.attach(chart)
        self.link.subscribe(ClockAdvanced, self._on_clock)
        self.link.subscribe(ToolCallCompleted, self._on_tool_call)
        # what is already open (a relaunched workspace's position, its TP/SL orders and past
        # fills) is drawn now, not only after the next fill
        self.trades.request()

    def _failed(self, exc: BaseException) -> None:
        self.errors.append(f"{type(exc).__name__}: {exc}")

    def _on_clock(self, event: ClockAdvanced) -> None:
        self.chart.on_clock_advanced()
        self.book.on_clock_advanced()
        self.account_refresh.request()
        if event.fills:
            self.trades.request()

    def _on_tool_call(self, event: ToolCallCompleted) -> None:
        if event.tool_name in ("create_order", "cancel_order", "close_position",
                               "set_position_tp_sl_orders"):
            self.trades.request()

    async def refresh_trades(self) -> None:
        """Fills, open orders and position lines of the charted symbol's agents."""
        state = await self.world.venue.broker.account()
        fills = await self.reader.fills(TRADE_HISTORY)
        self.chart.set_trades(fills, state.open_orders)
        self.chart.set_position_lines(state.positions, state.open_orders)

    def close(self) -> None:
        self.tasks.shutdown()
        self.link.detach()
        self.reader.close()
