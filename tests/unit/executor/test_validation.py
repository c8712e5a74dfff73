"""Validation and coercion from the ToolSpec: what a handler receives for what the model wrote."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.errors import ErrorCode, InvalidParameterError, ToolError
from app.tools.protocol.call import ParamNode
from app.tools.protocol.parser import parse_response
from app.tools.protocol.render import Element, el
from app.tools.spec import (
    AgentContext,
    ParamSpec,
    ParamType,
    Permission,
    ToolSpec,
    coerce,
    validate,
)
from tests.unit.protocol.sample_tools import FakeWorld, build_sample_specs

SPECS = {spec.name: spec for spec in build_sample_specs(FakeWorld())}


def _validate(tool: str, xml: str) -> dict[str, object]:
    parsed = parse_response(xml, SPECS)
    assert parsed.call is not None, parsed.error
    return validate(SPECS[tool], parsed.call.params)


def _error(tool: str, xml: str) -> ToolError:
    with pytest.raises(ToolError) as caught:
        _validate(tool, xml)
    return caught.value


def test_defaults_fill_every_optional_parameter() -> None:
    args = _validate(
        "create_order",
        "<create_order><symbol>BTC/USDT</symbol><side>SELL</side><quantity>1</quantity>"
        "</create_order>",
    )
    assert args == {
        "symbol": "BTC/USDT",
        "side": "SELL",
        "quantity": Decimal("1"),
        "order_type": "MARKET",
        "price": None,
        "reduce_only": False,
    }


def test_values_are_typed_and_canonical() -> None:
    args = _validate(
        "create_order",
        "<create_order><symbol> BTC/USDT </symbol><side>sell</side><order_type>limit</order_type>"
        "<quantity>0.00100</quantity><price>+24999.5</price><reduce_only>TRUE</reduce_only>"
        "</create_order>",
    )
    assert args["symbol"] == "BTC/USDT"
    assert (args["side"], args["order_type"]) == ("SELL", "LIMIT")
    assert args["quantity"] == Decimal("0.001") and isinstance(args["quantity"], Decimal)
    assert args["price"] == Decimal("24999.5")
    assert args["reduce_only"] is True


@pytest.mark.parametrize(
    ("text", "value"), [("yes", True), ("1", True), ("no", False), ("0", False)]
)
def test_booleans_accept_the_usual_spellings(text: str, value: bool) -> None:
    args = _validate(
        "create_new_agent_instance",
        "<create_new_agent_instance><agent_name_label>A</agent_name_label><initial_config_json>{}"
        f"</initial_config_json><start_immediately>{text}</start_immediately>"
        "</create_new_agent_instance>",
    )
    assert args["start_immediately"] is value


def test_an_empty_optional_number_means_its_default() -> None:
    args = _validate(
        "get_historical_klines",
        "<get_historical_klines><symbol>BTC/USDT</symbol><interval>1H</interval><limit> </limit>"
        "<end_time_ms></end_time_ms></get_historical_klines>",
    )
    assert args == {"symbol": "BTC/USDT", "interval": "1h", "limit": 100, "end_time_ms": None}


def test_long_parameters_hold_millisecond_timestamps() -> None:
    args = _validate(
        "get_historical_klines",
        "<get_historical_klines><symbol>BTC/USDT</symbol><interval>4h</interval>"
        "<end_time_ms>1700000000000</end_time_ms></get_historical_klines>",
    )
    assert args["end_time_ms"] == 1_700_000_000_000


def test_base64_tolerates_line_breaks_and_decodes_to_bytes() -> None:
    args = _validate(
        "write_agent_memory_file",
        "<write_agent_memory_file><file_path>a.md</file_path><content_base64>\n  aGVsbG8g\n"
        "  d29ybGQ=\n</content_base64></write_agent_memory_file>",
    )
    assert args["content_base64"] == b"hello world"
    assert args["file_type_hint"] is None


def test_json_objects_become_dicts() -> None:
    args = _validate(
        "create_new_agent_instance",
        "<create_new_agent_instance><agent_name_label>A</agent_name_label><initial_config_json>"
        '{"symbols": ["BTC/USDT"], "risk": {"max_weight": 0.2}, "note": "a &amp; b"}'
        "</initial_config_json></create_new_agent_instance>",
    )
    assert args["initial_config_json"] == {
        "symbols": ["BTC/USDT"],
        "risk": {"max_weight": 0.2},
        "note": "a & b",
    }
    assert args["start_immediately"] is True


def test_lists_and_maps_keep_order_and_names() -> None:
    tickers = _validate(
        "get_current_ticker_info",
        "<get_current_ticker_info><symbols><symbol>SOL/USDT</symbol><symbol> BTC/USDT </symbol>"
        "</symbols></get_current_ticker_info>",
    )
    assert tickers == {"symbols": ["SOL/USDT", "BTC/USDT"]}
    settings_args = _validate(
        "update_agent_settings",
        '<update_agent_settings><settings><setting name="risk">high</setting>'
        '<setting name="interval"> 4h </setting></settings></update_agent_settings>',
    )
    assert settings_args == {"settings": {"risk": "high", "interval": "4h"}}


def test_errors_name_the_parameter_and_the_allowed_values() -> None:
    error = _error(
        "get_order_book", "<get_order_book><symbol>X</symbol><limit>0</limit></get_order_book>"
    )
    assert error.code is ErrorCode.INVALID_PARAMETER
    assert error.message == "Parameter <limit> must be at least 1, got 0."
    assert error.details == {"parameter": "limit", "minimum": "1", "got": "0"}
    error = _error(
        "get_historical_klines",
        "<get_historical_klines><symbol>X</symbol><interval>2h</interval></get_historical_klines>",
    )
    assert error.details["allowed"] == ["1m", "5m", "15m", "1h", "4h", "1d"]


def test_a_missing_parameter_shows_how_to_write_it() -> None:
    error = _error(
        "create_order", "<create_order><symbol>X</symbol><side>BUY</side></create_order>"
    )
    assert error.code is ErrorCode.MISSING_PARAMETER
    assert "<create_order> needs <quantity> (Quantity in base units)" in error.message
    assert "Add <quantity>decimal</quantity> inside <create_order>" in error.message


def test_an_empty_required_number_is_an_error_not_a_default() -> None:
    error = _error(
        "create_order",
        "<create_order><symbol>X</symbol><side>BUY</side><quantity/></create_order>",
    )
    assert error.code is ErrorCode.INVALID_PARAMETER
    assert "must be a decimal number" in error.message


def test_string_length_bounds_are_checked() -> None:
    spec = ParamSpec("code", ParamType.STRING, "A code", minimum=3, maximum=5)
    assert coerce(spec, ParamNode("code", " abcd ")) == "abcd"
    with pytest.raises(InvalidParameterError, match="must be at least 3 characters, got 2"):
        coerce(spec, ParamNode("code", "ab"))
    with pytest.raises(InvalidParameterError, match="must be at most 5 characters, got 6"):
        coerce(spec, ParamNode("code", "abcdef"))


def test_a_zero_decimal_with_many_places_is_still_zero() -> None:
    assert coerce(SPECS["create_order"].params[4], ParamNode("price", "0." + "0" * 40)) == 0


_INT = ParamSpec("n", ParamType.INTEGER, "n", minimum=-(10**12), maximum=10**12)
_DEC = ParamSpec("d", ParamType.DECIMAL, "d", minimum=Decimal("-1e12"), maximum=Decimal("1e12"))


@settings(max_examples=100, deadline=None, database=None)
@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_any_integer_in_range_round_trips(value: int) -> None:
    assert coerce(_INT, ParamNode("n", f" {value} ")) == value


@settings(max_examples=100, deadline=None, database=None)
@given(
    st.decimals(
        min_value=Decimal("-1e12"),
        max_value=Decimal("1e12"),
        allow_nan=False,
        allow_infinity=False,
        places=8,
    )
)
def test_any_decimal_in_range_round_trips_exactly(value: Decimal) -> None:
    assert coerce(_DEC, ParamNode("d", format(value, "f"))) == value  # as tools render numbers


@settings(max_examples=100, deadline=None, database=None)
@given(st.text(max_size=30))
def test_any_text_for_a_number_is_a_value_or_a_clear_error(text: str) -> None:
    for spec in (_INT, _DEC):
        try:
            coerce(spec, ParamNode(spec.name, text))
        except InvalidParameterError as exc:
            assert exc.message.startswith(f"Parameter <{spec.name}>")
            assert exc.details["parameter"] == spec.name


def test_a_spec_without_parameters_rejects_any() -> None:
    async def handler(ctx: AgentContext, args: dict[str, Any]) -> Element:
        return el("account_balance")

    spec = ToolSpec("get_account_balance", "Account", "Balances.", (), Permission.ACCOUNT, handler)
    with pytest.raises(InvalidParameterError, match="Its parameters are: none"):
        validate(spec, (ParamNode("symbol", "X"),))
    assert validate(spec, ()) == {}
