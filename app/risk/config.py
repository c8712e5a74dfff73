"""``RiskConfig``: every rule's limits with defaults in one place, and ``build_guard`` from it.

One frozen pydantic model holds one sub-config per rule, so a risk profile is a plain mapping
(YAML, the settings file) validated once, and an unknown or misspelt key is an error rather than
a limit that silently does not apply. The rule order here is the order the guard checks them in:
cheap, always-decisive rules (symbol, halts) first, sizing rules after.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from pydantic import BaseModel, ConfigDict

from app.risk.guard import RiskDecisionRecorder, RiskGuard, RiskRule
from app.risk.kill_switch import KillSwitchConfig, KillSwitchRule, Trip
from app.risk.rules import (
    AgentBudget,
    AgentBudgetConfig,
    AllowedSymbols,
    AllowedSymbolsConfig,
    DailyLossLimit,
    DailyLossLimitConfig,
    LimitPriceBand,
    LimitPriceBandConfig,
    MaxDrawdownHalt,
    MaxDrawdownHaltConfig,
    MaxOpenOrders,
    MaxOpenOrdersConfig,
    MaxOpenPositions,
    MaxOpenPositionsConfig,
    MaxOrderNotional,
    MaxOrderNotionalConfig,
    MaxPositionWeight,
    MaxPositionWeightConfig,
    MinCashReserve,
    MinCashReserveConfig,
)


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
        kill_switch: trips on the loss halts, a reconciliation mismatch and 3 unknown order
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


def build_rules(
    config: RiskConfig, active_trip: Callable[[], Trip | None] | None = None
) -> list[RiskRule]:
    """The enabled rules of ``config``, in checking order.

    Args:
        active_trip: the kill switch's trip in force (``KillSwitchLog.active``); given, the kill
            switch is the first rule checked. Backtests of a strategy have no kill switch.
    """
    builders: list[tuple[bool, RiskRule]] = [
        (active_trip is not None, KillSwitchRule(active_trip or (lambda: None))),
        (config.allowed_symbols.enabled, AllowedSymbols(config.allowed_symbols)),
        (config.max_drawdown_halt.enabled, MaxDrawdownHalt(config.max_drawdown_halt)),
        (config.daily_loss_limit.enabled, DailyLossLimit(config.daily_loss_limit)),
        (config.limit_price_band.enabled, LimitPriceBand(config.limit_price_band)),
        (config.max_order_notional.enabled, MaxOrderNotional(config.max_order_notional)),
        (config.max_open_orders.enabled, MaxOpenOrders(config.max_open_orders)),
        (config.max_open_positions.enabled, MaxOpenPositions(config.max_open_positions)),
        (config.max_position_weight.enabled, MaxPositionWeight(config.max_position_weight)),
        (config.min_cash_reserve.enabled, MinCashReserve(config.min_cash_reserve)),
        (config.agent_budget.enabled, AgentBudget(config.agent_budget)),
    ]
    return [rule for enabled, rule in builders if enabled]


def build_guard(
    config: RiskConfig,
    recorder: RiskDecisionRecorder,
    active_trip: Callable[[], Trip | None] | None = None,
) -> RiskGuard:
    """A guard with every enabled rule of ``config`` (and the kill switch, given its trip in
    force), recording through ``recorder``."""
    return RiskGuard(build_rules(config, active_trip), recorder)
