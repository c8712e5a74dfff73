"""The account panel: mode, balance and equity, positions (with Close), open trades (with Close),
open orders (with Cancel), fills, closed trades, performance per agent and the equity curve.

Everything shown comes through the ``Broker`` port and the bus, never from SQL: the account, its
positions and open orders from ``account()``, the newest fills from ``trades()`` once and then from
``OrderFilled`` events as they happen, the equity curve from ``equity_curve()`` a few new points at
a time. ``refresh()`` re-reads the account; the main window calls it when the clock advances, and
the panel calls it itself, throttled, when an order is placed, cancelled or filled, so an agent's
order appears without the person doing anything. The same panel shows a paper account on replayed
or live data and a live account; the venue's name says which.
Cancel and Close are the person's tool calls (``app.runtime.controls``): through the executor and
the Risk Guard, recorded with the person as actor, never a side door to the broker. A person may
cancel any agent's order; Close asks first (the quantity and the P&L it would realize). The
outcome, or the refusal word for word, is shown in the strip under the tables. Without controls
(a read-only view) the rows have no buttons.

Open trades, Closed trades and Performance read the window's one book of lots with an owner
(``app.ui.trades``), so a trade, its P&L and whose it is read the same in each; who an id is
comes from the window's one resolver of names (``app.ui.names``).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from decimal import Decimal

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.domain.clock import Clock
from app.domain.errors import KestrelError
from app.domain.trading import AccountState, Fill, Mode, Order, Position
from app.events import EventBus, OrderCancelled, OrderFilled, OrderPlaced
from app.runtime.controls import PersonControls
from app.trading.port import TradingBroker
from app.ui.names import AgentNames
from app.ui.panels.account_tables import fill_columns, order_columns, position_columns
from app.ui.panels.closed_trades import ClosedTradesView
from app.ui.panels.mode_badge import ModeBadge
from app.ui.panels.open_trades import (
    OpenTrade,
    close_button,
    close_plan,
    close_question,
    close_trade,
    open_trades,
    trade_columns,
)
from app.ui.panels.performance import PerformanceView, performance_rows
from app.ui.panels.record_model import RecordTableModel
from app.ui.panels.style import (
    COLORS,
    format_fixed,
    format_pct,
    format_quantity,
    format_time,
    money_decimals,
    mono_font,
    pnl_tone,
    set_banner,
)
from app.ui.panels.tasks import REDRAWS, BusLink, TaskSet, Throttle
from app.ui.theme import set_look
from app.ui.trades import DeskTrades

logger = logging.getLogger(__name__)
FILL_HISTORY = 500
CURVE_PX = 300  # shorter than this, the panel shows no equity curve: its tables keep the room


class _Card(QFrame):
    """One figure of the summary: a small title over a large monospace value."""

    def __init__(self, title: str) -> None:
        super().__init__()
        self.setObjectName("card")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.setSpacing(1)
        self.title = QLabel(title.upper())
        self.title.setStyleSheet("font-size: 8pt;")
        set_look(self.title, "muted")
        self.value = QLabel("—")
        self.value.setFont(mono_font(13))
        self.sub = QLabel("")
        self.sub.setFont(mono_font(8))
        set_look(self.sub, "muted")
        for label in (self.title, self.value, self.sub):
            label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            layout.addWidget(label)

    def show_value(self, text: str, tone: str = "", sub: str = "") -> None:
        """Show ``text`` in a ``look`` (``up``, ``down``; "" for plain text)."""
        self.value.setText(text)
        set_look(self.value, tone)
        self.sub.setText(sub)
        self.setToolTip(sub)  # read here while the card is compact (its line hidden)

    def compact(self, on: bool) -> None:
        """One title and one value, in less height: a short panel's tables keep the rows."""
        self.sub.setVisible(not on)
        self.layout().setContentsMargins(10, 2 if on else 6, 10, 2 if on else 6)


class AccountPanel(QWidget):
    """Balance, positions, open orders, fills and the equity curve of one broker account."""

    def __init__(
        self,
        broker: TradingBroker,
        clock: Clock,
        mode: Mode,
        bus: EventBus | None,
        venue: str = "",
        parent: QWidget | None = None,
        *,
        controls: PersonControls | None = None,
        agent_name: Callable[[str], str | None] | None = None,
        names: AgentNames | None = None,
        book: DeskTrades | None = None,
    ) -> None:
        """``venue``: what the account runs on, in words ("Offline replay"...); ``controls``: the
        person's Cancel and Close (None: the rows have no buttons); ``names``: who an actor id
        is (the window's resolver; else one over ``agent_name``, an agent's name from its id);
        ``book``: the window's book of lots (else one of the panel's own)."""
        super().__init__(parent)
        self.broker = broker
        self.clock = clock
        self.mode = mode
        self.controls = controls
        if names is None:
            names = agent_name if isinstance(agent_name, AgentNames) else AgentNames(agent_name)
        self.names = names
        self.name = self.names.name
        self.book = book if book is not None else DeskTrades(broker, bus)
        if book is None:
            own = self.book
            self.destroyed.connect(lambda *_: own.detach())
        self.dialog: QDialog | None = None  # the Close confirmation open now
        self.open_rows: list[OpenTrade] = []
        self.state: AccountState | None = None
        self._decimals: dict[str, int] = {}
        self._money = money_decimals(broker.quote_currency)
        self._curve_t: list[float] = []
        self._curve_v: list[float] = []
        self._fills: deque[Fill] = deque(maxlen=FILL_HISTORY)  # newest first
        self._fills_read = False
        self.tasks = TaskSet(on_error=lambda exc: self.show_message(str(exc), "error"))
        self.throttle = Throttle(self.refresh, self.tasks, interval_ms=300, parent=self)
        self._bus, self._agent_name = bus, agent_name
        self._build(mode, venue)
        self.link = BusLink(bus)
        for event_type in (OrderPlaced, OrderCancelled):
            self.link.subscribe(event_type, self._on_order)
        self.link.subscribe(OrderFilled, self._on_fill)
        self.link.attach(self)
        self.tasks.attach(self)
        self.throttle.request()  # the first fill of the tables, on the loop

    # ------------------------------------------------------------------ layout

    def _build(self, mode: Mode, venue: str) -> None:
        root = QVBoxLayout(self)
        root.setContentsMargins(6, 6, 6, 6)
        root.setSpacing(6)
        self.halt = QLabel("")
        self.halt.setObjectName("accountHalted")
        self.halt.setWordWrap(True)
        self.halt.hide()
        root.addWidget(self.halt)
        top = QHBoxLayout()
        self.badge = ModeBadge(mode)
        top.addWidget(self.badge)
        self.venue = QLabel(venue)
        self.venue.setObjectName("account_venue")
        set_look(self.venue, "muted")
        top.addWidget(self.venue)
        self.as_of = QLabel("")
        set_look(self.as_of, "muted")
        top.addStretch(1)
        top.addWidget(self.as_of)
        root.addLayout(top)

        cards = QGridLayout()
        cards.setSpacing(6)
        names = ("Cash", "Equity", "Today P&L", "Total P&L", "Max drawdown")
        self.cards = {name: _Card(name) for name in names}
        for column, name in enumerate(names):
            cards.addWidget(self.cards[name], 0, column)
        root.addLayout(cards)

        money = self._money
        names = self.names
        self.positions = RecordTableModel(position_columns(self.price_decimals, money), mono_font())
        self.open_trades = RecordTableModel(trade_columns(self.price_decimals, money, names),
                                            mono_font())
        live = mode is Mode.LIVE
        self.orders = RecordTableModel(order_columns(self.price_decimals, live=live, names=names),
                                       mono_font())
        self.fills = RecordTableModel(fill_columns(self.price_decimals, money, names),
                                      mono_font())
        self.positions_view = self._table(self.positions)
        self.open_trades_view = self._table(self.open_trades)
        self.open_trades_view.setObjectName("open_trades")
        self.orders_view = self._table(self.orders)
        self.fills_view = self._table(self.fills)
        self.tabs = QTabWidget()
        self._live = "LIVE " if live else ""
        self.tabs.addTab(self.positions_view, f"{self._live}Positions")
        self.tabs.addTab(self.orders_view, f"{self._live}Open orders")
        self.tabs.addTab(self.fills_view, f"{self._live}Fills")
        self.tabs.addTab(self.open_trades_view, f"{self._live}Open trades")
        self.closed = ClosedTradesView(self.broker, self._bus, self.price_decimals, names,
                                       book=self.book)
        self.tabs.addTab(self.closed, "Closed trades")
        self.closed.counted.connect(
            lambda n: self._title(self.closed, f"Closed trades ({n})"))
        self.performance = PerformanceView(names, money, self.broker.quote_currency)
        self.tabs.addTab(self.performance, "Performance")

        self.curve_plot = pg.PlotWidget(axisItems={"bottom": pg.DateAxisItem(utcOffset=0)})
        # no grid: pyqtgraph repaints an axis grid over the whole plot each time (several ms)
        self.curve_plot.showGrid(x=False, y=False)
        self.curve_plot.setMenuEnabled(False)
        item = self.curve_plot.getPlotItem()
        item.setClipToView(True)
        item.setDownsampling(auto=True, mode="peak")
        self.curve = self.curve_plot.plot([], [])
        self.baseline = pg.InfiniteLine(pos=0.0, angle=0)  # the starting equity, once known
        self.curve_plot.addItem(self.baseline)
        self.restyle()
        # on a small screen the tables keep the room and the curve gives way first
        self.curve_plot.setMinimumHeight(24)

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.tabs)
        split.addWidget(self.curve_plot)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        root.addWidget(split, 1)

        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()
        root.addWidget(self.message)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        """Below the chart on a 1366x768 screen the curve was a sliver and the tables showed
        two rows: a short panel gives the tables its room (Performance has P&L over time) and
        its cards their second lines (in their tooltips)."""
        short = event.size().height() < CURVE_PX
        self.curve_plot.setVisible(not short)
        for card in self.cards.values():
            card.compact(short)
        super().resizeEvent(event)

    def _title(self, tab: QWidget, text: str) -> None:
        index = self.tabs.indexOf(tab)
        if index >= 0:
            self.tabs.setTabText(index, text)

    def restyle(self) -> None:
        """Draw the equity curve in the current theme's colours (the sheet cannot reach it)."""
        self.curve_plot.setBackground(COLORS["panel"])
        self.curve_plot.setTitle("Equity", color=COLORS["muted"], size="9pt")
        item = self.curve_plot.getPlotItem()
        for axis in ("left", "bottom"):
            item.getAxis(axis).setTextPen(COLORS["muted"])
            item.getAxis(axis).setPen(COLORS["border"])
        self.curve.setPen(pg.mkPen(COLORS["accent"], width=1.6))
        self.baseline.setPen(pg.mkPen(COLORS["muted"], style=Qt.PenStyle.DashLine))
        self.closed.restyle()
        self.performance.restyle()

    def _table(self, model: RecordTableModel) -> QTableView:
        view = QTableView()
        view.setModel(model)
        view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        view.setAlternatingRowColors(True)
        view.setSortingEnabled(True)
        view.verticalHeader().hide()
        view.verticalHeader().setDefaultSectionSize(24)
        view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        view.horizontalHeader().setStretchLastSection(False)
        view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        view.setMinimumHeight(48)  # a header and a row: what a 720-pixel screen leaves
        newest_first = model not in (self.positions, self.open_trades)
        view.sortByColumn(
            0, Qt.SortOrder.DescendingOrder if newest_first else Qt.SortOrder.AscendingOrder
        )
        return view

    # ------------------------------------------------------------------ data

    def price_decimals(self, symbol: str) -> int:
        decimals = self._decimals.get(symbol)
        if decimals is None:
            try:
                decimals = self.broker.market_rules(symbol).price_decimals
            except (KestrelError, KeyError):
                decimals = 8  # a symbol the market no longer lists: show every digit
            self._decimals[symbol] = decimals
        return decimals

    def set_mode(self, mode: Mode) -> None:
        self.mode = mode
        self.badge.set_mode(mode)

    def set_halt(self, why: str | None) -> None:
        """Say over the account that trading is halted (the kill switch), or nothing."""
        if why is None:
            self.halt.hide()
            return
        set_banner(self.halt, "error")
        self.halt.setText(f"Trading halted: {why}. New orders are refused; cancelling and "
                          "closing still work.")
        self.halt.show()

    async def refresh(self) -> None:
        """Re-read the account and the new equity points, and show them with the fills."""
        state = await self.broker.account()
        if not self._fills_read:  # once; after it the fills come as events
            self._fills_read = True
            known = {f.fill_id for f in self._fills}
            read = await self.broker.trades(None, FILL_HISTORY)
            self._fills.extend(f for f in read if f.fill_id not in known)
        since = int(self._curve_t[-1] * 1000) if self._curve_t else -1
        points = await self.broker.equity_curve(since)
        await REDRAWS.turn()
        self._show_state(state)
        self._show_orders(list(state.open_orders))
        self._show_fills(list(self._fills))
        self._extend_curve([(p.time_ms, float(p.equity)) for p in points])
        await self.book.load()
        self._show_trades(state)
        await self.closed.refresh()

    def _on_order(self, _event: OrderPlaced | OrderCancelled) -> None:
        self.throttle.request()

    def _on_fill(self, event: OrderFilled) -> None:
        if all(f.fill_id != event.fill.fill_id for f in self._fills):
            self._fills.appendleft(event.fill)
        self.throttle.request()

    def _show_state(self, state: AccountState) -> None:
        self.state = state
        money, ccy = self._money, state.quote_currency
        reserved = next((a.used for a in state.assets if a.currency == ccy), Decimal(0))
        self.cards["Cash"].show_value(
            format_fixed(state.cash, money), sub=f"{ccy} · reserved {format_fixed(reserved, money)}"
        )
        self.cards["Equity"].show_value(
            format_fixed(state.equity, money), sub=f"{ccy} · {len(state.positions)} positions"
        )
        for name, pnl in (("Today P&L", state.today_pnl), ("Total P&L", state.total_pnl)):
            base = state.equity - pnl
            pct = pnl / base * 100 if base else Decimal(0)
            self.cards[name].show_value(
                format_fixed(pnl, money, sign=True), pnl_tone(pnl), format_pct(pct, sign=True)
            )
        drawdown = state.max_drawdown_pct
        self.cards["Max drawdown"].show_value(
            format_pct(drawdown), "down" if drawdown > 0 else "", "from peak equity"
        )
        self.as_of.setText(f"as of {format_time(self.clock.now_ms())} UTC")
        self.baseline.setValue(float(state.equity - state.total_pnl))  # the starting equity
        self._set_rows(self.positions, self.positions_view, list(state.positions))
        self._title(self.positions_view, f"{self._live}Positions ({len(state.positions)})")
        self._position_buttons()

    def _set_rows(self, model: RecordTableModel, view: QTableView, rows: list) -> None:
        header = view.horizontalHeader()
        column, order = header.sortIndicatorSection(), header.sortIndicatorOrder()
        model.set_rows(rows)
        if 0 <= column < model.columnCount() and view.isSortingEnabled():
            model.sort(column, order)

    def _position_buttons(self) -> None:
        if self.controls is None:
            return
        for row, position in enumerate(self.positions.rows):
            self._row_button(
                self.positions_view, row, "Close", f"close-{position.symbol}",
                f"Sell the whole {position.symbol} position at market (asks first)",
                lambda button, p=position: self._close_clicked(p, button),
            )

    def _show_orders(self, orders: list[Order]) -> None:
        orders.sort(key=lambda o: o.created_ms, reverse=True)
        self._set_rows(self.orders, self.orders_view, orders)
        self._title(self.orders_view, f"{self._live}Open orders ({len(orders)})")
        if self.controls is None:
            return
        for row, order in enumerate(self.orders.rows):
            self._row_button(
                self.orders_view, row, "Cancel", f"cancel-{order.order_id}",
                f"Cancel {order.order_id} ({self.name(order.agent_id)})",
                lambda button, o=order: self._cancel_clicked(o, button),
            )

    @staticmethod
    def _row_button(
        view: QTableView, row: int, text: str, name: str, tip: str,
        clicked: Callable[[QPushButton], object],
    ) -> None:
        """A row's action button, in the table's last column (kept free for it)."""
        model = view.model()
        button = QPushButton(text)
        button.setObjectName(name)
        button.setToolTip(tip)
        button.setStyleSheet("padding: 1px 8px;")
        set_look(button, "down")
        button.clicked.connect(lambda _checked=False: clicked(button))
        view.setIndexWidget(model.index(row, model.columnCount() - 1), button)

    def _show_fills(self, fills: list[Fill]) -> None:
        self._set_rows(self.fills, self.fills_view, fills)
        more = "+" if len(fills) >= FILL_HISTORY else ""
        self._title(self.fills_view, f"{self._live}Fills ({len(fills)}{more})")

    def _show_trades(self, state: AccountState) -> None:
        """Open trades and Performance, from the book's lots valued at the positions' prices."""
        now = self.clock.now_ms()
        rows = open_trades(self.book.open_lots(), state.positions, state.open_orders, now)
        self.open_rows = rows
        self._set_rows(self.open_trades, self.open_trades_view, rows)
        self._title(self.open_trades_view, f"{self._live}Open trades ({len(rows)})")
        if self.controls is not None:
            for number, trade in enumerate(self.open_trades.rows):
                close_button(self.open_trades_view, number, trade, self.names,
                             lambda button, t=trade: self._close_trade_clicked(t, button))
        last = {p.symbol: p.current_price for p in state.positions}
        realized = self.book.realized
        performance = performance_rows(self.book.owners(), realized, self.book.closed(),
                                       self.book.open_lots(), last.get, now)
        fills = self.book.fills.values()
        start = min((f.time_ms for f in fills), default=now)
        self.performance.show_performance(performance, realized, start, now)

    def _extend_curve(self, points: list[tuple[int, float]]) -> None:
        if not points:
            return
        first = points[0][0] / 1000
        while self._curve_t and self._curve_t[-1] >= first:  # the last point may be updated
            self._curve_t.pop()
            self._curve_v.pop()
        self._curve_t.extend(t / 1000 for t, _ in points)
        self._curve_v.extend(v for _, v in points)
        self.curve.setData(self._curve_t, self._curve_v)

    # ------------------------------------------------------------------ cancel and close

    def order_button(self, order_id: str) -> QPushButton | None:
        """The Cancel button of an open order's row (for the main window's shortcuts and tests)."""
        column = self.orders.columnCount() - 1
        for row, order in enumerate(self.orders.rows):
            if order.order_id == order_id:
                widget = self.orders_view.indexWidget(self.orders.index(row, column))
                return widget if isinstance(widget, QPushButton) else None
        return None

    def _cancel_clicked(self, order: Order, button: QPushButton) -> None:
        button.setEnabled(False)
        button.setText("Cancelling…")
        self.tasks.spawn(self.cancel(order))

    async def cancel(self, order: Order) -> bool:
        """Cancel ``order`` as the person; show what happened; refresh. True when cancelled."""
        assert self.controls is not None, "a view without controls has no Cancel"
        outcome = await self.controls.cancel(order)
        if not outcome.ok:
            self.show_message(f"Could not cancel {order.order_id}: {outcome.text}", "error")
            await self.refresh()
            return False
        decimals = self.price_decimals(order.symbol)
        price = "" if order.price is None else f" @ {format_fixed(order.price, decimals)}"
        self.show_message(
            f"Cancelled {order.order_id}: {order.side.value} {format_quantity(order.remaining)} "
            f"{order.symbol} {order.order_type.value}{price} ({self.name(order.agent_id)}).",
            "info",
        )
        await self.refresh()
        return True

    def position_button(self, symbol: str) -> QPushButton | None:
        """The Close button of a position's row (for tests and the window)."""
        column = self.positions.columnCount() - 1
        for row, position in enumerate(self.positions.rows):
            if position.symbol == symbol:
                widget = self.positions_view.indexWidget(self.positions.index(row, column))
                return widget if isinstance(widget, QPushButton) else None
        return None

    def _close_clicked(self, position: Position, button: QPushButton) -> None:
        """Ask first: the quantity sold and the P&L it would realize."""
        from app.ui.trading.confirm import ConfirmDialog, close_text

        if self.dialog is not None:
            self.dialog.raise_()
            return
        controls = self.controls
        assert controls is not None, "a view without controls has no Close"
        text = close_text(position, self.broker.quote_currency, self.mode,
                          fills_at_ms=controls.close_fills_at(position.symbol),
                          now_ms=self.clock.now_ms(),
                          exits_stay=controls.keeps_exits_while_closing(position.symbol))
        dialog = ConfirmDialog(
            "closeDialog", f"Close {position.symbol}", f"Close the {position.symbol} position?",
            text, "Close position", self,
        )

        def confirmed() -> None:
            button.setEnabled(False)
            button.setText("Closing…")
            self.tasks.spawn(self.close_position(position.symbol))

        dialog.accepted.connect(confirmed)
        dialog.finished.connect(lambda _result: self._dialog_closed(dialog))
        self.dialog = dialog
        dialog.open()

    def _dialog_closed(self, dialog: QDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None
        dialog.deleteLater()

    async def close_position(self, symbol: str) -> bool:
        """Close ``symbol``'s position as the person; show what happened; refresh."""
        assert self.controls is not None, "a view without controls has no Close"
        outcome = await self.controls.close(symbol)
        if outcome.ok:
            self.show_message(f"Closing {symbol}: {outcome.text}", "info")
        else:
            self.show_message(f"Could not close {symbol}: {outcome.text}", "error")
        await self.refresh()
        return outcome.ok

    def trade_button(self, symbol: str, owner: str) -> QPushButton | None:
        """The Close button of an open trade's row (for tests and the window)."""
        column = self.open_trades.columnCount() - 1
        for row, trade in enumerate(self.open_trades.rows):
            if trade.symbol == symbol and trade.owner == owner:
                widget = self.open_trades_view.indexWidget(self.open_trades.index(row, column))
                return widget if isinstance(widget, QPushButton) else None
        return None

    def _close_trade_clicked(self, trade: OpenTrade, button: QPushButton) -> None:
        """Ask first, naming whose trade it is and what the sell does."""
        from app.ui.trading.confirm import ConfirmDialog

        if self.dialog is not None:
            self.dialog.raise_()
            return
        plan = close_plan(trade, self.open_rows)
        heading, body, confirm = close_question(
            plan, self.names, self.broker.quote_currency, self._money,
            self.price_decimals(trade.symbol), self.mode)
        dialog = ConfirmDialog("closeTradeDialog", f"Close {trade.symbol}", heading, body,
                               confirm, self)

        def confirmed() -> None:
            button.setEnabled(False)
            button.setText("Closing…")
            self.tasks.spawn(self.close_open_trade(trade))

        dialog.accepted.connect(confirmed)
        dialog.finished.connect(lambda _result: self._dialog_closed(dialog))
        self.dialog = dialog
        dialog.open()

    async def close_open_trade(self, trade: OpenTrade) -> bool:
        """Close one open trade as the person (a sell of the lot, or the position's close when
        the lot cannot be sold alone); show what happened; refresh."""
        assert self.controls is not None, "a view without controls has no Close"
        plan = close_plan(trade, self.open_rows)
        outcome = await close_trade(self.controls, plan)
        whose = "your" if plan.mine else f"{self.name(trade.owner)}'s"
        if outcome.ok:
            self.show_message(f"Closing {whose} {trade.symbol} trade: {outcome.text}", "info")
        else:
            self.show_message(f"Could not close {whose} {trade.symbol} trade: {outcome.text}",
                              "error")
        await self.refresh()
        return outcome.ok

    def show_message(self, text: str, kind: str = "info") -> None:
        set_banner(self.message, kind)
        self.message.setText(text)
        self.message.show()

