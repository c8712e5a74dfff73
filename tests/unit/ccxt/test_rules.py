"""Exchange precision, limits and fees become the broker's and the guard's MarketRules."""

import json
from decimal import Decimal

import pytest

from app.ccxt.rules import (
    DECIMAL_PLACES,
    SIGNIFICANT_DIGITS,
    TICK_SIZE,
    market_fees,
    market_rules,
    precision_step,
)
from app.domain.errors import InvalidOrderError, OperationalError
from tests.helpers.paths import REPO

BINANCE = json.loads((REPO / "tests/data/ccxt/binance_static_markets.json").read_text())


def test_binance_btc_usdt_rules_come_from_its_ccxt_market():
    """ccxt's static binance market (precision stored as decimal places, 2 and 5): tick 0.01,
    step 0.00001, min amount 1e-5, min cost 5."""
    rules = market_rules(BINANCE["BTC/USDT"], DECIMAL_PLACES)
    assert rules.tick == Decimal("0.01") and rules.step == Decimal("0.00001")
    assert rules.min_amount == Decimal("0.00001") and rules.min_notional == Decimal("5")
    assert rules.price_decimals == 2
    with pytest.raises(InvalidOrderError, match="minimum notional 5"):
        rules.check_notional(Decimal("0.00001"), Decimal("60000"))
    rules.check_price(Decimal("60000.01"), "price")
    with pytest.raises(InvalidOrderError, match="multiple of 0.01"):
        rules.check_price(Decimal("60000.001"), "price")


def test_tick_size_precision_is_the_tick_itself():
    market = {"symbol": "X/Y", "precision": {"price": 0.5, "amount": 0.001},
              "limits": {"amount": {"min": 0.01}, "cost": {"min": 10}}}
    rules = market_rules(market, TICK_SIZE)
    assert rules.tick == Decimal("0.5") and rules.step == Decimal("0.001")
    assert rules.min_amount == Decimal("0.01") and rules.min_notional == Decimal("10")


def test_decimal_places_precision_becomes_a_tick():
    market = {"symbol": "X/Y", "precision": {"price": 3, "amount": 2}, "limits": {}}
    rules = market_rules(market, DECIMAL_PLACES)
    assert rules.tick == Decimal("0.001") and rules.step == Decimal("0.01")
    assert rules.min_amount == Decimal("0.01") and rules.min_notional == 0


def test_significant_digits_and_missing_precision_fall_back_to_the_finest_tick():
    market = {"symbol": "X/Y", "precision": {"price": 5, "amount": None}}
    rules = market_rules(market, SIGNIFICANT_DIGITS)
    assert rules.tick == Decimal("0.00000001") and rules.step == Decimal("0.00000001")


def test_a_precision_that_is_not_a_number_is_an_operational_error():
    with pytest.raises(OperationalError, match="not a number"):
        precision_step("abc", TICK_SIZE)


def test_fees_are_the_markets_own_and_a_zero_maker_fee_stays_zero():
    assert market_fees(BINANCE["BTC/USDT"], Decimal("0.002")).taker == Decimal("0.001")
    fees = market_fees({"maker": 0.0, "taker": None}, Decimal("0.002"))
    assert fees.maker == 0 and fees.taker == Decimal("0.002")
