"""The Analyst rules: the template's words as code, checked on hand-built indicator readings."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.agents.rule_engine.signals import (
    MAX_STOP_FRACTION,
    Candle,
    Readings,
    assess_mean_reversion,
    assess_trend,
    decimals_of,
)
from app.memory.roles import Signal

D = Decimal
OB, OS = D(70), D(30)


def candles(closes: list[str], spread: str = "10") -> list[Candle]:
    out = []
    for i, close in enumerate(closes):
        c = D(close)
        out.append(Candle(i * 3_600_000, c, c + D(spread), c - D(spread), c, D("5.5")))
    return out


def macd(m: str, s: str) -> dict[str, Decimal]:
    return {"macd": D(m), "signal": D(s), "histogram": D(m) - D(s)}


def bands(lower: str, middle: str, upper: str, width: str = "2") -> dict[str, Decimal]:
    return {"lower": D(lower), "middle": D(middle), "upper": D(upper), "bandwidth": D(width),
            "percent": D("0.5")}


def readings(**overrides: object) -> Readings:
    base: dict[str, object] = {
        "candles": candles(["100"] * 9 + ["101.5"]),
        "rsi": (D(48), D(52)),
        "macd": (macd("-0.1", "0"), macd("0.2", "0.05")),  # crossed above on the last candle
        "bbands": (bands("97", "100", "103"), bands("97", "100", "103")),
        "ema": (D("99.0"), D("99.5")),  # close above a rising EMA: uptrend
    }
    base.update(overrides)
    return Readings(**base)  # type: ignore[arg-type]


def test_a_macd_cross_up_in_an_uptrend_with_rsi_mid_range_is_a_buy() -> None:
    a = assess_trend(readings(), OB, OS)
    assert a.signal is Signal.BUY and a.trend == "UP"
    assert a.confidence == D("0.75")  # cross 0.35 + trend 0.25 + RSI 40-60 rising 0.15
    assert a.stop_loss is not None and a.take_profit is not None
    assert a.stop_loss < a.price < a.take_profit
    assert a.take_profit - a.price == 2 * (a.price - a.stop_loss)


def test_a_close_beyond_the_upper_band_adds_confidence() -> None:
    a = assess_trend(readings(bbands=(bands("97", "100", "103"), bands("98", "100", "101"))),
                     OB, OS)
    assert a.signal is Signal.BUY and a.confidence == D("0.90")


def test_a_cross_against_the_trend_is_hold_and_says_so() -> None:
    a = assess_trend(readings(ema=(D("103"), D("102"))), OB, OS)  # close below a falling EMA
    assert a.signal is Signal.HOLD and a.trend == "DOWN"
    assert a.confidence == D("0.50")  # the cross and the RSI, but not the trend filter
    assert any("against the trend" in r for r in a.reasons)
    assert a.stop_loss is None


def test_an_overbought_rsi_blocks_a_buy() -> None:
    a = assess_trend(readings(rsi=(D(65), D(75))), OB, OS)
    assert a.signal is Signal.HOLD and any("beyond 70" in r for r in a.reasons)


def test_a_cross_down_in_a_downtrend_is_a_sell_with_the_stop_above() -> None:
    r = readings(
        candles=candles(["100"] * 9 + ["98.5"]), rsi=(D(52), D(48)),
        macd=(macd("0.1", "0"), macd("-0.2", "-0.05")), ema=(D("101"), D("100.5")),
    )
    a = assess_trend(r, OB, OS)
    assert a.signal is Signal.SELL and a.trend == "DOWN"
    assert a.take_profit < a.price < a.stop_loss  # type: ignore[operator]


def test_no_cross_is_hold() -> None:
    a = assess_trend(readings(macd=(macd("0.2", "0.1"), macd("0.3", "0.1"))), OB, OS)
    assert a.signal is Signal.HOLD and a.confidence == D("0.25")


def test_the_trend_stop_is_never_more_than_four_percent_away() -> None:
    far = candles(["50"] + ["100"] * 8 + ["101.5"])  # a swing low 50% below
    a = assess_trend(readings(candles=far, bbands=(bands("40", "60", "103"),
                                                    bands("40", "60", "103"))), OB, OS)
    assert a.signal is Signal.BUY
    assert (a.price - a.stop_loss) / a.price <= MAX_STOP_FRACTION + D("0.0001")  # type: ignore[operator]


def test_mean_reversion_buys_a_close_at_the_lower_band_with_rsi_oversold() -> None:
    r = readings(
        candles=candles(["100"] * 9 + ["96"]), rsi=(D(30), D(25)),
        macd=(macd("-1", "-0.5"), macd("-0.9", "-0.6")),  # histogram -0.5 -> -0.3: turning up
        bbands=(bands("96.5", "100", "103.5", "7"), bands("97", "100", "103", "6")),
    )
    a = assess_mean_reversion(r, OB, OS)
    assert a.signal is Signal.BUY
    assert a.confidence == D("0.75")  # 0.5 + 5 points x 0.02 + 0.15 for the histogram
    assert a.take_profit == D("100") and a.stop_loss < D(96)  # type: ignore[operator]


def test_mean_reversion_loses_confidence_when_price_walks_the_band_in_a_widening_trend() -> None:
    r = readings(
        candles=candles(["100"] * 8 + ["96", "95"]), rsi=(D(28), D(27)),
        macd=(macd("-1", "-0.5"), macd("-1.5", "-0.6")),
        bbands=(bands("96.5", "100", "103.5", "6"), bands("95.5", "100", "104.5", "9")),
    )
    a = assess_mean_reversion(r, OB, OS)
    assert a.signal is Signal.BUY and a.confidence == D("0.41")  # 0.5 + 0.06 - 0.15
    assert any("strong trend" in reason for reason in a.reasons)


def test_mean_reversion_holds_inside_the_bands() -> None:
    a = assess_mean_reversion(readings(), OB, OS)
    assert a.signal is Signal.HOLD and a.stop_loss is None


@pytest.mark.parametrize(("prices", "places"), [(["8524.3", "8462"], 1), (["0.00012345"], 8),
                                                (["100"], 0)])
def test_prices_are_rounded_to_the_precision_the_data_shows(prices: list[str], places: int,
                                                            ) -> None:
    assert decimals_of(candles(prices, spread="0")) == places


def test_every_assessment_keeps_the_indicator_values_it_was_made_from() -> None:
    a = assess_trend(readings(labels={"rsi": "RSI(14)", "ema": "EMA(50)"}), OB, OS)
    assert a.indicators["RSI(14)"] == "52" and a.indicators["EMA(50)"] == "99.5"
    assert "last complete candle O 101.5" in a.observations
