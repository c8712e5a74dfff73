"""Settlement of the paper account: running open orders against newly visible candles.

``Settlement.settle`` is called after each clock advance. It walks every candle that became
visible since the last settle, in time order across symbols, fills what the candle allows, and
commits each fill with its balance change in one ledger transaction; then it commits the settle
cursor and an equity point. Re-running a settle over candles already seen (after a crash between
a fill and the cursor commit, or after a write the ledger refused, when the account is read back
from the ledger) gives the same result, because filled orders are no longer open and the rest
match identically. Each fill, and each order it closes, is announced through the event
sink after its commit.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from app.domain.clock import Clock
from app.domain.market_rules import MarketRules, fmt
from app.domain.trading import ExitKind, Fill, Mode, OrderStatus, OrderType, Side
from app.events import EventSink, OrderCancelled, OrderFilled
from app.exchange import valuation
from app.exchange.bar_window import BarWindow
from app.exchange.book import ZERO, quote_down, quote_up
from app.exchange.matching import Bar, Match, match_order, priority
from app.exchange.paper_account import PaperAccount
from app.market.series import KlineSeries
from app.store.ledger import Ledger, OrderRecord

BPS = Decimal("0.0001")
_EXITS = (ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS)


@dataclass(frozen=True, slots=True)
class Costs:
    """The simulated exchange's charges: maker and taker fee (0.001 = 0.1%) and the adverse
    slippage of market and stop fills in basis points."""

    fee_maker: Decimal = Decimal("0.001")
    fee_taker: Decimal = Decimal("0.001")
    slippage_bps: Decimal = Decimal(2)

    @property
    def slippage(self) -> Decimal:
        return self.slippage_bps * BPS


class Settlement:
    """Fills the account's open orders against the candles the window shows.

    Args:
        rules: the market rules of a symbol (the broker's, built once per symbol).
        emit: where fills and closed orders are announced; None announces nothing.
    """

    def __init__(
        self,
        account: PaperAccount,
        window: BarWindow,
        ledger: Ledger,
        clock: Clock,
        rules: Callable[[str], MarketRules],
        costs: Costs,
        mode: Mode,
        emit: EventSink | None = None,
    ) -> None:
        self.account = account
        self.window = window
        self.ledger = ledger
        self.clock = clock
        self.rules = rules
        self.costs = costs
        self.mode = mode
        self.emit = emit

    def settle(self) -> list[Fill]:
        """Process every candle visible since the last settle; return the fills it produced.

        A settle that fails (the ledger refused a write: a full disk, a failing one) leaves
        the account as the ledger last committed it, not as far as memory had got: an order
        filled in memory whose fill was not committed is open again, and its settle cursor
        where it was, so the next settle walks the same candles and fills it once. Fills
        committed before the failure stay filled (they are in the ledger)."""
        try:
            return self._settle()
        except Exception:
            self.account.back_to(self.ledger)
            raise

    def _settle(self) -> list[Fill]:
        account, window = self.account, self.window
        now = self.clock.now_ms()
        opened = account.open
        open_symbols = {r.order.symbol for r in opened.values()} if opened else ()
        events: list[tuple[int, str, int]] = []
        sources: dict[str, KlineSeries] = {}
        seen: dict[str, tuple[KlineSeries, int]] = {}
        cursors = account.cursor_ms
        for symbol in window.market.symbols():
            full, visible = window.bars(symbol)
            if visible <= 0:
                continue
            seen[symbol] = (full, visible)
            if symbol in open_symbols:
                cursor = cursors.get(symbol)
                start = 0 if cursor is None else int(
                    full.timestamp_ms.searchsorted(cursor, side="right")
                )
                sources[symbol] = full
                events.extend((int(full.timestamp_ms[i]), symbol, i) for i in range(start, visible))
            cursors[symbol] = full.timestamp_ms.item(visible - 1)
        events.sort()
        fills: list[Fill] = []
        for _ts, symbol, index in events:
            fills.extend(self._settle_bar(symbol, sources[symbol], index))
        if fills or now != account.stats.settled_ms:
            self._record_point(now, seen)
        return fills

    def _settle_bar(self, symbol: str, full: KlineSeries, index: int) -> list[Fill]:
        bar: Bar | None = None
        bar_open = int(full.timestamp_ms[index])
        slippage = self.costs.slippage
        candidates: list[tuple[tuple[int, int], str, OrderRecord, Match]] = []
        for record in list(self.account.open.values()):
            order = record.order
            if order.symbol != symbol or order.created_ms > bar_open:
                continue
            if bar is None:
                bar = self.window.bar(full, index, self.window.decimals(symbol))
            match = match_order(order, bar, slippage, self.rules(order.symbol))
            if match is not None:
                candidates.append((priority(order, match), order.order_id, record, match))
        candidates.sort(key=lambda item: (item[0], item[1]))
        fills = []
        for _prio, order_id, record, match in candidates:
            if order_id not in self.account.open:
                continue  # cancelled by an exit that filled earlier in this bar
            if match.triggered_only:
                record.order.triggered = True
                record.order.updated_ms = bar_open
                self.ledger.save_order(record)
                continue
            assert bar is not None
            fill = self._execute(record, match, bar.open_ms)
            if fill is not None:
                fills.append(fill)
        return fills

    def _execute(self, record: OrderRecord, match: Match, time_ms: int) -> Fill | None:
        """Fill ``record`` as ``match`` says, at ``time_ms`` (a candle's open, or a quote's
        time); commit and announce it."""
        account, book = self.account, self.account.book
        order = record.order
        rules = self.rules(order.symbol)
        base = account.base_of(order.symbol)
        price = match.price
        assert price is not None
        rate = self.costs.fee_taker if match.taker else self.costs.fee_maker
        quote = account.quote_currency
        if order.side is Side.BUY:
            available = book.free(quote) + record.reserved
            budget = available if record.quote_amount is None else min(
                record.quote_amount, available
            )
            affordable = rules.floor_amount(budget / (price * (1 + rate)))
            # a quote-amount order buys what its budget allows at the fill price; a quantity
            # order buys its quantity, or less only when the funds at the fill price fall short
            qty = affordable if record.quote_amount is not None else min(
                order.remaining, affordable
            )
            while qty > 0 and _buy_cost(qty, price, rate) > budget:
                qty -= rules.step  # the 8-decimal rounding of cost and fee can tip it over
            if qty <= 0 or qty < rules.min_amount:
                needed = _buy_cost(max(order.remaining, rules.min_amount), price, rate)
                # the reason quotes no price of its own: a blind venue shows an order's reason
                # with only the order's own prices rescaled (app.runtime.blind_map)
                self._close(record, OrderStatus.EXPIRED,
                            f"not filled: at the fill price it needs {fmt(needed)} {quote} but "
                            f"only {fmt(budget)} is available")
                return None
        else:
            held = book.total(base)
            if order.reduce_only:
                qty = min(order.remaining, held - book.reserved.get(base, ZERO))
            else:
                qty = order.remaining
            if qty <= 0:
                self._close(record, OrderStatus.CANCELLED,
                            f"nothing left to sell: no free {base} when it triggered")
                return None
        notional = quote_up(qty * price) if order.side is Side.BUY else quote_down(qty * price)
        fee = quote_up(notional * rate)
        whole = qty == order.remaining or record.quote_amount is not None
        why = "" if whole else (
            f"filled {fmt(qty)} of {fmt(order.quantity)}; the rest was cancelled for lack of "
            "funds at the fill price"
        )
        account.close_order(record, OrderStatus.FILLED if whole else OrderStatus.CANCELLED, why,
                            self.clock.now_ms())
        if order.side is Side.BUY:
            holdings = book.apply_buy(order.agent_id, order.symbol, base, qty, notional, fee)
            realized = ZERO
        else:
            realized, holdings = book.apply_sell(
                order.agent_id, order.symbol, base, qty, notional, fee, price
            )
        if record.quote_amount is not None:
            order.quantity = qty
        order.average_price = price
        order.filled_quantity += qty
        order.fee += fee
        order.fee_currency = quote
        order.updated_ms = time_ms
        account.fill_seq += 1
        fill = Fill(
            fill_id=f"F{account.fill_seq:09d}", order_id=order.order_id, agent_id=order.agent_id,
            symbol=order.symbol, side=order.side, quantity=qty, price=price, fee=fee,
            fee_currency=quote, time_ms=time_ms, realized_pnl=realized,
            is_maker=not match.taker,
        )
        siblings = self._cancel_siblings(order.symbol, order.exit_kind, order.side)
        self.ledger.commit_fill(
            fill, [record, *siblings], {quote: book.total(quote), base: book.total(base)},
            book.position_record(order.symbol), holdings,
        )
        if self.emit is not None:
            self.emit(OrderFilled(fill, copy.copy(order)))
            if order.status is OrderStatus.CANCELLED:  # the part it could not pay for
                self.emit(OrderCancelled(copy.copy(order)))
            for sibling in siblings:
                self.emit(OrderCancelled(copy.copy(sibling.order)))
        return fill

    def _close(self, record: OrderRecord, status: OrderStatus, why: str) -> None:
        """An order that cannot fill leaves the book, committed and announced."""
        self.account.close_order(record, status, why, self.clock.now_ms())
        self.ledger.save_order(record)
        if self.emit is not None:
            self.emit(OrderCancelled(copy.copy(record.order)))

    def _cancel_siblings(self, symbol: str, kind: ExitKind, side: Side) -> list[OrderRecord]:
        """One-cancels-other: a filled exit cancels the other exits; a flat position cancels all."""
        if side is not Side.SELL:
            return []
        account = self.account
        flat = account.book.position(symbol).size == 0
        now = self.clock.now_ms()
        out = []
        for record in list(account.open.values()):
            other = record.order
            if other.symbol != symbol or not other.reduce_only:
                continue
            if flat or (kind in _EXITS and other.exit_kind in _EXITS):
                why = "position closed" if flat else f"the other exit ({kind.value}) filled"
                account.close_order(record, OrderStatus.CANCELLED, f"OCO: {why}", now)
                out.append(record)
        return out

    def _record_point(self, now: int, bars: dict[str, tuple[KlineSeries, int]]) -> None:
        account = self.account
        stats = account.stats
        stats.record(now, valuation.equity(account, valuation.marks(account, self.window, bars)))
        meta: dict[str, object] = {f"cursor:{s}": ms for s, ms in account.cursor_ms.items()}
        meta.update(stats.meta())
        self.ledger.record_settle(
            now, stats.last_equity, account.book.total(account.quote_currency), meta,
            defer=self.mode is Mode.BACKTEST,  # the next order or fill commits it (see Ledger)
        )


def _buy_cost(qty: Decimal, price: Decimal, rate: Decimal) -> Decimal:
    notional = quote_up(qty * price)
    return notional + quote_up(notional * rate)


__all__ = ["BPS", "Costs", "OrderType", "Settlement"]
