"""Load kline CSV files (``timestamp_ms,open,high,low,close,volume``) with strict validation.

A backtest on a broken file gives wrong answers silently, so every problem is a ``DataFileError``
naming the file, the row and the field: a wrong header, non-numeric or non-finite cells, impossible
candles, duplicates, unsorted rows and (unless allowed) gaps.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.domain.errors import DataFileError
from app.domain.market import interval_ms, is_interval
from app.market.series import Floats, KlineSeries, Times

EXPECTED_HEADER = ["timestamp_ms", "open", "high", "low", "close", "volume"]
_NAME_RE = re.compile(r"^(?P<pair>[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*)_(?P<tf>\d+[smhdwM])(?:_|$)")
MAX_FILE_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LoadedFile:
    """A validated data file: its series, where it came from and what was noticed."""

    path: Path
    series: KlineSeries
    bar_ms: int
    gaps: int
    price_decimals: int


def symbol_from_pair(pair: str) -> str:
    """``BTC-USDT`` -> ``BTC/USDT``; ``XRP-USDT-PERP`` -> ``XRP/USDT:USDT``; ``GOOG`` stays."""
    parts = pair.upper().split("-")
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 3 and parts[2] == "PERP":
        return f"{parts[0]}/{parts[1]}:{parts[1]}"
    return f"{parts[0]}/{'-'.join(parts[1:])}"


def parse_file_name(path: Path) -> tuple[str, str] | None:
    """Read ``(symbol, interval)`` from a ``BASE-QUOTE_tf_…csv`` name, if it follows the pattern."""
    match = _NAME_RE.match(path.stem)
    if match is None or not is_interval(match.group("tf")):
        return None
    return symbol_from_pair(match.group("pair")), match.group("tf")


def _decimals(text: str) -> int:
    if "e" in text.lower():
        mantissa, _, exponent = text.lower().partition("e")
        frac = mantissa.partition(".")[2]
        return max(len(frac) - int(exponent), 0)
    return len(text.partition(".")[2])


def load_csv(
    path: Path,
    *,
    symbol: str | None = None,
    interval: str | None = None,
    allow_gaps: bool = True,
) -> LoadedFile:
    """Read and validate one kline file.

    Args:
        path: the CSV file.
        symbol, interval: override what the file name says.
        allow_gaps: when False, a step longer than one bar is an error naming both rows.

    Raises:
        DataFileError: with the file, row number (1-based, header is row 1) and field.
    """
    path = Path(path)
    named = parse_file_name(path)
    symbol = symbol or (named[0] if named else None)
    interval = interval or (named[1] if named else None)
    if symbol is None:
        raise DataFileError(
            f"{path.name}: cannot tell the symbol from the file name; name it like "
            "BTC-USDT_1h_….csv or give the symbol explicitly."
        )
    ts, values, price_decimals = _parse_candles(path, _read_rows(path))
    steps = _ascending_steps(path, ts)
    if interval is None:
        if not steps.size:
            raise DataFileError(f"{path.name}: one candle and no interval in the name.")
        interval = _interval_from_step(int(np.median(steps)), path)
    bar = interval_ms(interval)
    gaps = int((steps > bar).sum()) if not interval.endswith("M") else 0
    if gaps and not allow_gaps:
        first = int(np.argmax(steps > bar))
        raise DataFileError(
            f"{path.name}, row {first + 3}, field timestamp_ms: gap of "
            f"{(ts[first + 1] - ts[first]) / bar:g} bars after row {first + 2} "
            f"({gaps} gaps in all); fill the data or allow gaps."
        )
    series = KlineSeries(
        symbol=symbol,
        interval=interval,
        timestamp_ms=ts,
        open=values[:, 0].copy(),
        high=values[:, 1].copy(),
        low=values[:, 2].copy(),
        close=values[:, 3].copy(),
        volume=values[:, 4].copy(),
    )
    return LoadedFile(
        path=path,
        series=series,
        bar_ms=bar,
        gaps=gaps,
        price_decimals=min(max(price_decimals, 2), 10),
    )


def _read_rows(path: Path) -> list[list[str]]:
    """The candle rows under a checked header, blank lines left out."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise DataFileError(f"{path.name}: file is larger than {MAX_FILE_BYTES} bytes.")
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise DataFileError(f"{path}: cannot open ({exc.strerror or exc}).") from exc
    with handle:
        try:
            rows = list(csv.reader(handle))
        except (UnicodeDecodeError, csv.Error) as exc:
            raise DataFileError(f"{path.name}: not a readable UTF-8 CSV file ({exc}).") from exc
    if not rows:
        raise DataFileError(f"{path.name}: the file is empty.")
    header = [cell.strip().lower() for cell in rows[0]]
    if header != EXPECTED_HEADER:
        raise DataFileError(
            f"{path.name}: unexpected header {','.join(rows[0])!r}; expected "
            f"{','.join(EXPECTED_HEADER)!r} (open time in Unix milliseconds, then OHLCV)."
        )
    body = [row for row in rows[1:] if "".join(row).strip()]
    if not body:
        raise DataFileError(f"{path.name}: the file has a header but no candles.")
    return body


def _parse_candles(path: Path, body: list[list[str]]) -> tuple[Times, Floats, int]:
    """Times, OHLCV values and the prices' decimals (read from the first 2,000 rows).

    A clean file, the usual case, is converted and checked a column at a time; only a file with
    something wrong in it is walked row by row, to name the first bad cell by its row and field.
    """
    clean = _parse_clean(body)
    return clean if clean is not None else _parse_rows(path, body)


def _parse_clean(body: list[list[str]]) -> tuple[Times, Floats, int] | None:
    """The file's candles when every cell passes the checks ``_parse_rows`` makes, else None."""
    if any(len(row) != 6 for row in body):
        return None
    stamps, *columns = zip(*body, strict=True)
    digits = "".join(stamps)  # an empty stamp is left to int() to refuse
    if not (digits.isascii() and digits.isdigit()):
        return None
    count = len(body)
    try:
        ts = np.fromiter(map(int, stamps), np.int64, count)
        values = np.column_stack(
            [np.fromiter(map(float, column), np.float64, count) for column in columns]
        )
    except (ValueError, OverflowError):
        return None
    prices = values[:, :4]
    if not np.isfinite(values).all() or (prices <= 0).any() or (values[:, 4] < 0).any():
        return None
    o, h, low, c = prices.T
    if (h < np.maximum(o, c)).any() or (low > np.minimum(o, c)).any():
        return None
    decimals = max(_decimals(cell.strip()) for column in columns[:4] for cell in column[:2000])
    return ts, values, decimals


def _parse_rows(path: Path, body: list[list[str]]) -> tuple[Times, Floats, int]:
    """``_parse_candles`` a row at a time: every cell checked, the first bad one named by its
    row and field."""
    count = len(body)
    ts = np.empty(count, dtype=np.int64)
    values = np.empty((count, 5), dtype=np.float64)
    price_decimals = 0
    for i, row in enumerate(body):
        line = i + 2
        if len(row) != 6:
            raise DataFileError(f"{path.name}, row {line}: expected 6 cells, found {len(row)}.")
        stamp = row[0].strip()
        if not (stamp.isascii() and stamp.isdigit()) or len(stamp) > 19 or int(stamp) >= 2**63:
            raise DataFileError(
                f"{path.name}, row {line}, field timestamp_ms: {stamp!r} is not a whole number of "
                "milliseconds."
            )
        ts[i] = int(stamp)
        for j, name in enumerate(EXPECTED_HEADER[1:]):
            cell = row[j + 1].strip()
            values[i, j] = _number(path, line, name, cell)
            if j < 4 and i < 2000:
                price_decimals = max(price_decimals, _decimals(cell))
        o, h, low, c = values[i, :4]
        if h < max(o, c) or low > min(o, c) or low > h:
            raise DataFileError(
                f"{path.name}, row {line}: impossible candle (high {h} must be >= open/close and "
                f"low {low} <= open/close)."
            )
    return ts, values, price_decimals


def _number(path: Path, line: int, name: str, cell: str) -> float:
    """One OHLCV cell: a finite number, positive (volume may be zero)."""
    try:
        number = float(cell)
    except ValueError:
        raise DataFileError(
            f"{path.name}, row {line}, field {name}: {cell!r} is not a number."
        ) from None
    if not math.isfinite(number):
        raise DataFileError(f"{path.name}, row {line}, field {name}: {cell!r} is not finite.")
    if number < 0 or (number == 0 and name != "volume"):
        raise DataFileError(
            f"{path.name}, row {line}, field {name}: {cell} must be "
            f"{'non-negative' if name == 'volume' else 'positive'}."
        )
    return number


def _ascending_steps(path: Path, ts: Times) -> Times:
    """The steps between candles, refused when a time repeats or goes back."""
    steps = np.diff(ts)
    if steps.size and (steps <= 0).any():
        bad = int(np.argmax(steps <= 0))
        kind = "duplicate" if steps[bad] == 0 else "out-of-order"
        raise DataFileError(
            f"{path.name}, row {bad + 3}, field timestamp_ms: {kind} timestamp {ts[bad + 1]} after "
            f"{ts[bad]} at row {bad + 2}; rows must be sorted ascending without duplicates."
        )
    return steps


def _interval_from_step(step: int, path: Path) -> str:
    for unit, ms in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)):
        if step % ms == 0:
            return f"{step // ms}{unit}"
    raise DataFileError(f"{path.name}: cannot infer the interval from a {step} ms step.")
