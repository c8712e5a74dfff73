"""The Analyst rules as pure functions: indicator values in, a signal with confidence and stops out.

Each policy is the rule text of its template (``resources/agents/AnalystAgent_*.yaml``) written
as code, so what the prompt tells a model and what the rule engine does are the same strategy:

Trend (``rules-analyst-trend-v1``)
    Trend: close above EMA(trend) and the EMA rising is UP; below and falling is DOWN; otherwise
    SIDEWAYS. BUY: UP, MACD line crossing above its signal line on the last complete candle, RSI
    below the overbought level. SELL: DOWN, MACD crossing below, RSI above the oversold level.
    Confidence: the cross 0.35, the trend filter +0.25, RSI between 40 and 60 moving the signal's
    way +0.15, a close beyond the Bollinger band in the trend's direction +0.15. A cross against
    the trend is HOLD, whatever its confidence. Stop: the nearer of the 10-candle swing low/high
    and the middle band that is at least 0.3% away (else 2%), never more than 4% away, rounded
    toward the entry; take-profit twice the stop distance.

Mean reversion (``rules-analyst-meanreversion-v1``)
    BUY: close at or below the lower band and RSI at or below oversold; SELL: at or above the
    upper band and RSI at or above overbought. Confidence 0.5, +0.02 per RSI point beyond the
    level (at most +0.2), +0.15 when the MACD histogram turns back toward zero, -0.15 in a strong
    trend (bands widening while the previous close was beyond the same band). Take-profit at the
    middle band; stop beyond the candle's extreme by half the distance to the middle band (at
    most 4%).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

from app.domain.numbers import plain
from app.memory.roles import Signal

MIN_STOP_FRACTION = Decimal("0.003")
DEFAULT_STOP_FRACTION = Decimal("0.02")
MAX_STOP_FRACTION = Decimal("0.04")
SWING_CANDLES = 10
CENT = Decimal("0.01")


@dataclass(frozen=True, slots=True)
class Candle:
    time_ms: int
    open: Decimal
    high: Decimal
    low: Decimal
    close: Decimal
    volume: Decimal


@dataclass(frozen=True, slots=True)
class Readings:
    """The previous and current value of each indicator on the last two complete candles."""

    candles: Sequence[Candle]  # the last complete candles (SWING_CANDLES is enough), oldest first
    rsi: tuple[Decimal, Decimal]
    macd: tuple[Mapping[str, Decimal], Mapping[str, Decimal]]  # macd, signal, histogram
    bbands: tuple[Mapping[str, Decimal], Mapping[str, Decimal]]  # lower, middle, upper, bandwidth
    ema: tuple[Decimal, Decimal] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)  # e.g. {"rsi": "RSI(14)"}


@dataclass(frozen=True, slots=True)
class Assessment:
    signal: Signal
    confidence: Decimal
    trend: str  # UP, DOWN, SIDEWAYS
    reasons: tuple[str, ...]
    price: Decimal
    stop_loss: Decimal | None = None
    take_profit: Decimal | None = None
    support: tuple[Decimal, ...] = ()
    resistance: tuple[Decimal, ...] = ()
    indicators: Mapping[str, str] = field(default_factory=dict)
    observations: str = ""
    regime: str = ""


def decimals_of(candles: Sequence[Candle]) -> int:
    """The price precision the data shows: the most decimals any recent price carries."""
    most = 0
    for candle in candles[-SWING_CANDLES:]:
        for value in (candle.open, candle.high, candle.low, candle.close):
            exponent = value.normalize().as_tuple().exponent
            if isinstance(exponent, int):
                most = max(most, -exponent)
    return min(most, 8)


def _round(value: Decimal, places: int, rounding: str = ROUND_HALF_EVEN) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-places), rounding=rounding)


def _stop_round(stop: Decimal, side: Signal, places: int) -> Decimal:
    """Round a stop toward the entry, so rounding never widens the risk past its cap."""
    return _round(stop, places, ROUND_CEILING if side is Signal.BUY else ROUND_FLOOR)


def _confidence(value: Decimal) -> Decimal:
    return max(Decimal(0), min(Decimal(1), value)).quantize(CENT)


def _observations(candles: Sequence[Candle]) -> str:
    last = candles[-1]
    text = (
        f"last complete candle O {plain(last.open)} H {plain(last.high)} L {plain(last.low)} "
        f"C {plain(last.close)} V {plain(last.volume)}"
    )
    if len(candles) > 1 and candles[-2].close:
        change = (last.close - candles[-2].close) / candles[-2].close * 100
        text += f"; {change.quantize(CENT):+}% on the previous close"
    swing = candles[-SWING_CANDLES:]
    text += (
        f"; {len(swing)}-candle range {plain(min(c.low for c in swing))}"
        f"-{plain(max(c.high for c in swing))}"
    )
    return text


def _indicator_values(r: Readings) -> dict[str, str]:
    labels = r.labels
    values = {labels.get("rsi", "RSI"): plain(r.rsi[1])}
    macd = r.macd[1]
    values[labels.get("macd", "MACD")] = (
        f"macd {plain(macd['macd'])}, signal {plain(macd['signal'])}, "
        f"histogram {plain(macd['histogram'])}"
    )
    bands = r.bbands[1]
    values[labels.get("bbands", "BBANDS")] = (
        f"lower {plain(bands['lower'])}, middle {plain(bands['middle'])}, "
        f"upper {plain(bands['upper'])}"
    )
    if r.ema is not None:
        values[labels.get("ema", "EMA")] = plain(r.ema[1])
    return values


def _levels(r: Readings, places: int) -> tuple[tuple[Decimal, ...], tuple[Decimal, ...]]:
    swing = r.candles[-SWING_CANDLES:]
    bands = r.bbands[1]
    support = sorted({_round(min(c.low for c in swing), places), _round(bands["lower"], places)})
    resistance = sorted(
        {_round(max(c.high for c in swing), places), _round(bands["upper"], places)}
    )
    return tuple(support), tuple(resistance)


def _trend(close: Decimal, ema: tuple[Decimal, Decimal] | None) -> str:
    if ema is None:
        return "SIDEWAYS"
    previous, current = ema
    if close > current and current > previous:
        return "UP"
    if close < current and current < previous:
        return "DOWN"
    return "SIDEWAYS"


def trend_stop(r: Readings, side: Signal, places: int) -> tuple[Decimal, Decimal]:
    """Stop beyond the swing or the middle band, take-profit at twice the stop distance."""
    close = r.candles[-1].close
    swing = r.candles[-SWING_CANDLES:]
    middle = r.bbands[1]["middle"]
    if side is Signal.BUY:
        far_enough = close * (1 - MIN_STOP_FRACTION)
        candidates = [p for p in (min(c.low for c in swing), middle) if p < far_enough]
        stop = max(candidates) if candidates else close * (1 - DEFAULT_STOP_FRACTION)
        stop = max(stop, close * (1 - MAX_STOP_FRACTION))
        target = close + 2 * (close - stop)
    else:
        far_enough = close * (1 + MIN_STOP_FRACTION)
        candidates = [p for p in (max(c.high for c in swing), middle) if p > far_enough]
        stop = min(candidates) if candidates else close * (1 + DEFAULT_STOP_FRACTION)
        stop = min(stop, close * (1 + MAX_STOP_FRACTION))
        target = close - 2 * (stop - close)
    return _stop_round(stop, side, places), _round(target, places)


def assess_trend(r: Readings, overbought: Decimal, oversold: Decimal) -> Assessment:
    """The Trend Following rules (see the module docstring)."""
    candle = r.candles[-1]
    close = candle.close
    trend = _trend(close, r.ema)
    (m0, m1), (rsi0, rsi1) = r.macd, r.rsi
    cross_up = m0["macd"] <= m0["signal"] and m1["macd"] > m1["signal"]
    cross_down = m0["macd"] >= m0["signal"] and m1["macd"] < m1["signal"]
    bands = r.bbands[1]
    reasons = [f"trend {trend} (close {plain(close)} vs EMA {plain(r.ema[1]) if r.ema else '-'})"]
    signal, confidence = Signal.HOLD, Decimal(0)
    if cross_up or cross_down:
        direction = Signal.BUY if cross_up else Signal.SELL
        reasons.append(f"MACD crossed {'above' if cross_up else 'below'} its signal line")
        confidence = Decimal("0.35")
        agrees = (trend == "UP") if cross_up else (trend == "DOWN")
        rsi_ok = rsi1 < overbought if cross_up else rsi1 > oversold
        if agrees:
            confidence += Decimal("0.25")
            reasons.append("the trend filter agrees")
        else:
            reasons.append("against the trend filter: HOLD")
        if not rsi_ok:
            reasons.append(
                f"RSI {_two(rsi1)} is beyond {plain(overbought if cross_up else oversold)}: HOLD"
            )
        moving_with = rsi1 > rsi0 if cross_up else rsi1 < rsi0
        if 40 <= rsi1 <= 60 and moving_with:
            confidence += Decimal("0.15")
            reasons.append(f"RSI {_two(rsi1)} mid-range and moving with the signal")
        beyond = close > bands["upper"] if cross_up else close < bands["lower"]
        if beyond:
            confidence += Decimal("0.15")
            reasons.append("close beyond the Bollinger band in the trend's direction")
        if agrees and rsi_ok:
            signal = direction
    else:
        reasons.append("no MACD cross on the last complete candle: HOLD")
        confidence = Decimal("0.25") if trend != "SIDEWAYS" else Decimal(0)
    return _finish(r, signal, confidence, trend, reasons, trend_stop)


def reversion_stop(r: Readings, side: Signal, places: int) -> tuple[Decimal, Decimal]:
    """Take-profit at the middle band; stop beyond the candle's extreme."""
    candle = r.candles[-1]
    middle = r.bbands[1]["middle"]
    close = candle.close
    half = abs(middle - close) / 2
    if side is Signal.BUY:
        stop = max(candle.low - half, close * (1 - MAX_STOP_FRACTION))
        stop = min(stop, close * (1 - MIN_STOP_FRACTION))
    else:
        stop = min(candle.high + half, close * (1 + MAX_STOP_FRACTION))
        stop = max(stop, close * (1 + MIN_STOP_FRACTION))
    return _stop_round(stop, side, places), _round(middle, places)


def assess_mean_reversion(r: Readings, overbought: Decimal, oversold: Decimal) -> Assessment:
    """The Mean Reversion rules (see the module docstring)."""
    candle = r.candles[-1]
    close = candle.close
    (b0, b1), (h0, h1) = r.bbands, (r.macd[0]["histogram"], r.macd[1]["histogram"])
    rsi = r.rsi[1]
    trend = _trend(close, r.ema)
    reasons: list[str] = []
    signal, confidence = Signal.HOLD, Decimal(0)
    buy = close <= b1["lower"] and rsi <= oversold
    sell = close >= b1["upper"] and rsi >= overbought
    if buy or sell:
        signal = Signal.BUY if buy else Signal.SELL
        level = oversold if buy else overbought
        reasons.append(
            f"close {plain(close)} at the {'lower' if buy else 'upper'} band and RSI "
            f"{_two(rsi)} {'<=' if buy else '>='} {plain(level)}"
        )
        confidence = Decimal("0.5") + min(Decimal("0.2"), abs(level - rsi) * Decimal("0.02"))
        if abs(h1) < abs(h0):
            confidence += Decimal("0.15")
            reasons.append("MACD histogram turning back toward zero")
        previous_close = r.candles[-2].close if len(r.candles) > 1 else close
        walking = (previous_close <= b0["lower"]) if buy else (previous_close >= b0["upper"])
        if b1["bandwidth"] > b0["bandwidth"] and walking:
            confidence -= Decimal("0.15")
            reasons.append("strong trend: bands widening with price walking along the band")
    else:
        reasons.append(
            f"close {plain(close)} inside the bands ({plain(b1['lower'])}-{plain(b1['upper'])})"
            f" or RSI {_two(rsi)} not stretched: HOLD"
        )
    return _finish(r, signal, confidence, trend, reasons, reversion_stop)


StopRule = Callable[[Readings, Signal, int], tuple[Decimal, Decimal]]


def _finish(
    r: Readings, signal: Signal, confidence: Decimal, trend: str, reasons: list[str],
    stops: StopRule,
) -> Assessment:
    places = decimals_of(r.candles)
    support, resistance = _levels(r, places)
    stop = target = None
    if signal in (Signal.BUY, Signal.SELL):
        stop, target = stops(r, signal, places)
        reasons.append(f"stop-loss {plain(stop)}, take-profit {plain(target)}")
    bands = r.bbands[1]
    regime = (
        f"{trend.lower()}, Bollinger bandwidth {plain(bands['bandwidth'].quantize(CENT))}% "
        f"({'widening' if bands['bandwidth'] > r.bbands[0]['bandwidth'] else 'narrowing'})"
    )
    return Assessment(
        signal=signal, confidence=_confidence(confidence), trend=trend, reasons=tuple(reasons),
        price=r.candles[-1].close, stop_loss=stop, take_profit=target, support=support,
        resistance=resistance, indicators=_indicator_values(r),
        observations=_observations(r.candles), regime=regime,
    )


def _two(value: Decimal) -> str:
    """An indicator reading in a reason a person reads (the chat, a notification): two
    decimals, not the engine's eight ("RSI 59.92", not "RSI 59.91716198")."""
    return plain(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
