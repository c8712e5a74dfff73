"""The account's closed trades: each round trip with its P&L, and the totals per agent.

The fills are the window's one book of them (``app.ui.trades``: read through the ``Broker`` port
once, then kept by ``OrderFilled`` events), paired by ``app.trading.closed_trades``, so the list
is the same for a paper account on a replay, on live quotes, or a live account, and agrees with
Open trades and Performance. A trip belongs to whoever opened it (an agent, or "you"); who
closed it (an agent, its exits, or you from a Close) shows beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.events import EventBus
from app.trading.closed_trades import ActorTotals, ClosedTrade, totals_by_actor
from app.trading.port import Broker
from app.ui.names import AgentNames
from app.ui.panels.record_model import Column, RecordTableModel
from app.ui.panels.style import (
    COLORS,
    format_fixed,
    format_pct,
    format_quantity,
    format_time,
    money_decimals,
    mono_font,
    pnl_color,
)
from app.ui.panels.widget_tasks import TaskSet, Throttle
from app.ui.theme import set_look
from app.ui.trades import DeskTrades

NameOf = Callable[[str], str]


def actor_name(name_of: Callable[[str], str | None] | None) -> NameOf:
    """Who an actor id is, in words: "you" for the person, an agent's name, else its id
    shortened (``app.ui.names``, the window's one resolver, over ``name_of``)."""
    if isinstance(name_of, AgentNames):
        return name_of.name
    return AgentNames(name_of).name


def trade_columns(price_decimals: Callable[[str], int], money: int,
                  names: AgentNames) -> list[Column[ClosedTrade]]:
    def price(t: ClosedTrade, value: Decimal) -> str:
        return format_fixed(value, price_decimals(t.symbol))

    def closers(t: ClosedTrade) -> str:
        return ", ".join(names.name(a) for a in t.closed_by)

    return [
        Column("Closed", lambda t: format_time(t.exit_ms), key=lambda t: t.exit_ms),
        Column("Opened by", lambda t: names.name(t.opened_by),
               tooltip=lambda t: names.tooltip(t.opened_by)),
        # beside who opened it: an agent's trade closed by the person's Close reads so at once
        Column("Closed by", closers,
               tooltip=lambda t: "\n".join(names.tooltip(a) for a in t.closed_by)),
        Column("Symbol", lambda t: t.symbol),
        Column("Side", lambda t: "LONG", color=lambda t: COLORS["up"]),
        Column("Quantity", lambda t: format_quantity(t.quantity), numeric=True,
               key=lambda t: t.quantity),
        Column("Entry", lambda t: price(t, t.entry_price), numeric=True,
               key=lambda t: t.entry_price),
        Column("Exit", lambda t: price(t, t.exit_price), numeric=True,
               key=lambda t: t.exit_price),
        Column("Fees", lambda t: format_fixed(t.fees, money), numeric=True, key=lambda t: t.fees),
        Column("P&L", lambda t: format_fixed(t.pnl, money, sign=True), numeric=True,
               color=lambda t: pnl_color(t.pnl), key=lambda t: t.pnl),
        Column("Return", lambda t: format_pct(t.return_pct, sign=True), numeric=True,
               color=lambda t: pnl_color(t.pnl), key=lambda t: t.return_pct),
        Column("Opened", lambda t: format_time(t.entry_ms), key=lambda t: t.entry_ms),
    ]


class ClosedTradesView(QWidget):
    """The closed trades table under a line of totals per agent.

    Signals:
        counted: how many closed trades there are now (for the tab's title).
    """

    counted = Signal(int)

    def __init__(
        self,
        broker: Broker,
        bus: EventBus | None,
        price_decimals: Callable[[str], int],
        name_of: Callable[[str], str | None] | None = None,
        parent: QWidget | None = None,
        *,
        book: DeskTrades | None = None,
    ) -> None:
        """``book``: the window's book of fills (default: one of its own over ``broker`` and
        ``bus``); ``name_of``: who an actor is (an ``AgentNames`` is used as it is)."""
        super().__init__(parent)
        self.broker = broker
        self.names = name_of if isinstance(name_of, AgentNames) else AgentNames(name_of)
        self.name = self.names.name
        self.money = money_decimals(broker.quote_currency)
        self.book = book if book is not None else DeskTrades(broker, bus)
        self._own_book = book is None
        self.trades: list[ClosedTrade] = []
        self.totals: dict[str, ActorTotals] = {}
        self.tasks = TaskSet()
        self.throttle = Throttle(self.refresh, self.tasks, interval_ms=300, parent=self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.setSpacing(4)
        self.summary = QLabel("No closed trades yet.")
        self.summary.setObjectName("closedTotals")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        set_look(self.summary, "muted")
        self.model = RecordTableModel(trade_columns(price_decimals, self.money, self.names),
                                      mono_font())
        self.view = QTableView()
        self.view.setModel(self.model)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setAlternatingRowColors(True)
        self.view.setSortingEnabled(True)
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setDefaultSectionSize(24)
        self.view.horizontalHeader().setSectionResizeMode(
            QHeaderView.ResizeMode.ResizeToContents)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setMinimumHeight(48)
        self.view.sortByColumn(0, Qt.SortOrder.DescendingOrder)
        layout.addWidget(self.summary)
        layout.addWidget(self.view, 1)
        self.tasks.attach(self)
        book = self.book
        throttle = self.throttle
        stop = book.listen(lambda _news: throttle.request())  # a fill once it is booked
        own = self._own_book
        self.destroyed.connect(lambda *_: book.detach() if own else stop())

    async def refresh(self) -> None:
        """Pair the book's fills (read once; later fills come as events)."""
        await self.book.load()
        self.show_trades(list(self.book.closed()))

    def show_trades(self, trades: list[ClosedTrade]) -> None:
        self.trades = trades
        self.totals = totals_by_actor(trades)
        header = self.view.horizontalHeader()
        column, order = header.sortIndicatorSection(), header.sortIndicatorOrder()
        self.model.set_rows(trades)
        if 0 <= column < self.model.columnCount():
            self.model.sort(column, order)
        self.summary.setText(self.summary_html())
        self.counted.emit(len(trades))

    def restyle(self) -> None:
        """The totals carry the theme's P&L colours in their text: write them again."""
        self.summary.setText(self.summary_html())

    def summary_html(self) -> str:
        if not self.trades:
            return "No closed trades yet."
        ccy = escape(self.broker.quote_currency)
        parts = []
        ranked = sorted(self.totals.items(), key=lambda kv: (-kv[1].trades, kv[0]))
        for actor, totals in ranked:
            parts.append(self._total_html(self.name(actor), totals))
        all_pnl = sum((t.pnl for t in self.totals.values()), Decimal(0))
        all_fees = sum((t.fees for t in self.totals.values()), Decimal(0))
        wins = sum(t.wins for t in self.totals.values())
        parts.append(self._total_html("All", ActorTotals(len(self.trades), wins, all_fees,
                                                         all_pnl)))
        return " &nbsp;·&nbsp; ".join(parts) + f" &nbsp;<span>{ccy}, after fees</span>"

    def _total_html(self, who: str, totals: ActorTotals) -> str:
        pnl = format_fixed(totals.pnl, self.money, sign=True)
        colour = pnl_color(totals.pnl) or COLORS["text"]
        return (f"<b>{escape(who)}</b> {totals.trades} trade{'s' if totals.trades != 1 else ''}"
                f", {totals.wins} won, <span style='color:{colour}'>{pnl}</span>")
