"""The audit trail's parameter JSON is exactly ``json.dumps(..., sort_keys=True)``."""

from __future__ import annotations

import json
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from app.runtime.recorders import _json_value, params_json

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=10),
    st.decimals(allow_nan=False, allow_infinity=False, places=4),
    st.floats(allow_nan=False, allow_infinity=False), st.lists(st.text(max_size=3), max_size=3),
    st.binary(max_size=4),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), VALUES, max_size=6))
def test_params_json_matches_the_general_encoder(params: dict) -> None:
    assert params_json(params) == json.dumps(params, default=_json_value, sort_keys=True)


def test_common_parameters_are_written_directly() -> None:
    params = {"symbol": "BTC/USDT", "limit": 1, "end_time_ms": None, "price": Decimal("1.50")}
    assert params_json(params) == (
        '{"end_time_ms": null, "limit": 1, "price": "1.5", "symbol": "BTC/USDT"}'
    )
