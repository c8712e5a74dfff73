"""Settlement of a paper account on live quotes: open orders against the exchange's touch.

The live counterpart of ``Settlement`` (which walks candles): at each settle every open order
whose symbol has a quote read after the order was placed is matched against that quote
(``quote_matching``), stops before limits, and each fill is committed and announced exactly as a
candle's fill is (``Settlement._execute``). An equity point is committed when something filled,
and otherwise at most once a minute: a live driver settles every second or so, and a point per
settle would fill the ledger with a row a second.
"""

from __future__ import annotations

from collections.abc import Callable

from app.domain.clock import Clock
from app.domain.market_rules import MarketRules
from app.domain.trading import Fill, Mode
from app.events import EventSink
from app.exchange.matching import Match, priority
from app.exchange.paper_account import PaperAccount
from app.exchange.quote_matching import match_quote
from app.exchange.quotes import QuoteBoard, QuoteWindow
from app.exchange.settlement import Costs, Settlement
from app.store.ledger import Ledger, OrderRecord

EQUITY_EVERY_MS = 60_000


class QuoteSettlement(Settlement):
    """Fills the account's open orders against the newest quotes on ``board``."""

    def __init__(
        self,
        account: PaperAccount,
        window: QuoteWindow,
        ledger: Ledger,
        clock: Clock,
        rules: Callable[[str], MarketRules],
        costs: Costs,
        mode: Mode,
        emit: EventSink | None = None,
    ) -> None:
        # the bar window's walk is replaced (``settle``); valuing positions needs only ``mark``
        super().__init__(account, window, ledger, clock, rules, costs, mode,  # type: ignore[arg-type]
                         emit)
        self.board: QuoteBoard = window.board
        self._started_ms = clock.now_ms()
        self._seen: set[str] = set()  # orders matched against a quote without filling

    def _settle(self) -> list[Fill]:
        account = self.account
        now = self.clock.now_ms()
        slippage = self.costs.slippage
        candidates: list[tuple[tuple[int, int], str, OrderRecord, Match]] = []
        for record in list(account.open.values()):
            order = record.order
            quote = self.board.get(order.symbol)
            if quote is None or quote.time_ms < order.created_ms:
                continue  # no quote read since the order was placed
            resting = order.order_id in self._seen or order.created_ms < self._started_ms
            match = match_quote(order, quote, slippage, self.rules(order.symbol),
                                resting=resting)
            self._seen.add(order.order_id)
            if match is not None:
                candidates.append((priority(order, match), order.order_id, record, match))
        candidates.sort(key=lambda item: (item[0], item[1]))
        fills: list[Fill] = []
        for _prio, order_id, record, match in candidates:
            if order_id not in account.open:
                continue  # cancelled by an exit that filled before it in this settle
            if match.triggered_only:
                record.order.triggered = True
                record.order.updated_ms = now
                self.ledger.save_order(record)
                continue
            fill = self._execute(record, match, now)
            if fill is not None:
                fills.append(fill)
        self._seen.intersection_update(account.open)
        last = account.stats.settled_ms
        if fills or last < 0 or now - last >= EQUITY_EVERY_MS:
            self._record_point(now, {})
        return fills
