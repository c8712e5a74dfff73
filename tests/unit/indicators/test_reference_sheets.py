"""The two indicators Kestrel computes itself (CCI, MFI) against StockCharts' worked spreadsheets,
as shipped with the ``ta`` library's tests: an independent reference beside TA-Lib."""

from __future__ import annotations

import csv
from datetime import UTC, datetime

import numpy as np

from app.indicators.engine import compute
from app.market.series import KlineSeries
from tests.helpers.paths import INDICATOR_SHEETS


def _sheet(name: str) -> list[dict[str, str]]:
    with (INDICATOR_SHEETS / name).open(newline="") as handle:
        return list(csv.DictReader(handle))


def _series(rows: list[dict[str, str]], date_key: str) -> KlineSeries:
    stamps = [
        int(datetime.strptime(r[date_key], "%d-%b-%y").replace(tzinfo=UTC).timestamp() * 1000)
        for r in rows
    ]

    def col(key: str) -> np.ndarray:
        return np.array([float(r[key]) if r.get(key) else 0.0 for r in rows])

    close = col("Close")
    return KlineSeries("REF", "1d", np.array(stamps), col("Open") if "Open" in rows[0] else close,
                       col("High"), col("Low"), close, col("Volume"))


def _expected(rows: list[dict[str, str]], key: str) -> np.ndarray:
    return np.array([float(r[key]) if r[key] else np.nan for r in rows])


def test_cci_matches_the_stockcharts_sheet(catalogue) -> None:
    rows = _sheet("cs-cci.csv")
    series = _series(rows, "Microsoft Date")
    ours = compute(catalogue.get("CCI"), {"length": 20, "c": 0.015}, series).columns["value"]
    expected = _expected(rows, "CCI")
    known = ~np.isnan(expected)
    assert known.sum() >= 10
    np.testing.assert_allclose(ours[known], expected[known], atol=1e-4)  # sheet: 4 decimals
    assert np.isnan(ours[~known]).all()


def test_mfi_matches_the_stockcharts_sheet(catalogue) -> None:
    rows = _sheet("cs-mfi.csv")
    series = _series(rows, "Date")
    ours = compute(catalogue.get("MFI"), {"length": 14}, series).columns["value"]
    expected = _expected(rows, "MFI")
    known = ~np.isnan(expected)
    assert known.sum() >= 10
    np.testing.assert_allclose(ours[known], expected[known], atol=1e-5)  # sheet: 5 decimals
    assert np.isnan(ours[~known]).all()
