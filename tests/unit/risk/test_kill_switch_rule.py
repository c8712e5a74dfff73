"""The kill switch as a Risk Guard rule: while tripped every entry is refused, first, naming when,
why and by whom; exits still pass; armed, it changes nothing."""

from __future__ import annotations

import pytest

from app.config.risk import AllowedSymbolsConfig, RiskConfig
from app.domain.errors import OperationalError, RiskRejection
from app.domain.kill_switch import Trip, TripCause
from app.domain.trading import OrderType, Side
from app.risk.config import build_guard
from app.risk.guard import MemoryDecisionRecorder
from app.risk.kill_switch import RULE_NAME
from tests.unit.risk.factories import NOON_MS, intent, view

TRIP = Trip(
    trip_id=7, cause=TripCause.MANUAL, cause_key="", reason="the model is misbehaving",
    by="the person in the Kestrel window", tripped_ms=NOON_MS + 5_000, market_ms=NOON_MS,
)


def _guard(trip: Trip | None, config: RiskConfig | None = None):
    recorder = MemoryDecisionRecorder()
    return build_guard(config or RiskConfig(), recorder, lambda: trip), recorder


@pytest.mark.parametrize("order", [
    intent(),
    intent(order_type=OrderType.LIMIT, price="39000"),
    intent(order_type=OrderType.STOP, stop_price="41000"),
    intent(side=Side.SELL),  # a sell that is not an exit (shorting): an entry too
    intent(quantity="0.00001"),
])
def test_a_tripped_switch_refuses_every_entry_naming_when_why_and_who(order):
    guard, recorder = _guard(TRIP)
    with pytest.raises(RiskRejection) as caught:
        guard.check(order, view())
    refusal = caught.value
    assert refusal.rule == RULE_NAME == "kill_switch"
    assert "2023-11-15 12:00:05 UTC" in refusal.reason
    assert "the person in the Kestrel window" in refusal.reason
    assert "the model is misbehaving" in refusal.reason
    assert "resets it in the Kestrel window" in refusal.reason
    assert refusal.details["tripped_by"] == "the person in the Kestrel window"
    assert refusal.details["cause"] == "manual"
    assert [(d.accepted, d.rule) for d in recorder.decisions] == [(False, "kill_switch")]


def test_exits_pass_while_the_switch_is_tripped():
    guard, recorder = _guard(TRIP)
    for exit_order in (intent(side=Side.SELL, reduces_position=True),
                       intent(side=Side.SELL, order_type=OrderType.STOP, stop_price="39000",
                              reduces_position=True)):
        guard.check(exit_order, view(positions={"BTC/USDT": ("0.1", "40000", "40000")}))
    assert [d.accepted for d in recorder.decisions] == [True, True]


def test_the_switch_is_checked_before_every_other_rule():
    config = RiskConfig(allowed_symbols=AllowedSymbolsConfig(symbols=("ETH/USDT",)))
    guard, _ = _guard(TRIP, config)
    with pytest.raises(RiskRejection) as caught:
        guard.check(intent(symbol="BTC/USDT"), view())
    assert caught.value.rule == "kill_switch"
    assert guard.rules[0].name == "kill_switch"


def test_an_armed_switch_leaves_the_decision_to_the_other_rules():
    guard, recorder = _guard(None)
    guard.check(intent(), view())
    with pytest.raises(RiskRejection) as caught:
        guard.check(intent(quantity="1"), view())  # 40% of equity > the 20% weight limit
    assert caught.value.rule == "max_position_weight"
    assert [d.accepted for d in recorder.decisions] == [True, False]


def test_a_guard_built_without_a_switch_has_no_such_rule():
    guard = build_guard(RiskConfig(), MemoryDecisionRecorder())
    assert "kill_switch" not in [rule.name for rule in guard.rules]


def test_a_trip_in_a_replay_shows_the_market_time_beside_the_wall_clock():
    replayed = Trip(1, TripCause.DRAWDOWN, "drawdown:100", "drawdown 26%", "Kestrel",
                    tripped_ms=1_800_000_000_000, market_ms=NOON_MS)
    assert replayed.when() == "2027-01-15 08:00:00 UTC (market time 2023-11-15 12:00:00 UTC)"
    assert TRIP.when() == "2023-11-15 12:00:05 UTC"
    assert replayed.halt_reason().startswith("the kill switch was tripped 2027-01-15")


def test_a_misspelt_kill_switch_setting_is_an_error_not_a_silent_default():
    from app.config import settings_from_mapping

    with pytest.raises(OperationalError, match="risk.kill_switch.unknown_outcome_limit"):
        settings_from_mapping({"risk": {"kill_switch": {"unknown_outcome_limit": 2}}})
    settings = settings_from_mapping({"risk": {"kill_switch": {"unknown_outcomes_limit": 2}}})
    assert settings.risk.kill_switch.unknown_outcomes_limit == 2
    assert settings.risk.kill_switch.cancel_exits is False
