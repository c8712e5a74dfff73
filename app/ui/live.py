"""Keep the market panels live: what happens when the clock moves or an order changes.

The driver publishes ``ClockAdvanced`` for every move, up to ten a second at 600x; each panel
already batches its own redraws, so this module only fans the event out and, for the agents'
trades on the chart (fills, open orders, position lines), asks the ``Broker`` port at most once a
second: the recent fills once at start-up (so a relaunched workspace's history and open position
are drawn at once), then each new fill as its ``OrderFilled`` event arrives, and the open orders
and positions from the account after every order event.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from app.domain.errors import KestrelError
from app.domain.trading import Fill, Order
from app.events import ClockAdvanced, OrderCancelled, OrderFilled, OrderPlaced
from app.ui.charts.book_widget import BookWidget
from app.ui.charts.chart_widget import ChartWidget
from app.ui.panels.account_panel import AccountPanel
from app.ui.panels.tasks import BusLink, TaskSet, Throttle

if TYPE_CHECKING:
    from app.runtime.world import World

TRADE_HISTORY = 2_000
ORDERS_LOOKED_UP = 300  # fills of earlier runs whose orders (and reasons) are read at start
TRADES_INTERVAL_MS = 1_000
ACCOUNT_INTERVAL_MS = 500


class LiveMarket:
    """Fans clock moves and order events out to the chart, the book and the account panel."""

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
        self.broker = world.venue.broker
        self.fills: deque[Fill] = deque(maxlen=TRADE_HISTORY)  # newest first
        self.orders: dict[str, Order] = {}  # the orders of the fills, by id (their reasons)
        self._fills_read = False
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
        for event_type in (OrderPlaced, OrderCancelled):
            self.link.subscribe(event_type, self._on_order)
        self.link.subscribe(OrderFilled, self._on_fill)
        # what is already open (a relaunched workspace's position, its TP/SL orders and past
        # fills) is drawn now, not only after the next fill
        self.trades.request()

    def _failed(self, exc: BaseException) -> None:
        self.errors.append(f"{type(exc).__name__}: {exc}")

    def _on_clock(self, _event: ClockAdvanced) -> None:
        self.chart.on_clock_advanced()
        self.book.on_clock_advanced()
        self.account_refresh.request()

    def _on_order(self, _event: OrderPlaced | OrderCancelled) -> None:
        self.trades.request()

    def _on_fill(self, event: OrderFilled) -> None:
        if all(f.fill_id != event.fill.fill_id for f in self.fills):
            self.fills.appendleft(event.fill)
        self.orders[event.order.order_id] = event.order  # its reason, for the marker
        if len(self.orders) > 2 * TRADE_HISTORY:  # only the orders of the fills kept
            kept = {f.order_id for f in self.fills}
            self.orders = {k: o for k, o in self.orders.items() if k in kept}
        self.trades.request()

    async def refresh_trades(self) -> None:
        """Fills, open orders and position lines of the charted symbol's agents."""
        if not self._fills_read:  # once; after it the fills come as events
            self._fills_read = True
            known = {f.fill_id for f in self.fills}
            read = await self.broker.trades(None, TRADE_HISTORY)
            self.fills.extend(f for f in read if f.fill_id not in known)
            await self._read_orders_of(read[:ORDERS_LOOKED_UP])
        state = await self.broker.account()
        orders = {**self.orders, **{o.order_id: o for o in state.open_orders}}
        self.chart.set_trades(list(self.fills), list(orders.values()))
        self.chart.set_position_lines(state.positions, state.open_orders)

    async def _read_orders_of(self, fills: list[Fill]) -> None:
        """The orders of fills made before this run (their reasons: a marker said "reason: —"
        where the journal had one). Not on a live account: each would be a request to the
        exchange, and its fills of this run bring their orders with them."""
        if self.world.venue.is_live_account:
            return
        for fill in fills:
            if fill.order_id in self.orders:
                continue
            try:
                self.orders[fill.order_id] = await self.broker.get_order(
                    fill.agent_id, fill.symbol, fill.order_id)
            except KestrelError:
                continue  # the marker says what the fill knows

    def close(self) -> None:
        self.tasks.shutdown()
        self.link.detach()
