"""Building a ccxt exchange from settings: defaults, overrides, unknown ids, ccxt missing."""

import decimal
from decimal import Decimal

import pytest

from app.ccxt import client
from app.ccxt.client import build_exchange, deep_merge, exchange_config
from app.config import settings_from_mapping
from app.config.exchanges import ExchangeSettings
from app.domain.errors import OperationalError


def settings(**ccxt_config):
    return ExchangeSettings.model_validate({"timeout_s": 4, "ccxt_config": ccxt_config})


def test_rate_limiting_is_on_and_the_timeout_and_spot_only_defaults_apply():
    config = exchange_config(settings())
    assert config["enableRateLimit"] is True
    assert config["timeout"] == 4000
    assert config["options"] == {"fetchMarkets": {"types": ["spot"]}}


def test_a_url_override_replaces_one_api_url_and_keeps_the_others():
    exchange = build_exchange("binance", settings(
        urls={"api": {"public": "http://127.0.0.1:9/api/v3"}}, httpsProxy="http://proxy:8080",
        options={"fetchMarkets": {"types": ["spot", "linear"]}}))
    assert exchange.urls["api"]["public"] == "http://127.0.0.1:9/api/v3"
    assert exchange.urls["api"]["sapi"].startswith("https://api.binance.com")
    assert exchange.httpsProxy == "http://proxy:8080"
    assert exchange.options["fetchMarkets"]["types"] == ["spot", "linear"]
    assert exchange.timeout == 4000 and exchange.enableRateLimit


def test_an_unknown_exchange_id_names_the_closest_ones():
    with pytest.raises(OperationalError, match="no exchange 'binanse'.*Closest: binance"):
        build_exchange("binanse")


def test_ccxt_missing_is_an_operational_error_saying_how_to_install(monkeypatch):
    def missing(name):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(client.importlib, "import_module", missing)
    with pytest.raises(OperationalError, match="pip install"):
        build_exchange("binance")


def test_workspace_settings_carry_per_exchange_ccxt_options():
    loaded = settings_from_mapping({"exchanges": {"okx": {"ccxt_config": {
        "urls": {"api": {"rest": "http://127.0.0.1:9000"}}, "socksProxy": "socks5://h:1"}}}})
    okx = loaded.exchanges.get("okx")
    assert okx.ccxt_config.to_ccxt() == {
        "urls": {"api": {"rest": "http://127.0.0.1:9000"}}, "socksProxy": "socks5://h:1"}
    assert loaded.exchanges.get("kraken") == ExchangeSettings()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"okx": {"ccxt_config": {"apiKey": "k", "secret": "s"}}}, "keyring"),
        ({"okx": {"ccxt_config": {"enableRateLimit": False}}}, "unknown key"),
        ({"okx": {"timeout": 3}}, "unknown key 'exchanges.okx.timeout'"),
        ({"OKX": {}}, "pattern"),
        ({"okx": {"timeout_s": 0}}, "greater than 0"),
    ],
    ids=["credentials", "rate-limit-off", "typo", "id-case", "timeout"],
)
def test_bad_exchange_settings_are_refused_naming_the_key(data, message):
    with pytest.raises(OperationalError, match=message):
        settings_from_mapping({"exchanges": data})


def test_deep_merge_does_not_touch_its_inputs():
    base = {"a": {"b": 1, "c": [1]}}
    out = deep_merge(base, {"a": {"b": 2}})
    assert out == {"a": {"b": 2, "c": [1]}} and base == {"a": {"b": 1, "c": [1]}}


def test_formatting_an_order_for_the_exchange_leaves_kestrels_rounding_as_it_was() -> None:
    """ccxt rounds prices in the thread's decimal context and would leave it rounding half up:
    every P&L Kestrel rounds afterwards would round otherwise."""
    exchange = build_exchange("binance")
    exchange.markets = {"BTC/USDT": {"precision": {"price": 0.01, "amount": 0.00001}}}
    exchange.precisionMode = 4  # TICK_SIZE
    with decimal.localcontext() as before:
        assert exchange.price_to_precision("BTC/USDT", 9321.055) == "9321.06"
        assert decimal.getcontext().rounding == decimal.ROUND_HALF_EVEN == before.rounding
        assert not decimal.getcontext().traps[decimal.Underflow]
        assert Decimal("2.5").quantize(Decimal(1)) == Decimal(2)
