"""Catalogue data: moving averages and price overlays (overlap), and trend indicators.

Data only (see ``defs_momentum`` for the form). Causality notes: ICHIMOKU is offered without the
chikou span (the close plotted back in time, which needs future bars) and with its cloud spans as
they stand at the current bar; DPO is offered only in its non-centred form.
"""

from __future__ import annotations

from app.indicators import custom
from app.indicators.defs_momentum import CLOSE, HLC, length, period
from app.indicators.model import IndicatorDef, ParamDef

OVERLAP: tuple[IndicatorDef, ...] = (
    IndicatorDef(
        "SMA", "overlap", "Simple moving average of the close over length bars.",
        "sma", CLOSE, (length(20, low=1),), (("value", "SMA"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "EMA", "overlap",
        "Exponential moving average (alpha 2/(length+1)), seeded with the SMA of the first length "
        "bars, as in TA-Lib.",
        "ema", CLOSE, (length(20, low=1),), (("value", "EMA"),), lambda p: int(p["length"]),
        fixed={"presma": True},
    ),
    IndicatorDef(
        "WMA", "overlap", "Linearly weighted moving average (newest bar weighs length).",
        "wma", CLOSE, (length(20, low=1),), (("value", "WMA"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "DEMA", "overlap", "Double EMA: 2*EMA - EMA(EMA), less lag than an EMA.",
        "dema", CLOSE, (length(20),), (("value", "DEMA"),), lambda p: 2 * int(p["length"]) - 1,
    ),
    IndicatorDef(
        "TEMA", "overlap", "Triple EMA: 3*EMA - 3*EMA(EMA) + EMA(EMA(EMA)).",
        "tema", CLOSE, (length(20),), (("value", "TEMA"),), lambda p: 3 * int(p["length"]),
    ),
    IndicatorDef(
        "TRIMA", "overlap",
        "Triangular moving average: an SMA of an SMA, each of round((length+1)/2) bars "
        "(pandas-ta's "
        "convention; TA-Lib splits even lengths unevenly, so even lengths differ from TA-Lib).",
        "trima", CLOSE, (length(20),), (("value", "TRIMA"),),
        lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "HMA", "overlap",
        "Hull moving average: WMA(sqrt(length)) of 2*WMA(length/2) - WMA(length).",
        "hma", CLOSE, (length(20),), (("value", "HMA"),),
        lambda p: int(p["length"]) + int(int(p["length"]) ** 0.5) - 1,
    ),
    IndicatorDef(
        "KAMA", "overlap",
        "Kaufman adaptive moving average: an EMA whose speed follows the efficiency ratio over "
        "length bars, between the fast and slow constants.",
        "kama", CLOSE,
        (length(10), period("fast", 2, "Fastest smoothing length.", 1, 100),
         period("slow", 30, "Slowest smoothing length.", 2, 500)),
        (("value", "KAMA"),), lambda p: max(int(p["length"]) + 1, int(p["slow"])),
        ordered=(("fast", "slow"),),
    ),
    IndicatorDef(
        "T3", "overlap", "Tillson T3: six chained EMAs combined with the volume factor a.",
        "t3", CLOSE,
        (length(10), ParamDef("a", float, 0.7, 0.0, 1.0, "Volume factor (0-1).")),
        (("value", "T3"),), lambda p: 6 * int(p["length"]) - 5,
    ),
    IndicatorDef(
        "ALMA", "overlap",
        "Arnaud Legoux moving average: a Gaussian-weighted window centred at dist_offset of it.",
        "alma", CLOSE,
        (length(9), ParamDef("sigma", float, 6.0, 0.1, 100.0, "Width of the Gaussian."),
         ParamDef("dist_offset", float, 0.85, 0.0, 1.0,
                  "Where the weights peak (0 oldest, 1 newest).")),
        (("value", "ALMA"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "ZLMA", "overlap", "Zero-lag EMA: EMA of close + (close - close (length-1)/2 bars ago).",
        "zlma", CLOSE, (length(20),), (("value", "ZL"),),
        lambda p: int(p["length"]) + int(0.5 * (int(p["length"]) - 1)), fixed={"mamode": "ema"},
    ),
    IndicatorDef(
        "MIDPOINT", "overlap", "Midpoint of the highest and lowest close over length bars.",
        "midpoint", CLOSE, (length(14),), (("value", "MIDPOINT"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "MIDPRICE", "overlap", "Midpoint of the highest high and lowest low over length bars.",
        "midprice", ("high", "low"), (length(14),), (("value", "MIDPRICE"),),
        lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "LINREG", "overlap", "Least-squares line over length bars, evaluated at the current bar.",
        "linreg", CLOSE, (length(14),), (("value", "LINREG"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "RMA", "overlap", "Wilder's moving average (alpha 1/length), the smoothing of RSI and ATR.",
        "rma", CLOSE, (length(14),), (("value", "RMA"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "SUPERTREND", "overlap",
        "Supertrend: an ATR(length) * multiplier trailing stop around the median price; direction "
        "is 1 while price is above it (uptrend) and -1 below.",
        "supertrend", HLC,
        (length(7), ParamDef("multiplier", float, 3.0, 0.1, 20.0, "ATR multiple of the band.")),
        (("value", "SUPERT"), ("direction", "SUPERTd")), lambda p: int(p["length"]) + 1,
    ),
    IndicatorDef(
        "ICHIMOKU", "overlap",
        "Ichimoku: tenkan and kijun lines, and the cloud (span_a, span_b) as it stands at the "
        "current "
        "bar, i.e. computed kijun-1 bars earlier and projected forward. The chikou span (the close "
        "plotted back in time) is omitted: it would need future bars.",
        "ichimoku", HLC,
        (period("tenkan", 9, "Conversion line length.", 2, 200),
         period("kijun", 26, "Base line length and the cloud's forward shift.", 3, 300),
         period("senkou", 52, "Span B length.", 4, 500)),
        (("tenkan", "ITS"), ("kijun", "IKS"), ("span_a", "ISA"), ("span_b", "ISB")),
        lambda p: int(p["senkou"] + p["kijun"]) - 1,
        fixed={"include_chikou": False}, ordered=(("tenkan", "kijun"), ("kijun", "senkou")),
    ),
)

TREND: tuple[IndicatorDef, ...] = (
    IndicatorDef(
        "ADX", "trend",
        "Average Directional Index with +DI and -DI, all Wilder-smoothed over length bars as in "
        "TA-Lib (ADX needs 2*length bars).",
        "adx", HLC, (length(14),), (("adx", "ADX"), ("plus_di", "DMP"), ("minus_di", "DMN")),
        lambda p: 2 * int(p["length"]), fixed={"mamode": "rma"},
    ),
    IndicatorDef(
        "AROON", "trend",
        "Aroon up/down, 0-100: how recently the highest high / lowest low of the last length+1 "
        "bars "
        "occurred, and their difference. When an extreme occurs twice, the most recent counts, as "
        "in TA-Lib.",
        "aroon", ("high", "low"), (length(14),),
        (("up", "AROONU"), ("down", "AROOND"), ("oscillator", "AROONOSC")),
        lambda p: int(p["length"]) + 1,
    ),
    IndicatorDef(
        "PSAR", "trend",
        "Parabolic SAR: the trailing stop value and its direction (1 below price in an uptrend, "
        "-1 above price in a downtrend).",
        custom.psar, HLC,
        (ParamDef("af0", float, 0.02, 0.001, 1.0, "Initial acceleration factor."),
         ParamDef("af", float, 0.02, 0.001, 1.0, "Acceleration step."),
         ParamDef("max_af", float, 0.2, 0.01, 1.0, "Maximum acceleration factor.")),
        (("value", "PSAR"), ("direction", "PSARd")), lambda p: 2,
    ),
    IndicatorDef(
        "VORTEX", "trend",
        "Vortex indicator: positive and negative trend movement over length bars.",
        "vortex", HLC, (length(14),), (("plus", "VTXP"), ("minus", "VTXM")),
        lambda p: int(p["length"]) + 1,
    ),
    IndicatorDef(
        "CHOP", "trend",
        "Choppiness index, 0-100: high values mean a sideways market, low values a trend.",
        "chop", HLC, (length(14),), (("value", "CHOP"),), lambda p: int(p["length"]) + 1,
    ),
    IndicatorDef(
        "QSTICK", "trend",
        "Qstick: SMA of (close - open) over length bars; buying vs selling bars.",
        "qstick", ("open_", "close"), (length(10),), (("value", "QS"),),
        lambda p: int(p["length"]), fixed={"mamode": "sma"},
    ),
    IndicatorDef(
        "VHF", "trend",
        "Vertical Horizontal Filter: range over the sum of bar changes; high means trending.",
        "vhf", CLOSE, (length(28),), (("value", "VHF"),), lambda p: int(p["length"]) + 1,
    ),
    IndicatorDef(
        "DPO", "trend",
        "Detrended Price Oscillator, non-centred (causal) form: close minus the SMA(length) of "
        "length/2+1 bars earlier.",
        "dpo", CLOSE, (length(20),), (("value", "DPO"),),
        lambda p: int(p["length"]) + int(0.5 * int(p["length"])) + 1, fixed={"centered": False},
    ),
    IndicatorDef(
        "CKSP", "trend",
        "Chande Kroll Stop: long and short stops from the p-bar ATR times x, over the extremes of "
        "q "
        "bars.",
        "cksp", HLC,
        (period("p", 10, "ATR and first extreme length.", 1, 200),
         ParamDef("x", float, 3.0, 0.1, 20.0, "ATR multiple."),
         period("q", 20, "Second extreme length.", 1, 200)),
        (("long_stop", "CKSPl"), ("short_stop", "CKSPs")), lambda p: int(p["p"] + p["q"]),
    ),
)
