"""Catalogue data: momentum oscillators.

Data only: each entry names the pandas-ta function (always run with ``talib=False``), its parameters
with documented ranges, the pandas-ta column behind each public output, and the bars needed for the
first value. Warm-up counts follow TA-Lib's look-back where TA-Lib has the indicator, so a value is
only shown once the indicator is defined the way TA-Lib defines it.
"""

from __future__ import annotations

from app.indicators import custom
from app.indicators.model import IndicatorDef, ParamDef

CLOSE = ("close",)
HLC = ("high", "low", "close")


def length(
    default: int, what: str = "Look-back in bars.", low: int = 2, high: int = 500
) -> ParamDef:
    return ParamDef("length", int, default, low, high, what)


def period(name: str, default: int, what: str, low: int = 1, high: int = 500) -> ParamDef:
    return ParamDef(name, int, default, low, high, what)


def fast_slow(
    fast: int, slow: int, kind: str = "EMA", low: int = 2
) -> tuple[ParamDef, ParamDef]:
    """The fast and slow lengths of a two-average oscillator (fast must stay below slow)."""
    return (
        period("fast", fast, f"Fast {kind} length.", low, 200),
        period("slow", slow, f"Slow {kind} length.", low + 1, 400),
    )


MOMENTUM: tuple[IndicatorDef, ...] = (
    IndicatorDef(
        "RSI", "momentum",
        "Relative Strength Index, 0-100: Wilder-smoothed average gain over average gain plus loss. "
        "Above 70 is commonly read as overbought, below 30 as oversold. Matches TA-Lib.",
        "rsi", CLOSE, (length(14),), (("value", "RSI"),),
        lambda p: int(p["length"]) + 1, fixed={"mamode": "rma"},
    ),
    IndicatorDef(
        "MACD", "momentum",
        "Moving Average Convergence Divergence: EMA(fast) - EMA(slow), its EMA(signal) and the "
        "histogram macd - signal. EMAs are seeded with an SMA, as in TA-Lib.",
        "macd", CLOSE,
        (*fast_slow(12, 26, "EMA"),
         period("signal", 9, "Signal EMA length.", 1, 200)),
        (("macd", "MACD"), ("signal", "MACDs"), ("histogram", "MACDh")),
        lambda p: int(p["slow"] + p["signal"]) - 1, ordered=(("fast", "slow"),),
    ),
    IndicatorDef(
        "STOCH", "momentum",
        "Slow stochastic oscillator, 0-100: raw %K over k bars, smoothed by an SMA of smooth_k "
        "(the slow %K), and %D, an SMA of d bars of it. Equals TA-Lib STOCH(fastk=k, "
        "slowk=smooth_k, "
        "slowd=d, SMA).",
        "stoch", HLC,
        (period("k", 14, "Look-back of the raw %K.", 2, 500),
         period("d", 3, "SMA length of %D.", 1, 100),
         period("smooth_k", 3, "SMA length smoothing %K.", 1, 100)),
        (("k", "STOCHk"), ("d", "STOCHd")),
        lambda p: int(p["k"] + p["smooth_k"] + p["d"]), fixed={"mamode": "sma"},
    ),
    IndicatorDef(
        "STOCHRSI", "momentum",
        "Stochastic RSI, 0-100: the stochastic of RSI(rsi_length) over length bars; k is its SMA "
        "of k bars and d an SMA of d bars of k (k equals TA-Lib STOCHRSI's fastd).",
        "stochrsi", CLOSE,
        (length(14, "Stochastic look-back over the RSI."),
         period("rsi_length", 14, "RSI length.", 2, 500),
         period("k", 3, "SMA smoothing of k.", 1, 100), period("d", 3, "SMA length of d.", 1, 100)),
        (("k", "STOCHRSIk"), ("d", "STOCHRSId")),
        lambda p: int(p["rsi_length"] + p["length"] + p["k"] + p["d"]) - 2,
        fixed={"mamode": "sma"},
    ),
    IndicatorDef(
        "CCI", "momentum",
        "Commodity Channel Index: (typical price - its SMA) / (c * mean absolute deviation). "
        "Computed in numpy (pandas-ta 0.4.71b0 has an operator-precedence bug); matches TA-Lib, "
        "including 0 for a perfectly flat window.",
        custom.cci, HLC,
        (length(14), ParamDef("c", float, 0.015, 0.001, 1.0, "Scaling constant.")),
        (("value", "CCI"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "WILLR", "momentum",
        "Williams %R, -100..0: where the close sits in the high-low range of the last length bars. "
        "Undefined (NaN) when that range is zero.",
        "willr", HLC, (length(14),), (("value", "WILLR"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "ROC", "momentum", "Rate of change in percent: 100 * (close / close length bars ago - 1).",
        "roc", CLOSE, (length(10, low=1),), (("value", "ROC"),), lambda p: int(p["length"]) + 1,
    ),
    IndicatorDef(
        "MOM", "momentum", "Momentum: close minus the close length bars ago, in price units.",
        "mom", CLOSE, (length(10, low=1),), (("value", "MOM"),), lambda p: int(p["length"]) + 1,
    ),
    IndicatorDef(
        "APO", "momentum",
        "Absolute Price Oscillator: SMA(fast) - SMA(slow) in price units (TA-Lib's default MA "
        "type).",
        "apo", CLOSE,
        fast_slow(12, 26, "SMA"),
        (("value", "APO"),), lambda p: int(p["slow"]), fixed={"mamode": "sma"},
        ordered=(("fast", "slow"),),
    ),
    IndicatorDef(
        "PPO", "momentum",
        "Percentage Price Oscillator: 100 * (EMA(fast) - EMA(slow)) / EMA(slow), its EMA(signal) "
        "and the histogram; MACD in percent, comparable across price levels.",
        "ppo", CLOSE,
        (*fast_slow(12, 26, "EMA"),
         period("signal", 9, "Signal EMA length.", 1, 200)),
        (("ppo", "PPO"), ("signal", "PPOs"), ("histogram", "PPOh")),
        lambda p: int(p["slow"] + p["signal"]) - 1, fixed={"mamode": "ema"},
        ordered=(("fast", "slow"),),
    ),
    IndicatorDef(
        "CMO", "momentum",
        "Chande Momentum Oscillator, -100..100: (sum of gains - sum of losses) / (sum of both) "
        "over "
        "length bars, Chande's plain sums (TA-Lib instead smooths them the Wilder way).",
        "cmo", CLOSE, (length(14),), (("value", "CMO"),), lambda p: int(p["length"]) + 1,
    ),
    IndicatorDef(
        "TRIX", "momentum",
        "TRIX: one-bar percent change of a triple EMA of length bars, with an SMA signal line.",
        "trix", CLOSE, (length(18), period("signal", 9, "Signal SMA length.", 1, 200)),
        (("trix", "TRIX"), ("signal", "TRIXs")),
        lambda p: 3 * (int(p["length"]) - 1) + int(p["signal"]) + 1,
    ),
    IndicatorDef(
        "TSI", "momentum",
        "True Strength Index, -100..100: double-EMA-smoothed momentum over its double-smoothed "
        "absolute value, with an EMA signal line.",
        "tsi", CLOSE,
        (period("fast", 13, "Second (short) EMA length.", 2, 200),
         period("slow", 25, "First (long) EMA length.", 3, 400),
         period("signal", 13, "Signal EMA length.", 1, 200)),
        (("tsi", "TSI"), ("signal", "TSIs")),
        lambda p: int(p["slow"] + p["fast"] + p["signal"]) - 1, ordered=(("fast", "slow"),),
    ),
    IndicatorDef(
        "UO", "momentum",
        "Ultimate Oscillator, 0-100: weighted average (4:2:1) of buying pressure over three "
        "windows. Matches TA-Lib ULTOSC, except that it is undefined (NaN) while the short "
        "window holds no price range at all (a run of identical candles), where TA-Lib uses 0.",
        "uo", HLC,
        (period("fast", 7, "Short window.", 1, 200), period("medium", 14, "Middle window.", 2, 300),
         period("slow", 28, "Long window.", 3, 500)),
        (("value", "UO"),), lambda p: int(p["slow"]) + 1,
        ordered=(("fast", "medium"), ("medium", "slow")),
    ),
    IndicatorDef(
        "AO", "momentum",
        "Awesome Oscillator: SMA(fast) - SMA(slow) of the median price (high+low)/2.",
        "ao", ("high", "low"),
        fast_slow(5, 34, "SMA", low=1),
        (("value", "AO"),), lambda p: int(p["slow"]), ordered=(("fast", "slow"),),
    ),
    IndicatorDef(
        "FISHER", "momentum",
        "Ehlers Fisher Transform of the median price's position in its length-bar range, and the "
        "transform signal bars earlier as the signal line.",
        "fisher", ("high", "low"),
        (length(9), period("signal", 1, "Bars of delay of the signal line.", 1, 50)),
        (("fisher", "FISHERT"), ("signal", "FISHERTs")),
        lambda p: int(p["length"] + p["signal"]),
    ),
    IndicatorDef(
        "COPPOCK", "momentum",
        "Coppock Curve: WMA of length bars of ROC(fast) + ROC(slow).",
        "coppock", CLOSE,
        (length(10, "WMA length."), period("fast", 11, "Shorter ROC length.", 1, 200),
         period("slow", 14, "Longer ROC length.", 2, 300)),
        (("value", "COPC"),), lambda p: int(p["slow"] + p["fast"] + p["length"]),
        ordered=(("fast", "slow"),),
    ),
    IndicatorDef(
        "KST", "momentum",
        "Know Sure Thing (Pring): weighted sum (1,2,3,4) of four SMA-smoothed ROCs, with an SMA "
        "signal line.",
        "kst", CLOSE,
        (period("roc1", 10, "First ROC length."), period("roc2", 15, "Second ROC length."),
         period("roc3", 20, "Third ROC length."), period("roc4", 30, "Fourth ROC length."),
         period("sma1", 10, "SMA of the first ROC."), period("sma2", 10, "SMA of the second ROC."),
         period("sma3", 10, "SMA of the third ROC."), period("sma4", 15, "SMA of the fourth ROC."),
         period("signal", 9, "Signal SMA length.")),
        (("kst", "KST"), ("signal", "KSTs")),
        lambda p: max(int(p[f"roc{i}"] + p[f"sma{i}"]) for i in range(1, 5)) + int(p["signal"]) - 1,
    ),
    IndicatorDef(
        "ER", "momentum",
        "Kaufman Efficiency Ratio, 0-1: net change over the sum of absolute bar changes.",
        "er", CLOSE, (length(10),), (("value", "ER"),), lambda p: int(p["length"]) + 1,
    ),
    IndicatorDef(
        "BIAS", "momentum", "Bias: close / SMA(length) - 1, the distance from the moving average.",
        "bias", CLOSE, (length(26),), (("value", "BIAS"),), lambda p: int(p["length"]),
        fixed={"mamode": "sma"},
    ),
    IndicatorDef(
        "PSL", "momentum",
        "Psychological Line, 0-100: percent of the last length bars that closed above their open.",
        "psl", ("close", "open_"), (length(12),), (("value", "PSL"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "CFO", "momentum",
        "Chande Forecast Oscillator: percent difference between the close and its "
        "linear-regression "
        "forecast over length bars.",
        "cfo", CLOSE, (length(9),), (("value", "CFO"),), lambda p: int(p["length"]),
    ),
    IndicatorDef(
        "SMI", "momentum",
        "SMI Ergodic indicator: TSI(fast, slow), its EMA(signal) and their difference "
        "(oscillator).",
        "smi", CLOSE,
        (*fast_slow(5, 20, "EMA"),
         period("signal", 5, "Signal EMA length.", 1, 200)),
        (("smi", "SMI"), ("signal", "SMIs"), ("oscillator", "SMIo")),
        lambda p: int(p["fast"] + p["slow"] + p["signal"]) - 1, ordered=(("fast", "slow"),),
    ),
    IndicatorDef(
        "KDJ", "momentum",
        "KDJ: the stochastic %K and %D smoothed Wilder-style over signal bars, and J = 3K - 2D.",
        "kdj", HLC, (length(9), period("signal", 3, "Smoothing length.", 1, 100)),
        (("k", "K"), ("d", "D"), ("j", "J")), lambda p: int(p["length"] + 2 * p["signal"]) - 2,
    ),
    IndicatorDef(
        "RSX", "momentum", "Jurik RSX, 0-100: a smoother, lag-reduced RSI.",
        "rsx", CLOSE, (length(14),), (("value", "RSX"),), lambda p: int(p["length"]),
    ),
)
