"""Trading from the chart and the order book, through the one order path.

What the chart and the book only announce, this turns into the person's own calls:

- an order's line (a take profit, a stop loss, a working order) dropped at a new price is moved by
  ``PersonControls.modify``: the ``modify_order`` tool as the person, so order entry's checks, the
  Risk Guard and the audit trail see it like any order; the chart then says what came of it, and
  a refused move's line goes back to where the order still is;
- "Buy/Sell limit here" of the chart's right-click menu opens the order ticket filled in (symbol,
  side, Limit, the price); the ticket's review and its second Enter stay the only way to place;
- a click on an order-book level puts its price in the ticket (opening it if closed), as a limit
  (a stop ticket takes it as its trigger).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from PySide6.QtCore import QObject

from app.domain.trading import Order, Side
from app.runtime.controls import Outcome, PersonControls
from app.runtime.ticket import TicketKind
from app.ui.charts.book_widget import BookWidget
from app.ui.charts.chart_widget import ChartWidget
from app.ui.charts.levels import move_arguments
from app.ui.charts.style import format_price
from app.ui.panels.tasks import TaskSet
from app.ui.trading.desk_controls import DeskTradingControls
from app.ui.trading.ticket import OrderTicket


class ChartTrading(QObject):
    """Connects the chart and the book to the person's trading controls.

    Args:
        show_message: where outcomes are also told (the account panel's strip).

    Attributes:
        outcomes: every move's outcome, newest last (tests read it).
    """

    def __init__(
        self,
        chart: ChartWidget,
        book: BookWidget,
        controls: PersonControls,
        trading: DeskTradingControls,
        tasks: TaskSet,
        show_message: Callable[[str, str], None] | None = None,
    ) -> None:
        super().__init__(chart)
        self.chart = chart
        self.book = book
        self.controls = controls
        self.trading = trading
        self.tasks = tasks
        self.show_message = show_message
        self.outcomes: list[Outcome] = []
        chart.level_moved.connect(self._level_moved)
        chart.limit_here.connect(self.limit_here)
        book.price_clicked.connect(self.book_price)
        chart.enable_trading(True)

    def _level_moved(self, order: Order, price: Decimal) -> None:
        self.tasks.spawn(self.move(order, price))

    async def move(self, order: Order, price: Decimal) -> Outcome:
        """Move ``order`` to ``price`` as the person, and say what came of it on the chart."""
        decimals = self.chart.view.price_axis.decimals
        outcome = await self.controls.modify(order, **move_arguments(order, price))
        self.outcomes.append(outcome)
        what = f"{order.side.value} {order.order_type.value} {order.order_id}"
        to = format_price(price, decimals)
        if outcome.ok:
            text = f"Moved {what} to {to}. {outcome.text}"
        else:
            text = (f"Not moved: {what} stays at "
                    f"{format_price(order.price or order.stop_price or 0, decimals)}. "
                    f"{outcome.text}")
        self.chart.move_finished(order.order_id, outcome.ok, text)
        if self.show_message is not None:
            self.show_message(text, "info" if outcome.ok else "error")
        return outcome

    def limit_here(self, symbol: str, side: Side, price: Decimal) -> OrderTicket:
        """The ticket, filled in for a limit order at ``price``; placing is the person's."""
        ticket = self.trading.open_ticket(symbol)
        ticket.fill_in(symbol=symbol, side=side, kind=TicketKind.LIMIT, price=price)
        ticket.fields["amount"].setFocus()
        return ticket

    def book_price(self, price: Decimal) -> OrderTicket:
        """An order-book level's price into the ticket (opened on the book's symbol if closed);
        a ticket without a price field becomes a limit order."""
        shown = self.trading.ticket is not None and self.trading.ticket.isVisible()
        ticket = self.trading.ticket if shown else self.trading.open_ticket(self.book.symbol)
        assert ticket is not None
        kind = ticket.kind_value()
        if kind in (TicketKind.MARKET, TicketKind.TP_SL):
            kind = TicketKind.LIMIT
        ticket.fill_in(kind=kind, price=price)
        return ticket
