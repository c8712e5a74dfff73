"""The guard: first failing rule refuses, every decision is recorded, exits are never blocked."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ValidationError

from app.config.risk import (
    AllowedSymbolsConfig,
    MaxOpenOrdersConfig,
    MaxPositionWeightConfig,
    RiskConfig,
    all_in_backtest_config,
)
from app.domain.errors import RiskRejection
from app.domain.trading import Side
from app.risk import MemoryDecisionRecorder, RiskGuard, build_guard
from app.risk.config import build_rules
from app.risk.rules import MaxPositionWeight
from tests.unit.risk.factories import intent, view


def test_accepted_order_is_recorded_as_accepted() -> None:
    recorder = MemoryDecisionRecorder()
    guard = build_guard(RiskConfig(), recorder)
    guard.check(intent(quantity="0.1"), view())
    [decision] = recorder.decisions
    assert decision.accepted and decision.rule == "" and decision.agent_id == "trader-1"
    assert decision.notional == Decimal("4000.0")


def test_refusal_raises_risk_rejection_and_is_recorded_with_rule_and_reason() -> None:
    recorder = MemoryDecisionRecorder()
    guard = build_guard(RiskConfig(), recorder)
    with pytest.raises(RiskRejection) as caught:
        guard.check(intent(quantity="0.575"), view())  # 23% of 100,000
    assert caught.value.rule == "max_position_weight"
    assert caught.value.reason == "Position weight would be 23.0% > limit 20.0% for BTC/USDT"
    [decision] = recorder.decisions
    assert not decision.accepted
    assert decision.rule == "max_position_weight"
    assert decision.reason == caught.value.reason


def test_first_failing_rule_in_order_is_the_one_reported() -> None:
    recorder = MemoryDecisionRecorder()
    config = RiskConfig(allowed_symbols=AllowedSymbolsConfig(symbols=("ETH/USDT",)))
    guard = build_guard(config, recorder)
    # violates both allowed_symbols and max_position_weight; allowed_symbols is checked first
    with pytest.raises(RiskRejection) as caught:
        guard.check(intent(quantity="5"), view())
    assert caught.value.rule == "allowed_symbols"


def test_exits_are_never_blocked_even_when_every_rule_would_refuse() -> None:
    recorder = MemoryDecisionRecorder()
    config = RiskConfig(allowed_symbols=AllowedSymbolsConfig(symbols=("ETH/USDT",)))
    guard = build_guard(config, recorder)
    crashed = view(equity="50000", cash="0", day_start_equity="100000", peak_equity="100000",
                   open_orders=500)
    close = intent(side=Side.SELL, quantity="100", reduces_position=True)
    guard.check(close, crashed)
    [decision] = recorder.decisions
    assert decision.accepted
    assert "never blocked" in decision.reason
    with pytest.raises(RiskRejection):
        guard.check(intent(), crashed)  # the same account refuses an entry


def test_all_in_backtest_profile_accepts_a_whole_account_buy() -> None:
    recorder = MemoryDecisionRecorder()
    guard = build_guard(all_in_backtest_config(), recorder)
    guard.check(intent(quantity="2.4975"), view())  # 99,900 of 100,000
    assert recorder.decisions[-1].accepted
    with pytest.raises(RiskRejection):
        build_guard(RiskConfig(), MemoryDecisionRecorder()).check(intent(quantity="2.4975"), view())


def test_disabled_rules_are_left_out() -> None:
    names = [rule.name for rule in build_rules(all_in_backtest_config())]
    assert "max_drawdown_halt" not in names and "daily_loss_limit" not in names
    assert "max_position_weight" in names
    assert len(build_rules(RiskConfig())) == 10


def test_risk_config_rejects_unknown_keys_at_every_level() -> None:
    with pytest.raises(ValidationError):
        RiskConfig.model_validate({"max_positon_weight": {"limit_pct": 10}})
    with pytest.raises(ValidationError):
        RiskConfig.model_validate({"max_position_weight": {"limit": 10}})
    parsed = RiskConfig.model_validate({"max_position_weight": {"limit_pct": "12.5"}})
    assert parsed.max_position_weight.limit_pct == Decimal("12.5")


def test_guard_refuses_two_rules_with_the_same_name() -> None:
    rule = MaxPositionWeight(MaxPositionWeightConfig())
    with pytest.raises(ValueError, match="max_position_weight"):
        RiskGuard([rule, rule], MemoryDecisionRecorder())


def test_an_admitted_order_counts_as_pending_until_the_broker_has_answered() -> None:
    """Two 15% buys accepted in the same moment, before either reaches the broker's book."""
    recorder = MemoryDecisionRecorder()
    guard = build_guard(RiskConfig(), recorder)
    fifteen = intent(quantity="0.375")  # 15,000 of 100,000
    same_moment = view()  # neither order is open at the broker yet
    with guard.admit(fifteen, same_moment):
        with pytest.raises(RiskRejection) as caught:
            guard.check(fifteen, same_moment)
        assert caught.value.rule == "max_position_weight"
        assert "30.0% > limit 20.0%" in caught.value.reason
    # once the broker has answered, its own view holds the order (or nothing, if it refused)
    guard.check(fifteen, same_moment)
    assert [d.accepted for d in recorder.decisions] == [True, False, True]


def test_an_order_the_broker_refuses_is_no_longer_pending() -> None:
    guard = build_guard(RiskConfig(), MemoryDecisionRecorder())
    fifteen = intent(quantity="0.375")
    with pytest.raises(ConnectionError), guard.admit(fifteen, view()):
        raise ConnectionError("the venue did not answer")
    guard.check(fifteen, view())  # nothing left in flight


def test_admission_counts_in_flight_orders_for_the_order_count_too() -> None:
    guard = build_guard(RiskConfig(max_open_orders=MaxOpenOrdersConfig(limit=2)),
                        MemoryDecisionRecorder())
    small = intent(quantity="0.001")
    with guard.admit(small, view()), guard.admit(small, view()):
        with pytest.raises(RiskRejection) as caught:
            guard.check(small, view())
        assert caught.value.rule == "max_open_orders"
