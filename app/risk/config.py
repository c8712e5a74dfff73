"""``build_guard``: the Risk Guard with the rules a ``RiskConfig`` enables, in checking order.

The limits themselves are settings (``app.config.risk``), validated with the rest of the
settings file; this module turns them into rules. The rule order here is the order the guard
checks them in: cheap, always-decisive rules (symbol, halts) first, sizing rules after.
"""

from __future__ import annotations

from app.config.risk import RiskConfig
from app.risk.guard import RiskDecisionRecorder, RiskGuard, RiskRule
from app.risk.rules import (
    AgentBudget,
    AllowedSymbols,
    DailyLossLimit,
    LimitPriceBand,
    MaxDrawdownHalt,
    MaxOpenOrders,
    MaxOpenPositions,
    MaxOrderNotional,
    MaxPositionWeight,
    MinCashReserve,
)


def build_rules(config: RiskConfig) -> list[RiskRule]:
    """The enabled rules of ``config``, in checking order. (The kill switch's entry block is
    order entry's step before the guard: ``app.trading.entry``.)"""
    builders: list[tuple[bool, RiskRule]] = [
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


def build_guard(config: RiskConfig, recorder: RiskDecisionRecorder) -> RiskGuard:
    """A guard with every enabled rule of ``config``, recording through ``recorder``."""
    return RiskGuard(build_rules(config), recorder)
