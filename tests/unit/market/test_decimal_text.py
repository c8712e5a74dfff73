"""``decimal_text``: the text a rounded price renders as, without building the Decimal."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.market.series import decimal_text, to_decimal
from app.tools.protocol.render import format_value


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15),
       st.integers(min_value=0, max_value=20))
def test_decimal_text_is_the_rendered_rounded_decimal(value: float, decimals: int) -> None:
    assert decimal_text(value, decimals) == format_value(to_decimal(value, decimals))


@pytest.mark.parametrize(("value", "decimals", "text"), [
    (7358.75, 2, "7358.75"), (7358.70, 2, "7358.7"), (7358.0, 2, "7358"), (-0.0, 2, "0"),
    (0.000000012, 8, "0.00000001"), (-0.000000001, 8, "0"), (1e20, 0, "100000000000000000000"),
])
def test_decimal_text_examples(value: float, decimals: int, text: str) -> None:
    assert decimal_text(value, decimals) == text


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_price_cannot_be_rendered(value: float) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        decimal_text(value, 2)
