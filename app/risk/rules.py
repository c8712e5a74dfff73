"""The entry rules of the Risk Guard, each a small class with its own frozen, strict config.

Every rule answers one question about a new entry and, when it refuses, says why in plain words
with the numbers and the limit (``Position weight would be 23.0% > limit 20.0% for BTC/USDT``).
Configs are pydantic models that reject unknown keys, so a typo in a risk file is an error and never
a silently disabled limit. Exits never reach these rules (see ``app.risk.guard``).
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import ClassVar

from app.config.risk import (
    AgentBudgetConfig,
    AllowedSymbolsConfig,
    DailyLossLimitConfig,
    LimitPriceBandConfig,
    MaxDrawdownHaltConfig,
    MaxOpenOrdersConfig,
    MaxOpenPositionsConfig,
    MaxOrderNotionalConfig,
    MaxPositionWeightConfig,
    MinCashReserveConfig,
)
from app.domain.agents import agent_key
from app.domain.clock import ms_to_iso
from app.domain.trading import OrderType, Side
from app.risk.guard import Violation
from app.risk.types import OrderIntent, RiskView

DAY_MS = 86_400_000
HUNDRED = Decimal(100)


def pct(value: Decimal, beside: Decimal | None = None) -> str:
    """``Decimal('23.04')`` -> ``'23.0%'``: one decimal is what a person reads in a reason.

    When ``value`` differs from the limit ``beside`` but would print the same, more decimals are
    shown, so a reason never reads "20.0% > limit 20.0%".
    """
    places = 1
    while places < 6:
        step = Decimal(1).scaleb(-places)
        shown = value.quantize(step, rounding=ROUND_HALF_UP)
        if beside is None or value == beside or shown != beside.quantize(step):
            break
        places += 1
    return f"{value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)}%"


def amount(value: Decimal) -> str:
    """A quote amount with at most 8 decimals and no trailing zeros (``12000``, ``0.0315``)."""
    text = format(value.quantize(Decimal("0.00000001")), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _signed_size(intent: OrderIntent) -> Decimal:
    return intent.quantity if intent.side is Side.BUY else -intent.quantity


# -- position and order size ---------------------------------------------------------------------


class MaxPositionWeight:
    """What one symbol can be worth once pending buys fill may not exceed a share of equity.

    The symbol's exposure is its position at the mark plus the quote every pending buy of it holds
    back, this order's included (``RiskView.exposure``), so buys placed one after another before
    any fills add up.
    """

    name: ClassVar[str] = "max_position_weight"

    def __init__(self, config: MaxPositionWeightConfig) -> None:
        self.config = config

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        if view.equity <= 0:
            return Violation(
                f"Equity is {amount(view.equity)} {view.quote_currency}, so no position weight "
                f"is within the limit {pct(self.config.limit_pct)} for {intent.symbol}",
                {"equity": str(view.equity), "limit_pct": str(self.config.limit_pct)},
            )
        pending = view.pending_buys(intent.symbol)
        if intent.side is Side.BUY:
            after = view.exposure(intent.symbol) + intent.commitment
        else:  # a sell that is not an exit: shorting, which a spot broker refuses before this
            held = view.positions.get(intent.symbol)
            value = held.value if held is not None else Decimal(0)
            after = abs(value - intent.notional) + pending
        weight = after / view.equity * HUNDRED
        limit = self.config.limit_pct
        if weight > limit:
            counting = (
                f" (counting {amount(pending)} {view.quote_currency} held by open orders)"
                if pending else ""
            )
            return Violation(
                f"Position weight would be {pct(weight, limit)} > limit {pct(limit)} "
                f"for {intent.symbol}{counting}",
                {"symbol": intent.symbol, "weight_pct": str(weight.quantize(Decimal("0.01"))),
                 "limit_pct": str(self.config.limit_pct), "exposure_after": str(after),
                 "pending_orders": str(pending), "equity": str(view.equity)},
            )
        return None


class MaxOrderNotional:
    """One order may not be worth more than a fixed amount of the quote currency."""

    name: ClassVar[str] = "max_order_notional"

    def __init__(self, config: MaxOrderNotionalConfig) -> None:
        self.config = config

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        notional = intent.notional
        if notional > self.config.limit:
            return Violation(
                f"Order notional {amount(notional)} {view.quote_currency} > limit "
                f"{amount(self.config.limit)} {view.quote_currency} for {intent.symbol}",
                {"notional": str(notional), "limit": str(self.config.limit)},
            )
        return None


class MaxOpenPositions:
    """Opening a position in a new symbol may not exceed a number of open positions.

    A symbol with a pending buy counts as open: the buy will open it when it fills.
    """

    name: ClassVar[str] = "max_open_positions"

    def __init__(self, config: MaxOpenPositionsConfig) -> None:
        self.config = config

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        exposed = view.exposed_symbols()
        if intent.symbol in exposed or intent.side is not Side.BUY:
            return None
        held = sum(1 for p in view.positions.values() if p.size != 0)
        if len(exposed) + 1 > self.config.limit:
            waiting = len(exposed) - held
            counting = f", counting {waiting} with open buy orders" if waiting else ""
            return Violation(
                f"Opening {intent.symbol} would make {len(exposed) + 1} open positions > limit "
                f"{self.config.limit} ({held} held{counting})",
                {"open_positions": len(exposed), "held": held, "pending": waiting,
                 "limit": self.config.limit},
            )
        return None


class MaxOpenOrders:
    """The account may not hold more than a number of open orders, this one included."""

    name: ClassVar[str] = "max_open_orders"

    def __init__(self, config: MaxOpenOrdersConfig) -> None:
        self.config = config

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        if view.open_orders + 1 > self.config.limit:
            return Violation(
                f"This order would make {view.open_orders + 1} open orders > limit "
                f"{self.config.limit}; cancel or wait for some to fill",
                {"open_orders": view.open_orders, "limit": self.config.limit},
            )
        return None


# -- losses ---------------------------------------------------------------------------------------


class DailyLossLimit:
    """Once equity falls below the day's start by the limit, block entries until the next UTC day.

    The day is the market clock's (``view.now_ms``), so a backtest's simulated day counts. The loss
    is observed when an entry is checked (the view carries no intraday low). The latch is held in
    memory: after a restart on the same day it trips again if equity is still down.
    """

    name: ClassVar[str] = "daily_loss_limit"

    def __init__(self, config: DailyLossLimitConfig) -> None:
        self.config = config
        self._tripped_day: int | None = None
        self._tripped_loss = Decimal(0)

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        day = view.now_ms // DAY_MS
        start = view.day_start_equity
        if self._tripped_day != day:
            loss_pct = daily_loss_breach(view, self.config.limit_pct)
            if loss_pct is not None:
                self._tripped_day = day
                self._tripped_loss = loss_pct
        if self._tripped_day == day:
            resume = ms_to_iso((day + 1) * DAY_MS)
            return Violation(
                f"Daily loss limit reached: equity fell {pct(self._tripped_loss)} below the day's "
                f"start {amount(start)} {view.quote_currency} (limit {pct(self.config.limit_pct)});"
                f" new entries are blocked until {resume}",
                {"loss_pct": str(self._tripped_loss.quantize(Decimal("0.01"))),
                 "limit_pct": str(self.config.limit_pct), "blocked_until": resume},
            )
        return None


class MaxDrawdownHalt:
    """While equity is the limit or more below its peak, no new entries.

    Derived from the persisted ``peak_equity`` on every check, so it survives restarts and lifts
    only once equity has recovered above the threshold.
    """

    name: ClassVar[str] = "max_drawdown_halt"

    def __init__(self, config: MaxDrawdownHaltConfig) -> None:
        self.config = config

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        return drawdown_violation(view, self.config.limit_pct)


def daily_loss_breach(view: RiskView, limit_pct: Decimal) -> Decimal | None:
    """How far (in %) equity is below the day's start when that is beyond ``limit_pct``.

    The daily loss limit's test, stated once: the rule latches it for the day, the kill switch's
    watch trips on it after a settle.
    """
    start = view.day_start_equity
    if start <= 0 or view.equity >= start * (1 - limit_pct / HUNDRED):
        return None
    return (start - view.equity) / start * HUNDRED


def drawdown_violation(view: RiskView, limit_pct: Decimal) -> Violation | None:
    """The drawdown halt's test, stated once (the rule and the kill switch's watch ask it)."""
    if view.peak_equity <= 0:
        return None
    drawdown = (view.peak_equity - view.equity) / view.peak_equity * HUNDRED
    if drawdown >= limit_pct:
        return Violation(
            f"Trading halted: drawdown {pct(drawdown)} from the peak equity "
            f"{amount(view.peak_equity)} {view.quote_currency} >= limit {pct(limit_pct)}",
            {"drawdown_pct": str(drawdown.quantize(Decimal("0.01"))),
             "limit_pct": str(limit_pct)},
        )
    return None


# -- where and at what price ----------------------------------------------------------------------


class AllowedSymbols:
    """Entries only in the listed symbols (compared case-insensitively)."""

    name: ClassVar[str] = "allowed_symbols"

    def __init__(self, config: AllowedSymbolsConfig) -> None:
        self.config = config
        self._allowed = frozenset(s.upper() for s in config.symbols)

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        if not self._allowed or intent.symbol.upper() in self._allowed:
            return None
        listed = ", ".join(self.config.symbols)
        return Violation(
            f"{intent.symbol} is not in the allowed symbols list ({listed})",
            {"symbol": intent.symbol, "allowed": list(self.config.symbols)},
        )


class LimitPriceBand:
    """Limit and stop prices must lie within ±band of the last price (catches a slipped digit)."""

    name: ClassVar[str] = "limit_price_band"

    def __init__(self, config: LimitPriceBandConfig) -> None:
        self.config = config

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        last = intent.reference_price
        if last <= 0 or intent.order_type is OrderType.MARKET:
            return None
        for label, price in (("Limit price", intent.price), ("Stop price", intent.stop_price)):
            if price is None:
                continue
            distance = abs(price - last) / last * HUNDRED
            band = self.config.band_pct
            if distance > band:
                return Violation(
                    f"{label} {amount(price)} is {pct(distance, band)} from the last price "
                    f"{amount(last)} > band ±{pct(band)} for {intent.symbol}",
                    {"price": str(price), "last_price": str(last),
                     "distance_pct": str(distance.quantize(Decimal("0.01"))),
                     "band_pct": str(self.config.band_pct)},
                )
        return None


# -- money ---------------------------------------------------------------------------------------


class MinCashReserve:
    """A buy may not leave less free cash than the reserve.

    Free cash is ``view.cash`` minus what pending buys hold back (``open_buy_notional``) and what
    this order will.
    """

    name: ClassVar[str] = "min_cash_reserve"

    def __init__(self, config: MinCashReserveConfig) -> None:
        self.config = config

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        if intent.side is not Side.BUY:
            return None
        reserve = max(self.config.amount, view.equity * self.config.pct_of_equity / HUNDRED)
        held_back = view.open_buy_notional
        after = view.cash - held_back - intent.commitment
        if after < reserve:
            return Violation(
                f"Cash after the order would be {amount(after)} {view.quote_currency} < reserve "
                f"{amount(reserve)} {view.quote_currency} (cash {amount(view.cash)}, held by open "
                f"orders {amount(held_back)}, this order {amount(intent.commitment)})",
                {"cash_after": str(after), "reserve": str(reserve), "cash": str(view.cash),
                 "pending_orders": str(held_back), "order": str(intent.commitment)},
            )
        return None


class AgentBudget:
    """Several agents share one account; each may commit only its own allotment.

    An agent's commitment is its positions at cost plus its pending buys, this order included.
    """

    name: ClassVar[str] = "agent_budget"

    def __init__(self, config: AgentBudgetConfig) -> None:
        for agent, allotment in config.allotments.items():
            if allotment < 0:
                raise ValueError(f"agent_budget allotment for {agent!r} must be >= 0")
        self.config = config
        self._allotments = {agent_key(a): v for a, v in config.allotments.items()}

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        allotment = self._allotments.get(agent_key(intent.agent_id), self.config.default)
        if allotment is None or intent.side is not Side.BUY:
            return None
        committed = view.agent_committed(intent.agent_id)
        order = intent.commitment
        after = committed + order
        if after > allotment:
            return Violation(
                f"Agent {intent.agent_id} would commit {amount(after)} {view.quote_currency} "
                f"({amount(committed)} committed + {amount(order)} this order) > its "
                f"allotment {amount(allotment)} {view.quote_currency}",
                {"agent_id": intent.agent_id, "committed": str(committed),
                 "order_notional": str(order), "allotment": str(allotment)},
            )
        return None
