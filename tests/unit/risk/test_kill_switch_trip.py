"""A kill switch trip in words, and its settings: what every refusal and banner says of it."""

from __future__ import annotations

import pytest

from app.domain.errors import OperationalError
from app.domain.kill_switch import Trip, TripCause
from tests.unit.risk.factories import NOON_MS

TRIP = Trip(
    trip_id=7, cause=TripCause.MANUAL, cause_key="", reason="the model is misbehaving",
    by="the person in the Kestrel window", tripped_ms=NOON_MS + 5_000, market_ms=NOON_MS,
)


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
