"""Each entry rule: passes inside its limit, refuses outside it with the numbers in plain words."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from pydantic import ValidationError

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
from app.domain.trading import OrderType, Side
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
from tests.unit.risk.factories import NOON_MS, intent, pending_buy, pending_exit, view

DAY_MS = 86_400_000


def test_position_weight_refusal_reads_like_the_design_example() -> None:
    rule = MaxPositionWeight(MaxPositionWeightConfig(limit_pct=Decimal(20)))
    # 10,000 held + 13,000 more on 100,000 equity = 23%
    found = rule.evaluate(
        intent(quantity="0.325"), view(positions={"BTC/USDT": ("0.25", "38000", "40000")})
    )
    assert found is not None
    assert found.reason == "Position weight would be 23.0% > limit 20.0% for BTC/USDT"
    assert found.details["limit_pct"] == "20"


def test_position_weight_within_limit_passes_and_counts_the_limit_price() -> None:
    rule = MaxPositionWeight(MaxPositionWeightConfig(limit_pct=Decimal(20)))
    assert rule.evaluate(intent(quantity="0.5"), view()) is None  # exactly 20%
    # a limit buy is valued at its limit price, not the last price
    over = rule.evaluate(intent(quantity="0.5", order_type=OrderType.LIMIT, price="40100"), view())
    assert over is not None and "20.1% > limit 20.0%" in over.reason


def test_position_weight_refuses_when_equity_is_gone() -> None:
    rule = MaxPositionWeight(MaxPositionWeightConfig())
    found = rule.evaluate(intent(), view(equity="0", cash="0"))
    assert found is not None and "Equity is 0 USDT" in found.reason


def test_order_notional_above_limit_is_refused_with_both_amounts() -> None:
    rule = MaxOrderNotional(MaxOrderNotionalConfig(limit=Decimal(10_000)))
    assert rule.evaluate(intent(quantity="0.25"), view()) is None  # 10,000 exactly
    found = rule.evaluate(intent(quantity="0.3"), view())
    assert found is not None
    assert found.reason == "Order notional 12000 USDT > limit 10000 USDT for BTC/USDT"


def test_new_symbol_beyond_max_open_positions_is_refused_but_adding_to_one_is_not() -> None:
    rule = MaxOpenPositions(MaxOpenPositionsConfig(limit=2))
    held = {"BTC/USDT": ("0.1", "1", "1"), "ETH/USDT": ("1", "1", "1")}
    found = rule.evaluate(intent(symbol="SOL/USDT"), view(positions=held))
    assert found is not None
    assert found.reason == "Opening SOL/USDT would make 3 open positions > limit 2 (2 held)"
    assert rule.evaluate(intent(symbol="ETH/USDT"), view(positions=held)) is None
    flat = {"BTC/USDT": ("0.1", "1", "1"), "ETH/USDT": ("0", "1", "1")}
    assert rule.evaluate(intent(symbol="SOL/USDT"), view(positions=flat)) is None


def test_max_open_orders_counts_the_new_order() -> None:
    rule = MaxOpenOrders(MaxOpenOrdersConfig(limit=3))
    assert rule.evaluate(intent(), view(open_orders=2)) is None
    found = rule.evaluate(intent(), view(open_orders=3))
    assert found is not None and "4 open orders > limit 3" in found.reason


def test_daily_loss_limit_blocks_entries_for_the_rest_of_the_utc_day() -> None:
    rule = DailyLossLimit(DailyLossLimitConfig(limit_pct=Decimal(5)))
    day_start = (NOON_MS // DAY_MS) * DAY_MS
    assert rule.evaluate(intent(), view(equity="96000", day_start_equity="100000")) is None
    found = rule.evaluate(intent(), view(equity="94000", day_start_equity="100000"))
    assert found is not None
    assert "equity fell 6.0% below the day's start 100000 USDT (limit 5.0%)" in found.reason
    assert "blocked until 2023-11-16T00:00:00Z" in found.reason
    # equity recovers later the same day: still blocked
    later = day_start + DAY_MS - 1
    again = rule.evaluate(intent(), view(equity="99000", day_start_equity="100000", now_ms=later))
    assert again is not None
    # next UTC day: allowed again
    assert rule.evaluate(
        intent(), view(equity="94000", day_start_equity="94000", now_ms=day_start + DAY_MS)
    ) is None


def test_max_drawdown_halt_measures_from_peak_equity() -> None:
    rule = MaxDrawdownHalt(MaxDrawdownHaltConfig(limit_pct=Decimal(25)))
    assert rule.evaluate(intent(), view(equity="76000", peak_equity="100000")) is None
    found = rule.evaluate(intent(), view(equity="75000", peak_equity="100000"))
    assert found is not None
    assert found.reason == (
        "Trading halted: drawdown 25.0% from the peak equity 100000 USDT >= limit 25.0%"
    )


def test_allowed_symbols_refuses_others_and_empty_list_allows_all() -> None:
    rule = AllowedSymbols(AllowedSymbolsConfig(symbols=("BTC/USDT", "ETH/USDT")))
    assert rule.evaluate(intent(symbol="eth/usdt"), view()) is None
    found = rule.evaluate(intent(symbol="DOGE/USDT"), view())
    assert found is not None
    assert found.reason == "DOGE/USDT is not in the allowed symbols list (BTC/USDT, ETH/USDT)"
    assert AllowedSymbols(AllowedSymbolsConfig()).evaluate(intent(symbol="X/Y"), view()) is None


def test_limit_price_far_from_last_price_is_refused() -> None:
    rule = LimitPriceBand(LimitPriceBandConfig(band_pct=Decimal(10)))
    ok = intent(order_type=OrderType.LIMIT, price="36000")  # exactly -10%
    assert rule.evaluate(ok, view()) is None
    far = intent(order_type=OrderType.LIMIT, price="4000")  # a slipped digit
    found = rule.evaluate(far, view())
    assert found is not None
    assert found.reason == (
        "Limit price 4000 is 90.0% from the last price 40000 > band ±10.0% for BTC/USDT"
    )
    stop = intent(order_type=OrderType.STOP, stop_price="50000")
    found_stop = rule.evaluate(stop, view())
    assert found_stop is not None and found_stop.reason.startswith("Stop price 50000 is 25.0%")
    assert rule.evaluate(intent(), view()) is None  # market orders have no price to check


def test_cash_reserve_counts_open_buy_orders_and_the_new_order() -> None:
    rule = MinCashReserve(MinCashReserveConfig(amount=Decimal(5000)))
    held_back = view(cash="100000", pending=(pending_buy(reserved="15000"),))
    assert rule.evaluate(intent(quantity="2"), held_back) is None  # 100000 - 15000 - 80000 = 5000
    found = rule.evaluate(
        intent(quantity="2"), view(cash="100000", pending=(pending_buy(reserved="16000"),))
    )
    assert found is not None
    assert found.reason == (
        "Cash after the order would be 4000 USDT < reserve 5000 USDT (cash 100000, held by open "
        "orders 16000, this order 80000)"
    )
    assert rule.evaluate(intent(side=Side.SELL, quantity="99"), view(cash="0")) is None


def test_cash_reserve_as_share_of_equity() -> None:
    rule = MinCashReserve(MinCashReserveConfig(pct_of_equity=Decimal(10)))
    found = rule.evaluate(intent(quantity="2.3"), view(equity="100000", cash="100000"))
    assert found is not None and "< reserve 10000 USDT" in found.reason


def test_agent_budget_caps_each_agent_at_its_allotment() -> None:
    rule = AgentBudget(AgentBudgetConfig(allotments={"trader-1": Decimal(20_000)}))
    shared = view(agent_cost={"trader-1": "12000", "trader-2": "50000"})
    assert rule.evaluate(intent(quantity="0.2"), shared) is None  # 12000 + 8000
    found = rule.evaluate(intent(quantity="0.25"), shared)
    assert found is not None
    assert found.reason == (
        "Agent trader-1 would commit 22000 USDT (12000 committed + 10000 this order) > its "
        "allotment 20000 USDT"
    )
    # an agent without an allotment and no default is not capped
    assert rule.evaluate(intent(agent_id="trader-2", quantity="10"), shared) is None
    capped = AgentBudget(AgentBudgetConfig(default=Decimal(1000)))
    assert capped.evaluate(intent(agent_id="new", quantity="0.1"), view()) is not None


@pytest.mark.parametrize(
    ("config_type", "bad"),
    [
        (MaxPositionWeightConfig, {"limit_pct": 20, "limt": 5}),
        (MaxPositionWeightConfig, {"limit_pct": 0}),
        (MaxPositionWeightConfig, {"limit_pct": 101}),
        (MaxOrderNotionalConfig, {"limit": -1}),
        (MaxOpenPositionsConfig, {"limit": 0}),
        (DailyLossLimitConfig, {"limit_pct": 100}),
        (LimitPriceBandConfig, {"band_pct": "abc"}),
        (MinCashReserveConfig, {"amount": -5}),
        (AgentBudgetConfig, {"default": -1}),
    ],
)
def test_rule_configs_reject_unknown_keys_and_out_of_range_values(
    config_type: type, bad: dict[str, object]
) -> None:
    with pytest.raises(ValidationError):
        config_type(**bad)


def test_rule_configs_are_frozen() -> None:
    config = MaxOpenOrdersConfig(limit=5)
    with pytest.raises(ValidationError):
        config.limit = 6  # type: ignore[misc]


def test_agent_budget_refuses_a_negative_allotment() -> None:
    with pytest.raises(ValueError, match="trader-1"):
        AgentBudget(AgentBudgetConfig(allotments={"trader-1": Decimal(-1)}))


def test_a_weight_just_over_the_limit_never_prints_equal_to_it() -> None:
    rule = MaxPositionWeight(MaxPositionWeightConfig(limit_pct=Decimal(20)))
    found = rule.evaluate(intent(quantity="0.50001"), view())  # 20.0004%
    assert found is not None
    assert found.reason.startswith("Position weight would be 20.0004% > limit 20.0%")


# -- pending orders count towards every exposure limit --------------------------------------------


def test_position_weight_counts_the_open_buys_of_the_symbol() -> None:
    """Three 19% buys before any fill: the second already makes 38%."""
    rule = MaxPositionWeight(MaxPositionWeightConfig(limit_pct=Decimal(20)))
    nineteen = intent(quantity="0.475")  # 19,000 of 100,000
    assert rule.evaluate(nineteen, view()) is None
    one_open = view(pending=(pending_buy(reserved="19000"),))
    found = rule.evaluate(nineteen, one_open)
    assert found is not None
    assert found.reason == (
        "Position weight would be 38.0% > limit 20.0% for BTC/USDT (counting 19000 USDT held by "
        "open orders)"
    )
    assert found.details["pending_orders"] == "19000"
    # open buys of other symbols, and open sells, are not this symbol's exposure
    elsewhere = view(pending=(pending_buy("ETH/USDT", "19000"), pending_exit("BTC/USDT")))
    assert rule.evaluate(nineteen, elsewhere) is None


def test_position_weight_counts_what_the_broker_reserves_not_just_the_notional() -> None:
    rule = MaxPositionWeight(MaxPositionWeightConfig(limit_pct=Decimal(20)))
    exactly = intent(quantity="0.5")  # notional 20,000: exactly 20%
    assert rule.evaluate(exactly, view()) is None
    with_fee = replace(exactly, reserve=Decimal("20024.01"))  # fee and slippage held back too
    found = rule.evaluate(with_fee, view())
    assert found is not None and found.reason.startswith("Position weight would be 20.02%")


def test_open_positions_count_symbols_whose_buys_have_not_filled_yet() -> None:
    rule = MaxOpenPositions(MaxOpenPositionsConfig(limit=2))
    one_held_one_waiting = view(
        positions={"BTC/USDT": ("0.1", "1", "1")}, pending=(pending_buy("ETH/USDT", "100"),)
    )
    found = rule.evaluate(intent(symbol="SOL/USDT"), one_held_one_waiting)
    assert found is not None
    assert found.reason == (
        "Opening SOL/USDT would make 3 open positions > limit 2 (1 held, counting 1 with open buy "
        "orders)"
    )
    # adding to the symbol that is waiting opens nothing new
    assert rule.evaluate(intent(symbol="ETH/USDT"), one_held_one_waiting) is None
    # an exit waiting on a held symbol is not a new position
    exits_only = view(positions={"BTC/USDT": ("0.1", "1", "1")}, pending=(pending_exit(),))
    assert rule.evaluate(intent(symbol="SOL/USDT"), exits_only) is None


def test_agent_budget_counts_the_agents_open_buys_and_no_one_elses() -> None:
    rule = AgentBudget(AgentBudgetConfig(allotments={"trader-1": Decimal(20_000)}))
    mine = view(pending=(pending_buy(reserved="15000", agent_id="trader-1"),
                         pending_buy(reserved="50000", agent_id="trader-2")))
    assert rule.evaluate(intent(quantity="0.125"), mine) is None  # 15000 + 5000
    found = rule.evaluate(intent(quantity="0.126"), mine)
    assert found is not None and "(15000 committed + 5040 this order)" in found.reason


# -- agent ids are case-insensitive --------------------------------------------------------------


def test_an_allotment_binds_the_agent_whatever_the_case_of_its_id() -> None:
    rule = AgentBudget(AgentBudgetConfig(allotments={"trader-1": Decimal(20_000)}))
    shouting = intent(agent_id="TRADER-1", quantity="0.6")  # 24,000 > 20,000
    found = rule.evaluate(shouting, view())
    assert found is not None and "allotment 20000 USDT" in found.reason
    # what the agent holds under one spelling counts under every other
    held = view(agent_cost={"trader-1": "15000"},
                pending=(pending_buy(reserved="4000", agent_id="Trader-1"),))
    found = rule.evaluate(intent(agent_id="TRADER-1", quantity="0.05"), held)  # +2000
    assert found is not None and "(19000 committed + 2000 this order)" in found.reason


def test_allotments_whose_ids_differ_only_in_case_are_refused() -> None:
    with pytest.raises(ValidationError, match="name the same agent"):
        AgentBudgetConfig(allotments={"trader-1": Decimal(100), "TRADER-1": Decimal(1_000_000)})
