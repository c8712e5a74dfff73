"""Causality of every catalogued indicator: its value at bar t over the whole series equals its
value over bars[:t+1]. This is what lets the engine compute a replay's full series once and slice it
at the cursor, and it is what keeps an agent in a backtest from seeing the future."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from app.indicators.catalogue import ALL_INDICATORS
from app.indicators.engine import compute
from app.indicators.model import IndicatorDef
from app.market.series import KlineSeries


def _same(a: float, b: float) -> bool:
    if np.isnan(a) or np.isnan(b):
        return bool(np.isnan(a) and np.isnan(b))
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-9)


def _look_ahead(indicator: IndicatorDef, series: KlineSeries) -> tuple[list[tuple], int]:
    """Bars where the whole-series value differs from the prefix value, and how many real values
    were compared."""
    params = indicator.defaults()
    whole = compute(indicator, params, series)
    first = indicator.min_bars(params) - 1
    mismatches, compared = [], 0
    for t in sorted({first, first + 7, 150, 277, len(series) - 2}):
        prefix = compute(indicator, params, series.head(t + 1))
        for name, values in whole.columns.items():
            if not _same(values[t], prefix.columns[name][t]):
                mismatches.append((name, t, values[t], prefix.columns[name][t]))
            compared += int(not np.isnan(values[t]))
    return mismatches, compared


@pytest.fixture(scope="module")
def stretch(btc_1h) -> KlineSeries:
    """400 real hourly candles from a volatile stretch (spring 2018)."""
    return btc_1h._slice(slice(6000, 6400))


@pytest.mark.parametrize("indicator", ALL_INDICATORS, ids=[i.name for i in ALL_INDICATORS])
def test_value_at_each_bar_depends_only_on_bars_up_to_it(
    indicator: IndicatorDef, stretch: KlineSeries
) -> None:
    mismatches, compared = _look_ahead(indicator, stretch)
    assert mismatches == []
    assert compared >= len(indicator.outputs) * 4  # real values were compared, not only NaN


@pytest.mark.parametrize(
    ("name", "fixed"),
    [("DPO", {"centered": True}), ("ICHIMOKU", {"include_chikou": True})],
)
def test_the_check_catches_the_look_ahead_forms_left_out_of_the_catalogue(
    catalogue, stretch: KlineSeries, name: str, fixed: dict
) -> None:
    causal = catalogue.get(name)
    outputs = causal.outputs + ((("chikou", "ICS"),) if name == "ICHIMOKU" else ())
    leaky = dataclasses.replace(causal, fixed={**causal.fixed, **fixed}, outputs=outputs)
    mismatches, _ = _look_ahead(leaky, stretch)
    assert mismatches


def test_ichimoku_offers_no_forward_looking_chikou_span(catalogue) -> None:
    ichimoku = catalogue.get("ICHIMOKU")
    assert "chikou" not in ichimoku.output_names
    assert ichimoku.fixed["include_chikou"] is False
