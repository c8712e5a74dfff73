"""Catalogue data: volatility and volume indicators.

Data only (see ``defs_momentum`` for the form). Conventions chosen where libraries differ: ATR, NATR
use Wilder's smoothing and BBANDS, STDEV the population standard deviation, all as TA-Lib does;
OBV, AD, PVT, NVI and PVI are running totals whose level depends on where the data starts, so only
their changes are comparable between sources.
"""

from __future__ import annotations

from app.indicators import custom
from app.indicators.defs_momentum import CLOSE, HLC, fast_slow, length, period
from app.indicators.model import IndicatorDef, ParamDef

HLCV = ("high", "low", "close", "volume")
CV = ("close", "volume")

VOLATILITY: tuple[IndicatorDef, ...] = (
    IndicatorDef(
        "ATR", "volatility",
        "Average True Range, Wilder-smoothed over length bars, in price units.",
        "atr", HLC, (length(14, low=1),), (("value", "ATRr"),), lambda p: int(p["length"]) + 1,
        fixed={"mamode": "rma"},
    ),
    IndicatorDef(
        "NATR", "volatility",
        "Normalized ATR: 100 * ATR / close, Wilder-smoothed as in TA-Lib (pandas-ta's own default "
        "is an EMA).",
        "natr", HLC, (length(14, low=1),), (("value", "NATR"),), lambda p: int(p["length"]) + 1,
        fixed={"mamode": "rma"},
    ),
    IndicatorDef(
        "BBANDS", "volatility",
        "Bollinger Bands: SMA(length) +/- std population standard deviations (as TA-Lib), the "
        "bandwidth 100*(upper-lower)/middle and percent b (close-lower)/(upper-lower).",
        "bbands", CLOSE,
        (length(20), ParamDef("std", float, 2.0, 0.1, 10.0, "Band width in standard deviations.",
                              targets=("lower_std", "upper_std"))),
        (("lower", "BBL"), ("middle", "BBM"), ("upper", "BBU"), ("bandwidth", "BBB"),
         ("percent", "BBP")),
        lambda p: int(p["length"]), fixed={"ddof": 0, "mamode": "sma"},
    ),
    IndicatorDef(
        "KC", "volatility",
        "Keltner Channels: EMA(length) of the close +/- multiplier * EMA(length) of the true "
        "range.",
        "kc", HLC,
        (length(20), ParamDef("multiplier", float, 2.0, 0.1, 10.0, "Band width in ranges.",
                              targets=("scalar",))),
        (("lower", "KCLe"), ("middle", "KCBe"), ("upper", "KCUe")),
        lambda p: int(p["length"]) + 1, fixed={"mamode": "ema", "tr": True},
    ),
    IndicatorDef(
        "DONCHIAN", "volatility",
        "Donchian Channels: lowest low, highest high over length bars and their midpoint.",
        "donchian", ("high", "low"),
        (ParamDef("length", int, 20, 2, 500, "Look-back in bars.",
                  targets=("lower_length", "upper_length")),),
        (("lower", "DCL"), ("middle", "DCM"), ("upper", "DCU")), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "MASSI", "volatility",
        "Mass Index: sum over slow bars of EMA(fast) of the range / EMA(fast) of that EMA; a bulge "
        "above 27 hints at a reversal.",
        "massi", ("high", "low"),
        (period("fast", 9, "EMA length.", 2, 100), period("slow", 25, "Summation length.", 3, 300)),
        (("value", "MASSI"),), lambda p: 2 * int(p["fast"]) + int(p["slow"]) - 2,
        ordered=(("fast", "slow"),),
    ),
    IndicatorDef(
        "UI", "volatility",
        "Ulcer Index: root mean square of the percent drawdown from the length-bar high.",
        "ui", CLOSE, (length(14),), (("value", "UI"),), lambda p: 2 * int(p["length"]) - 1,
    ),
    IndicatorDef(
        "TRANGE", "volatility",
        "True range: the largest of high-low, |high - previous close| and |low - previous close|.",
        "true_range", HLC, (), (("value", "TRUERANGE"),), lambda p: 2,
    ),
    IndicatorDef(
        "ACCBANDS", "volatility",
        "Acceleration Bands (Headley): SMA(length) bands widened by c times the relative range.",
        "accbands", HLC,
        (length(20), ParamDef("c", float, 4.0, 0.1, 50.0, "Width multiplier.")),
        (("lower", "ACCBL"), ("middle", "ACCBM"), ("upper", "ACCBU")),
        lambda p: int(p["length"]), fixed={"mamode": "sma"},
    ),
    IndicatorDef(
        "RVI", "volatility",
        "Relative Volatility Index, 0-100: RSI-like, built from the standard deviation on up and "
        "down bars.",
        "rvi", ("close", "high", "low"), (length(14),), (("value", "RVI"),),
        lambda p: 2 * int(p["length"]) - 1,
    ),
    IndicatorDef(
        "STDEV", "volatility",
        "Population standard deviation of the close over length bars (as TA-Lib STDDEV).",
        "stdev", CLOSE, (length(20),), (("value", "STDEV"),), lambda p: int(p["length"]),
        fixed={"ddof": 0},
    ),
)

VOLUME: tuple[IndicatorDef, ...] = (
    IndicatorDef(
        "OBV", "volume",
        "On-Balance Volume: running total adding the volume of up-closes and subtracting that of "
        "down-closes. pandas-ta counts the first bar as an up bar, TA-Lib starts at the first "
        "bar's volume; only OBV's changes carry meaning, and those agree.",
        "obv", CV, (), (("value", "OBV"),), lambda p: 2,
    ),
    IndicatorDef(
        "AD", "volume",
        "Chaikin Accumulation/Distribution line: running total of the close location value times "
        "volume.",
        "ad", HLCV, (), (("value", "AD"),), lambda p: 1,
    ),
    IndicatorDef(
        "ADOSC", "volume",
        "Chaikin A/D Oscillator: EMA(fast) - EMA(slow) of the A/D line.",
        "adosc", HLCV,
        (period("fast", 3, "Fast EMA length.", 1, 100),
         period("slow", 10, "Slow EMA length.", 2, 300)),
        (("value", "ADOSC"),), lambda p: int(p["slow"]), ordered=(("fast", "slow"),),
    ),
    IndicatorDef(
        "CMF", "volume",
        "Chaikin Money Flow, -1..1: volume-weighted close location value over length bars.",
        "cmf", HLCV, (length(20),), (("value", "CMF"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "EFI", "volume",
        "Elder's Force Index: EMA(length) of price change times volume.",
        "efi", CV, (length(13),), (("value", "EFI"),), lambda p: int(p["length"]) + 1,
        fixed={"mamode": "ema"},
    ),
    IndicatorDef(
        "EOM", "volume",
        "Ease of Movement: SMA(length) of the midpoint move per unit of volume-to-range ratio, "
        "volume divided by 100,000,000. Undefined (NaN) for windows holding a zero-volume bar; "
        "computed in numpy because pandas-ta turns one such bar into NaN for every later bar.",
        custom.eom, HLCV, (length(14),), (("value", "EOM"),), lambda p: int(p["length"]) + 1,
    ),
    IndicatorDef(
        "MFI", "volume",
        "Money Flow Index, 0-100: volume-weighted RSI of the typical price. A bar whose typical "
        "price is unchanged counts as neither inflow nor outflow (the definition, and TA-Lib's); "
        "computed in numpy because pandas-ta counts it as outflow. NaN when a window has no flow.",
        custom.mfi, HLCV, (length(14),), (("value", "MFI"),), lambda p: int(p["length"]) + 1,
    ),
    IndicatorDef(
        "PVT", "volume",
        "Price-Volume Trend: running total of volume times the percent price change.",
        "pvt", CV, (), (("value", "PVT"),), lambda p: 2,
    ),
    IndicatorDef(
        "NVI", "volume",
        "Negative Volume Index: compounds the price change only on bars whose volume fell; starts "
        "at 1000.",
        "nvi", CV, (), (("value", "NVI"),), lambda p: 2, fixed={"initial": 1000, "length": 1},
    ),
    IndicatorDef(
        "PVI", "volume",
        "Positive Volume Index: compounds the price change only on bars whose volume rose; starts "
        "at 1000.",
        "pvi", CV, (), (("value", "PVI"),), lambda p: 2, fixed={"initial": 1000, "length": 1},
    ),
    IndicatorDef(
        "KVO", "volume",
        "Klinger Volume Oscillator: EMA(fast) - EMA(slow) of signed volume force, with an EMA "
        "signal line.",
        "kvo", HLCV,
        (*fast_slow(34, 55, "EMA"),
         period("signal", 13, "Signal EMA length.", 1, 200)),
        (("kvo", "KVO"), ("signal", "KVOs")), lambda p: int(p["slow"] + p["signal"]),
        ordered=(("fast", "slow"),), fixed={"mamode": "ema"},
    ),
    IndicatorDef(
        "PVO", "volume",
        "Percentage Volume Oscillator: MACD of volume in percent, with signal and histogram.",
        "pvo", ("volume",),
        (*fast_slow(12, 26, "EMA"),
         period("signal", 9, "Signal EMA length.", 1, 200)),
        (("pvo", "PVO"), ("signal", "PVOs"), ("histogram", "PVOh")),
        lambda p: int(p["slow"] + p["signal"]) - 1, ordered=(("fast", "slow"),),
    ),
    IndicatorDef(
        "VWMA", "volume", "Volume-weighted moving average of the close over length bars.",
        "vwma", CV, (length(20),), (("value", "VWMA"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "VWAP", "volume",
        "Volume-weighted average price of the typical price, restarting at each UTC day.",
        "vwap", HLCV, (), (("value", "VWAP"),), lambda p: 2, fixed={"anchor": "D"},
    ),
)
