"""The ``[risk]`` settings section: every Risk Guard rule's limits, with defaults, in one model.

The models live here, below everything, so the settings file can be validated without the guard;
``app.risk`` builds the rules from them. Each rule's config is frozen and rejects unknown keys, so
a typo in a risk file is an error and never a silently disabled limit.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.config.ranges import MONEY_BOUNDS, money, money_values
from app.domain.agents import agent_key
from app.domain.numbers import PlainDecimal


class RuleConfig(BaseModel):
    """Base of every rule's config: frozen, unknown keys rejected, and a switch to turn it off."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    enabled: bool = True


class MaxPositionWeightConfig(RuleConfig):
    limit_pct: PlainDecimal = Field(default=Decimal(20), gt=0, le=100)


class MaxOrderNotionalConfig(RuleConfig):
    limit: PlainDecimal = money(
        Decimal(50_000), positive=True,
        why_low="no order could pass it; to lift the limit, set enabled = false",
    )


class MaxOpenPositionsConfig(RuleConfig):
    limit: int = Field(default=10, ge=1)


class MaxOpenOrdersConfig(RuleConfig):
    limit: int = Field(default=50, ge=1)


class DailyLossLimitConfig(RuleConfig):
    limit_pct: PlainDecimal = Field(default=Decimal(5), gt=0, lt=100)


class MaxDrawdownHaltConfig(RuleConfig):
    limit_pct: PlainDecimal = Field(default=Decimal(25), gt=0, lt=100)


class AllowedSymbolsConfig(RuleConfig):
    """An empty list allows every symbol the market serves."""

    symbols: tuple[str, ...] = ()


class LimitPriceBandConfig(RuleConfig):
    band_pct: PlainDecimal = Field(default=Decimal(10), gt=0, le=100)


class MinCashReserveConfig(RuleConfig):
    """The reserve is the larger of a fixed amount and a share of equity."""

    amount: PlainDecimal = money(
        Decimal(0), positive=False, why_low="a reserve of cash cannot be below nothing"
    )
    pct_of_equity: PlainDecimal = Field(default=Decimal(0), ge=0, lt=100)


class AgentBudgetConfig(RuleConfig):
    """Quote-currency allotments per agent id; agents not listed get ``default`` (None: no cap).

    Agent ids are case-insensitive (``agent_key``): ``TRADER-1`` is bound by the allotment of
    ``trader-1``, and two allotments whose ids differ only in case are refused as ambiguous.
    """

    allotments: dict[str, Annotated[PlainDecimal, MONEY_BOUNDS]] = money_values(
        why_low="an allotment cannot be below nothing (0 lets the agent open nothing)"
    )
    default: PlainDecimal | None = money(
        None, positive=False,
        why_low="an allotment cannot be below nothing (0 lets the agent open nothing)",
    )

    @field_validator("allotments")
    @classmethod
    def _one_allotment_per_agent(cls, value: dict[str, Decimal]) -> dict[str, Decimal]:
        seen: dict[str, str] = {}
        for agent in value:
            first = seen.setdefault(agent_key(agent), agent)
            if first != agent:
                raise ValueError(
                    f"allotments for {first!r} and {agent!r} name the same agent: agent ids are "
                    "case-insensitive; keep one of them"
                )
        return value


class KillSwitchConfig(BaseModel):
    """When the kill switch trips by itself, and whether a trip cancels exits too.

    The ``[risk.kill_switch]`` section of the settings.

    Attributes:
        on_loss_halt: trip when the daily loss limit or the drawdown halt is reached, judged on
            the account's equity after each settle (only while that rule is enabled).
        on_reconciliation_mismatch: trip when a live broker's reconciliation reports a
            difference with the exchange it cannot explain.
        on_unresolved_order: trip when an order's outcome stayed unknown through its whole
            lookup window (see the field's description).
        unknown_outcomes_limit: trip when this many orders in a row were sent to an exchange
            and their outcome stayed unknown (0: never).
        cancel_exits: a trip also cancels reduce-only take-profit and stop-loss exits. Off by
            default: those only protect positions, and a halted desk needs them most.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    on_loss_halt: bool = True
    on_reconciliation_mismatch: bool = True
    on_unresolved_order: bool = Field(default=True, description=(
        "What happens when an order was sent to a live exchange, its answer was lost, and it "
        "was still not found by its client order id when its lookup window (10 minutes from "
        "sending) closed. On (the default): the kill switch trips, because after ten minutes "
        "of lookups the order may still exist on the exchange (booked, and filling) while "
        "Kestrel trades on as if it did not: real money at risk until a person has checked the "
        "exchange's order history. Off: the person is alerted on every channel and trading "
        "goes on; choose this when a short exchange outage should not halt the desk, knowing "
        "that a fill of such an order still shows as a balance mismatch. The window absorbs "
        "ordinary delays (an exchange that shows a new order late), so a single lost answer "
        "whose order appears within it never trips the switch. Only while "
        "on_reconciliation_mismatch is on."))
    unknown_outcomes_limit: int = Field(default=3, ge=0, le=1000)
    cancel_exits: bool = False


class RiskConfig(BaseModel):
    """The limits of every rule. Defaults suit an agent trading a share of a paper account.

    Attributes:
        max_position_weight: 20% of equity per symbol (the design's own example).
        max_order_notional: 50,000 in the quote currency per order.
        max_open_positions: 10 symbols at once.
        max_open_orders: 50 open orders.
        daily_loss_limit: 5% below the UTC day's starting equity blocks entries for the day.
        max_drawdown_halt: 25% below peak equity halts entries.
        allowed_symbols: empty, i.e. every symbol the market serves.
        limit_price_band: limit/stop prices within ±10% of the last price.
        min_cash_reserve: none.
        agent_budget: no per-agent cap unless allotments are given.
        kill_switch: trips on the loss halts, a reconciliation mismatch (an order whose
            outcome stayed unknown through its lookup window included) and 3 unknown order
            outcomes in a row; a trip keeps take-profit and stop-loss exits.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed_symbols: AllowedSymbolsConfig = AllowedSymbolsConfig()
    max_drawdown_halt: MaxDrawdownHaltConfig = MaxDrawdownHaltConfig()
    daily_loss_limit: DailyLossLimitConfig = DailyLossLimitConfig()
    limit_price_band: LimitPriceBandConfig = LimitPriceBandConfig()
    max_order_notional: MaxOrderNotionalConfig = MaxOrderNotionalConfig()
    max_open_orders: MaxOpenOrdersConfig = MaxOpenOrdersConfig()
    max_open_positions: MaxOpenPositionsConfig = MaxOpenPositionsConfig()
    max_position_weight: MaxPositionWeightConfig = MaxPositionWeightConfig()
    min_cash_reserve: MinCashReserveConfig = MinCashReserveConfig()
    agent_budget: AgentBudgetConfig = AgentBudgetConfig()
    kill_switch: KillSwitchConfig = KillSwitchConfig()


def all_in_backtest_config() -> RiskConfig:
    """The profile of a single-strategy backtest that goes all-in and all-out (``sma_cross``).

    A whole-account position is the strategy's design, so the weight limit is 100% and the order
    notional cap is lifted; the loss halts are off so the run measures the strategy, not the guard.
    Every other rule keeps its default and every order still passes the guard.
    """
    return RiskConfig(
        max_position_weight=MaxPositionWeightConfig(limit_pct=Decimal(100)),
        max_order_notional=MaxOrderNotionalConfig(enabled=False),
        daily_loss_limit=DailyLossLimitConfig(enabled=False),
        max_drawdown_halt=MaxDrawdownHaltConfig(enabled=False),
    )
