"""What Kestrel tells the person, in words, and the list that keeps every such notice.

A fill is worded once here (who, which side, how much, at what price, and for a sell what it
realized and whose lots it came out of: ``app.ui.trades``), and the chat's fill card and the
notifications list both show those words, so the two never tell a trade differently.

``NoticeLog`` keeps in the workspace's notifications table (``NotificationService.record``) the
notices of every kind the tray and Telegram give the person that were not kept there yet: fills
and take-profit or stop-loss hits, orders refused by the Risk Guard or the broker, an agent's
question or an order waiting for approval, an agent stopped by a fault. What is sent through the
notification service (an agent's ``send_notification``, the kill switch, a position left without
its stop) is kept there already. The table outlives the window, so the list does too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from app.domain.agents import Urgency
from app.domain.errors import KestrelError
from app.domain.trading import ExitKind, Side
from app.events import AgentStateChanged, EventBus, OrderRejected, QuestionAsked
from app.orchestration.notify import NotificationService
from app.trading.lots import Taken
from app.ui.names import AgentNames
from app.ui.panels.style import format_fixed, format_quantity
from app.ui.trades import DeskTrades, FillNews, same_owner

logger = logging.getLogger(__name__)

# the notices' titles, which the list shows as their kind
BOUGHT, SOLD = "Bought", "Sold"
TAKE_PROFIT, STOP_LOSS, CLOSED = "Take profit hit", "Stop loss hit", "Position closed"
RISK_REFUSED, BROKER_REFUSED = "Refused by the Risk Guard", "Refused by the broker"
APPROVAL, QUESTION, FAULT = "Approval needed", "Question", "Agent stopped by a fault"
_EXIT_TITLES = {ExitKind.TAKE_PROFIT: TAKE_PROFIT, ExitKind.STOP_LOSS: STOP_LOSS,
                ExitKind.CLOSE: CLOSED}


@dataclass(frozen=True, slots=True)
class FillWords:
    """A fill told to a person.

    Attributes:
        title: ``Bought``, ``Sold``, ``Take profit hit``, ``Stop loss hit``, ``Position closed``.
        line: who traded what: "BTC/USD Trader sold 0.187204 BTC/USD at 11,000.19".
        pnl: what a sell realized ("P&L +64.84 USD"), with whose lots when not the seller's
            alone; "" for a buy.
        pnl_value: the realized amount (None for a buy), for its colour.
    """

    title: str
    line: str
    pnl: str
    pnl_value: Decimal | None
    side: Side

    @property
    def text(self) -> str:
        return f"{self.line}; {self.pnl}" if self.pnl else self.line


def fill_words(news: FillNews, names: AgentNames, price_decimals: int, money: int,
               ccy: str) -> FillWords:
    fill = news.fill
    who = names.name(fill.agent_id)
    verb = "bought" if fill.side is Side.BUY else "sold"
    line = (f"{who} {verb} {format_quantity(fill.quantity)} {fill.symbol} at "
            f"{format_fixed(fill.price, price_decimals)}")
    if fill.side is Side.BUY:
        return FillWords(BOUGHT, line, "", None, fill.side)
    title = _EXIT_TITLES.get(news.exit_kind, SOLD)
    pnl = news.pnl
    if pnl is None or not news.takes:
        return FillWords(title, line, "", None, fill.side)
    amount = f"P&L {format_fixed(pnl, money, sign=True)} {ccy}"
    return FillWords(title, line, amount + _whose(news.takes, fill.agent_id, names, money),
                     pnl, fill.side)


def _whose(takes: tuple[Taken, ...], seller: str, names: AgentNames, money: int) -> str:
    """Whose lots a sell came out of, when not the seller's own alone."""
    owners: dict[str, Decimal] = {}
    for part in takes:
        owners[part.owner] = owners.get(part.owner, Decimal(0)) + part.realized
    if len(owners) == 1:
        owner = next(iter(owners))
        return "" if same_owner(owner, seller) else f" ({names.name(owner)}'s trade)"
    parts = ", ".join(f"{names.name(o)} {format_fixed(v, money, sign=True)}"
                      for o, v in owners.items())
    return f" ({parts})"


class NoticeLog:
    """Keeps every notice of the kinds above in the notifications table, as it happens.

    Args:
        service: the workspace's notification service (its table is the list's).
        book: the window's book of fills (a fill is recorded once booked, with its P&L).
        price_decimals: a symbol's price decimals; ``money``, ``ccy``: the account's.
        now: the market clock's time (a fault's notice is kept once per moment).
        on_recorded: told after each notice is kept (the list reads itself again).
    """

    def __init__(self, service: NotificationService, bus: EventBus, book: DeskTrades,
                 names: AgentNames, price_decimals: Callable[[str], int], money: int, ccy: str,
                 now: Callable[[], int], on_recorded: Callable[[], None] | None = None) -> None:
        self.service = service
        self.now = now
        self.bus = bus
        self.names = names
        self.price_decimals = price_decimals
        self.money = money
        self.ccy = ccy
        self.on_recorded = on_recorded
        self._stop_fills = book.listen(self.on_fill)
        bus.subscribe(OrderRejected, self.on_rejected)
        bus.subscribe(QuestionAsked, self.on_question)
        bus.subscribe(AgentStateChanged, self.on_state)

    def detach(self) -> None:
        self._stop_fills()
        self.bus.unsubscribe(OrderRejected, self.on_rejected)
        self.bus.unsubscribe(QuestionAsked, self.on_question)
        self.bus.unsubscribe(AgentStateChanged, self.on_state)

    def _keep(self, agent_id: str, message: str, subject: str, urgency: Urgency,
              key: str, at_ms: int | None = None) -> None:
        try:
            self.service.record(agent_id, message, subject, urgency, key=key, at_ms=at_ms)
        except (KestrelError, OSError, ValueError):  # the list is a record, never a failure
            logger.exception("the notice %r could not be kept", subject)
            return
        if self.on_recorded is not None:
            self.on_recorded()

    def on_fill(self, news: FillNews) -> None:
        words = fill_words(news, self.names, self.price_decimals(news.fill.symbol), self.money,
                           self.ccy)
        urgency = Urgency.HIGH if words.title == STOP_LOSS else Urgency.MEDIUM
        self._keep(news.fill.agent_id, words.text, words.title, urgency,
                   f"fill:{news.fill.fill_id}", news.fill.time_ms)

    def on_rejected(self, event: OrderRejected) -> None:
        who = self.names.name(event.agent_id)
        subject = RISK_REFUSED if event.source == "risk" else BROKER_REFUSED
        message = (f"{who}'s {event.side} {event.order_type} {format_quantity(event.quantity)} "
                   f"{event.symbol}: {event.rule}: {event.reason}")
        key = (f"refused:{event.agent_id}:{event.time_ms}:{event.symbol}:{event.side}:"
               f"{event.quantity}:{event.rule}")
        self._keep(event.agent_id, message, subject, Urgency.HIGH, key)

    def on_question(self, event: QuestionAsked) -> None:
        who = self.names.name(event.agent_id)
        approval = event.kind == "approval"
        subject = APPROVAL if approval else QUESTION
        message = (f"{who} needs your approval: {event.text}" if approval
                   else f"{who} asks you: {event.text}")
        self._keep(event.agent_id, message, subject, Urgency.HIGH,
                   f"question:{event.question_id}")

    def on_state(self, event: AgentStateChanged) -> None:
        if event.state != "faulted":
            return
        who = self.names.name(event.agent_id)
        message = f"{who} stopped with a fault: {event.reason or 'no reason given'}"
        key = f"fault:{event.agent_id}:{self.now()}:{event.reason}"
        self._keep(event.agent_id, message, FAULT, Urgency.CRITICAL, key)
