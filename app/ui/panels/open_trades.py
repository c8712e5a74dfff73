"""Open trades: each lot held now, whose it is, what it cost, its exits, how long, and its P&L.

A position is what the account holds; a trade is what someone bought and still holds: the lot of
one owner in one symbol (``app.trading.lots``, the rule every P&L view follows, read from the
window's one book, ``app.ui.trades``). Each row has its owner's take profit and stop loss (the
owner's open exit orders of that symbol), how long it has been held on the market's clock, and
its P&L at the last price, its buys' fees included.

Close is the person's order, through the person's controls like every other (the Risk Guard,
the audit trail, actor "person"). A sale by the person comes out of the person's own lot first,
then out of the others' in turn: so the person's lot is closed by selling its size, and a lot
that is the symbol's only one by closing the position; another owner's lot beside other lots
cannot be sold alone, and the question says that closing it closes the whole position. The
question always names whose lot it is and that its P&L stays that owner's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from html import escape

from PySide6.QtWidgets import QPushButton, QTableView

from app.domain.agents import PERSON_ID
from app.domain.trading import ExitKind, Mode, Order, Position, Side
from app.runtime.controls import Outcome, PersonControls
from app.runtime.ticket import Ticket, TicketKind
from app.trading.lots import Lot
from app.ui.names import AgentNames
from app.ui.panels.record_model import Column
from app.ui.panels.style import (
    format_fixed,
    format_pct,
    format_quantity,
    format_time,
    pnl_color,
)
from app.ui.theme import set_look
from app.ui.trades import same_owner

Decimals = Callable[[str], int]
MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class OpenTrade:
    """One owner's lot of one symbol as a row: valued at ``last``, with its owner's exits.

    ``entry_ms`` is None for coins no fill explains (held before Kestrel, a deposit): the
    person's, by the lots' rule.
    """

    owner: str
    symbol: str
    size: Decimal
    cost: Decimal
    entry_ms: int | None
    last: Decimal | None
    take_profit: Decimal | None
    stop_loss: Decimal | None
    now_ms: int

    @property
    def avg_cost(self) -> Decimal:
        return self.cost / self.size if self.size else Decimal(0)

    @property
    def unrealized(self) -> Decimal | None:
        return None if self.last is None else self.size * self.last - self.cost

    @property
    def pnl_pct(self) -> Decimal | None:
        pnl = self.unrealized
        return None if pnl is None or not self.cost else pnl / self.cost * 100

    @property
    def held_ms(self) -> int | None:
        return None if self.entry_ms is None else max(self.now_ms - self.entry_ms, 0)


def exit_price(order: Order) -> Decimal | None:
    """Where an exit order sells: a stop loss at its stop, a take profit at its limit."""
    if order.exit_kind is ExitKind.STOP_LOSS:
        return order.stop_price if order.stop_price is not None else order.price
    return order.price if order.price is not None else order.stop_price


def open_trades(lots: Sequence[Lot], positions: Sequence[Position], orders: Sequence[Order],
                now_ms: int) -> list[OpenTrade]:
    """A row per lot, each valued at its position's last price and given its owner's open
    take-profit and stop-loss orders; coins a position holds beyond its lots are the person's."""
    last = {p.symbol: p.current_price for p in positions}
    rows = []
    for lot in lots:
        exits = [o for o in orders if o.symbol == lot.symbol and same_owner(o.agent_id, lot.owner)
                 and o.status.is_open]
        tp = next((exit_price(o) for o in exits if o.exit_kind is ExitKind.TAKE_PROFIT), None)
        sl = next((exit_price(o) for o in exits if o.exit_kind is ExitKind.STOP_LOSS), None)
        rows.append(OpenTrade(lot.owner, lot.symbol, lot.size, lot.cost, lot.entry_ms,
                              last.get(lot.symbol), tp, sl, now_ms))
    for position in positions:
        held = sum((r.size for r in rows if r.symbol == position.symbol), Decimal(0))
        beyond = position.size - held
        if beyond > 0:
            exits = [o for o in orders if o.symbol == position.symbol
                     and same_owner(o.agent_id, PERSON_ID) and o.status.is_open]
            rows.append(OpenTrade(
                PERSON_ID, position.symbol, beyond, beyond * position.avg_price, None,
                position.current_price,
                next((exit_price(o) for o in exits if o.exit_kind is ExitKind.TAKE_PROFIT), None),
                next((exit_price(o) for o in exits if o.exit_kind is ExitKind.STOP_LOSS), None),
                now_ms))
    rows.sort(key=lambda r: (r.symbol, r.entry_ms if r.entry_ms is not None else -1, r.owner))
    return rows


def format_held(ms: int | None) -> str:
    """``3 d 4 h``, ``5 h 20 min``, ``12 min``: how long a trade has been held."""
    if ms is None:
        return "—"
    minutes = ms // MINUTE_MS
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min"


def trade_columns(price_decimals: Decimals, money: int,
                  names: AgentNames) -> list[Column[OpenTrade]]:
    def price(t: OpenTrade, value: Decimal | None) -> str:
        return "—" if value is None else format_fixed(value, price_decimals(t.symbol))

    def signed(value: Decimal | None) -> Decimal:
        return value if value is not None else Decimal(0)

    return [
        Column("Owner", lambda t: names.name(t.owner), tooltip=lambda t: names.tooltip(t.owner),
               key=lambda t: names.name(t.owner).casefold()),
        Column("Symbol", lambda t: t.symbol),
        Column("Size", lambda t: format_quantity(t.size), numeric=True, key=lambda t: t.size),
        # the buys' fees included: selling there breaks even before the sale's own fee
        Column("Avg cost", lambda t: price(t, t.avg_cost), numeric=True,
               key=lambda t: t.avg_cost),
        Column("Last", lambda t: price(t, t.last), numeric=True, key=lambda t: signed(t.last)),
        Column("TP", lambda t: price(t, t.take_profit), numeric=True,
               key=lambda t: signed(t.take_profit)),
        Column("SL", lambda t: price(t, t.stop_loss), numeric=True,
               key=lambda t: signed(t.stop_loss)),
        Column("Held", lambda t: format_held(t.held_ms), numeric=True,
               key=lambda t: t.held_ms if t.held_ms is not None else -1,
               tooltip=lambda t: "held before Kestrel's fills" if t.entry_ms is None
               else f"opened {format_time(t.entry_ms)} UTC"),
        Column("Unrealized P&L", lambda t: "—" if t.unrealized is None
               else format_fixed(t.unrealized, money, sign=True), numeric=True,
               color=lambda t: pnl_color(signed(t.unrealized)), key=lambda t: signed(t.unrealized)),
        Column("P&L %", lambda t: "—" if t.pnl_pct is None else format_pct(t.pnl_pct, sign=True),
               numeric=True, color=lambda t: pnl_color(signed(t.unrealized)),
               key=lambda t: signed(t.pnl_pct)),
        Column("", lambda t: ""),  # the Close button's cell
    ]


@dataclass(frozen=True, slots=True)
class ClosePlan:
    """What a row's Close does: sell ``quantity`` of the lot, or close the whole position."""

    trade: OpenTrade
    whole_position: bool
    quantity: Decimal  # what is sold
    others: tuple[OpenTrade, ...]  # the other lots of the symbol

    @property
    def mine(self) -> bool:
        return same_owner(self.trade.owner, PERSON_ID)


def close_plan(trade: OpenTrade, rows: Sequence[OpenTrade]) -> ClosePlan:
    """How the person's order can close ``trade``: the person's lot by selling its size (a
    sale of the person's comes out of the person's lot first); the symbol's only lot by closing
    the position; another owner's lot beside others only with the whole position."""
    others = tuple(r for r in rows if r.symbol == trade.symbol and r is not trade)
    if not others:
        return ClosePlan(trade, True, trade.size, others)
    if same_owner(trade.owner, PERSON_ID):
        return ClosePlan(trade, False, trade.size, others)
    whole = trade.size + sum((r.size for r in others), Decimal(0))
    return ClosePlan(trade, True, whole, others)


def close_question(plan: ClosePlan, names: AgentNames, ccy: str, money: int,
                   decimals: int, mode: Mode) -> tuple[str, str, str]:
    """(heading, body, confirm button) of the question asked before a row's Close."""
    t = plan.trade
    owner = escape(names.name(t.owner))
    last = "" if t.last is None else f" (last {format_fixed(t.last, decimals)})"
    pnl = ("" if t.unrealized is None else
           f" (about {format_fixed(t.unrealized, money, sign=True)} {escape(ccy)} now)")
    live = " on the LIVE exchange" if mode is Mode.LIVE else ""
    parts = [f"Sell {format_quantity(plan.quantity)} {escape(t.symbol)} at market{last}{live}"
             f", before the fee."]
    if not plan.mine:
        parts.append(f"<b>This trade is {owner}'s, not yours.</b> You close it as yourself; "
                     f"its P&amp;L{pnl} stays {owner}'s, and its take profit and stop loss go "
                     "once it is sold.")
    else:
        parts.append(f"This trade is yours; its P&amp;L{pnl} is yours.")
    if plan.whole_position and plan.others:
        held = ", ".join(f"{escape(names.name(o.owner))} {format_quantity(o.size)}"
                         for o in plan.others)
        parts.append(f"<b>This closes the whole {escape(t.symbol)} position</b> ({held} "
                     "besides this trade): a sale of yours comes out of your own lot first and "
                     "then out of the others' in turn, so one owner's lot cannot be sold alone. "
                     "Each part's P&amp;L goes to its owner.")
    elif plan.others:
        parts.append("The other owners' lots of this symbol are left as they are.")
    heading = (f"Close {names.name(t.owner)}'s {t.symbol} trade?" if not plan.mine
               else f"Close your {t.symbol} trade?")
    confirm = "Close the whole position" if plan.whole_position and plan.others else "Close trade"
    return heading, "<br><br>".join(parts), confirm


async def close_trade(controls: PersonControls, plan: ClosePlan) -> Outcome:
    """The person's order for ``plan``: a market sell of the lot, or the position's close."""
    if plan.whole_position:
        return await controls.close(plan.trade.symbol)
    return await controls.submit(Ticket(plan.trade.symbol, Side.SELL, TicketKind.MARKET,
                                        quantity=plan.quantity))


def close_button(view: QTableView, row: int, trade: OpenTrade, names: AgentNames,
                 clicked: Callable[[QPushButton], object]) -> QPushButton:
    """A row's Close button, in the last column."""
    model = view.model()
    button = QPushButton("Close")
    button.setObjectName(f"close-trade-{trade.symbol}-{trade.owner}")
    whose = "your" if same_owner(trade.owner, PERSON_ID) else f"{names.name(trade.owner)}'s"
    button.setToolTip(f"Sell {whose} {trade.symbol} trade at market (asks first)")
    button.setStyleSheet("padding: 1px 8px;")
    set_look(button, "down")
    button.clicked.connect(lambda _checked=False: clicked(button))
    view.setIndexWidget(model.index(row, model.columnCount() - 1), button)
    return button
