"""The catalogue: its size, its data's consistency, and that every entry computes on real data with
its first value exactly where its documented warm-up says."""

from __future__ import annotations

import numpy as np
import pytest

from app.domain.errors import InvalidParameterError, UnknownIndicatorError
from app.indicators.catalogue import ALL_INDICATORS
from app.indicators.engine import compute
from app.indicators.model import CATEGORIES, IndicatorDef, bind_params, describe_values

IDS = [indicator.name for indicator in ALL_INDICATORS]


def _bumped(indicator: IndicatorDef) -> dict[str, int | float]:
    """Non-default parameters that keep every ordering rule (each integer + 3)."""
    return {
        name: value + 3 if isinstance(value, int) else value
        for name, value in indicator.defaults().items()
    }


def test_catalogue_offers_at_least_forty_indicators_in_every_category(catalogue) -> None:
    assert len(catalogue) >= 40
    assert {indicator.category for indicator in catalogue} == set(CATEGORIES)
    for required in ("RSI", "MACD", "BBANDS", "STOCH", "ADX", "AROON", "KC", "DONCHIAN",
                     "SUPERTREND", "ICHIMOKU", "SMA", "EMA", "WMA", "ATR", "NATR", "OBV", "CCI",
                     "MFI", "WILLR", "ROC", "MOM"):
        assert catalogue.get(required).name == required


def test_documented_output_columns_of_the_main_indicators(catalogue) -> None:
    assert catalogue.get("MACD").output_names == ("macd", "signal", "histogram")
    assert catalogue.get("BBANDS").output_names == (
        "lower", "middle", "upper", "bandwidth", "percent"
    )
    assert catalogue.get("STOCH").output_names == ("k", "d")
    assert catalogue.get("ADX").output_names == ("adx", "plus_di", "minus_di")
    assert catalogue.get("AROON").output_names == ("up", "down", "oscillator")
    assert catalogue.get("RSI").output_names == ("value",)


@pytest.mark.parametrize("indicator", ALL_INDICATORS, ids=IDS)
def test_every_indicator_is_consistent_data(indicator: IndicatorDef) -> None:
    assert indicator.name == indicator.name.upper()
    assert indicator.description
    assert len(set(indicator.output_names)) == len(indicator.outputs)
    for param in indicator.params:
        assert param.kind in (int, float)
        assert param.minimum <= param.default <= param.maximum, param.name
        assert isinstance(param.default, param.kind)
        assert param.description
    for first, second in indicator.ordered:
        assert indicator.defaults()[first] < indicator.defaults()[second]


@pytest.mark.parametrize("indicator", ALL_INDICATORS, ids=IDS)
def test_every_indicator_computes_on_real_data_from_its_documented_warm_up(
    indicator: IndicatorDef, btc_1h
) -> None:
    series = btc_1h.head(3000)
    for params in (indicator.defaults(), _bumped(indicator)):
        result = compute(indicator, params, series)
        assert tuple(result.columns) == indicator.output_names
        assert result.first_valid == indicator.min_bars(params) - 1, describe_values(params)
        for values in result.columns.values():
            assert values.shape == (len(series),)
            assert np.isfinite(values[-200:]).mean() > 0.95


def test_lookup_is_case_insensitive_and_suggests_close_names(catalogue) -> None:
    assert catalogue.get(" bbands ").name == "BBANDS"
    with pytest.raises(UnknownIndicatorError) as info:
        catalogue.get("MCAD")
    assert "MACD" in info.value.details["closest"]
    assert "MACD" in info.value.message


def test_binding_fills_defaults_and_accepts_period_for_length(catalogue) -> None:
    rsi = catalogue.get("RSI")
    assert bind_params(rsi, {}) == {"length": 14}
    assert bind_params(rsi, {"period": "21"}) == {"length": 21}
    bbands = catalogue.get("BBANDS")
    assert bind_params(bbands, {"std": "2.5"}) == {"length": 20, "std": 2.5}
    assert describe_values(bind_params(catalogue.get("MACD"), {"fast": "8"})) == (
        "fast=8,slow=26,signal=9"
    )


@pytest.mark.parametrize(
    ("name", "raw", "fragment"),
    [
        ("RSI", {"lenght": "14"}, "Its parameters are: length"),
        ("RSI", {"length": "14.5"}, "whole number"),
        ("RSI", {"length": "abc"}, "whole number"),
        ("BBANDS", {"std": "wide"}, "must be a decimal number"),
        ("RSI", {"length": "1"}, "between 2 and 500"),
        ("BBANDS", {"std": "11"}, "between 0.1 and 10"),
        ("MACD", {"fast": "30"}, "smaller than 'slow'"),
    ],
)
def test_binding_rejects_bad_parameters_with_a_specific_message(
    catalogue, name: str, raw: dict[str, str], fragment: str
) -> None:
    with pytest.raises(InvalidParameterError) as info:
        bind_params(catalogue.get(name), raw)
    assert fragment in info.value.message
    assert info.value.details["indicator"] == name
