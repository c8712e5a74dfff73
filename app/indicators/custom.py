"""Numpy versions of the indicators pandas-ta gets wrong, so the catalogue can still offer them.

* CCI: pandas-ta 0.4.71b0 computes ``tp - sma / (c * mad)`` (an operator-precedence bug) instead of
  ``(tp - sma) / (c * mad)``. Ours is Lambert's formula as TA-Lib computes it, including TA-Lib's
  choice of 0 when the window is perfectly flat (the price sits on its mean).
* MFI: pandas-ta counts a bar whose typical price did not change as negative money flow and adds an
  epsilon to the denominator. Quong and Soudack's definition (and TA-Lib's) counts such a bar as
  neither; ours follows the definition. A window without any money flow has no MFI (NaN).
* EOM: in pandas-ta one zero-volume bar yields an infinity that its running-sum SMA turns into NaN
  for every later bar. Ours leaves a zero-volume bar undefined, which blanks only the windows
  that contain it.

Each function takes the same keyword arguments as its pandas-ta counterpart and returns a named
``pandas.Series`` so the engine maps its output exactly like a pandas-ta column.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view


def cci(
    high: pd.Series, low: pd.Series, close: pd.Series, length: int = 14, c: float = 0.015
) -> pd.Series:
    """Commodity Channel Index: (typical price - its SMA) / (c * mean absolute deviation)."""
    tp = ((high + low + close) / 3.0).to_numpy(dtype=float)
    out = np.full(tp.shape[0], np.nan)
    if tp.shape[0] >= length:
        windows = sliding_window_view(tp, length)
        mean = windows.mean(axis=1)
        mad = np.abs(windows - mean[:, None]).mean(axis=1)
        last = windows[:, -1]
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.where(mad > 0, (last - mean) / (c * mad), 0.0)
        out[length - 1 :] = value
    return pd.Series(out, index=close.index, name=f"CCI_{length}")


def mfi(
    high: pd.Series, low: pd.Series, close: pd.Series, volume: pd.Series, length: int = 14
) -> pd.Series:
    """Money Flow Index: 100 * positive flow / (positive + negative flow) over ``length`` bars."""
    tp = ((high + low + close) / 3.0).to_numpy(dtype=float)
    flow = tp * volume.to_numpy(dtype=float)
    change = np.diff(tp, prepend=np.nan)
    # prices are decimals: a change within float noise of zero is no change (TA-Lib agrees)
    change[np.abs(change) <= 1e-12 * np.abs(tp)] = 0.0
    positive = np.where(change > 0, flow, 0.0)
    negative = np.where(change < 0, flow, 0.0)
    out = np.full(tp.shape[0], np.nan)
    if tp.shape[0] > length:
        pos = sliding_window_view(positive[1:], length).sum(axis=1)
        neg = sliding_window_view(negative[1:], length).sum(axis=1)
        total = pos + neg
        with np.errstate(divide="ignore", invalid="ignore"):
            out[length:] = np.where(total > 0, 100.0 * pos / total, np.nan)
    return pd.Series(out, index=close.index, name=f"MFI_{length}")


def eom(
    high: pd.Series,
    low: pd.Series,
    close: pd.Series,
    volume: pd.Series,
    length: int = 14,
    divisor: float = 100_000_000,
) -> pd.Series:
    """Ease of Movement: SMA of (midpoint move) / ((volume / divisor) / (high - low))."""
    hi, lo = high.to_numpy(dtype=float), low.to_numpy(dtype=float)
    vol = volume.to_numpy(dtype=float)
    mid = (hi + lo) / 2.0
    distance = np.diff(mid, prepend=np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = np.where(vol > 0, distance * (hi - lo) * divisor / vol, np.nan)
    out = np.full(raw.shape[0], np.nan)
    if raw.shape[0] >= length:
        out[length - 1 :] = sliding_window_view(raw, length).mean(axis=1)
    return pd.Series(out, index=close.index, name=f"EOM_{length}")


def psar(
    high: pd.Series,
    low: pd.Series,
    close: pd.Series,
    af0: float = 0.02,
    af: float = 0.02,
    max_af: float = 0.2,
) -> pd.DataFrame:
    """Parabolic SAR as one value and a direction (+1 long, -1 short).

    pandas-ta reports the stop in two columns, one NaN while the other holds the value; an agent
    needs the stop and which side it is on, so this folds them, using pandas-ta's own computation.
    """
    import pandas_ta as ta  # imported late: slow, and only computation needs it

    # talib=False as for every pandas-ta call (its own computation, not TA-Lib's); pandas-ta
    # annotates every **kwargs value as a dict, so the flag does not type-check
    frame = ta.psar(high=high, low=low, close=close, af0=af0, af=af, max_af=max_af,
                    talib=False)  # type: ignore[arg-type]
    long_stop = frame.iloc[:, 0].to_numpy(dtype=float)
    short_stop = frame.iloc[:, 1].to_numpy(dtype=float)
    value = np.where(np.isnan(long_stop), short_stop, long_stop)
    direction = np.where(~np.isnan(long_stop), 1.0, np.where(np.isnan(short_stop), np.nan, -1.0))
    return pd.DataFrame({"PSAR_value": value, "PSARd_direction": direction}, index=close.index)
