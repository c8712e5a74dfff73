"""Fixtures for the indicator tests: real candles, loaded once per session."""

from __future__ import annotations

import pytest

from app.indicators.catalogue import default_catalogue
from app.indicators.model import Catalogue
from app.market.csv_loader import LoadedFile, load_csv
from app.market.series import KlineSeries
from tests.helpers.paths import BTC_USD_1H, BTC_USDT_1H


@pytest.fixture(scope="session")
def catalogue() -> Catalogue:
    return default_catalogue()


@pytest.fixture(scope="session")
def btc_1h() -> KlineSeries:
    """20,000 hourly Coinbase BTC/USD candles (2017-07 to 2019-10)."""
    return load_csv(BTC_USD_1H).series


@pytest.fixture(scope="session")
def btc_usdt_file() -> LoadedFile:
    """585 hourly BTC/USDT candles: small enough to replay through the tools quickly."""
    return load_csv(BTC_USDT_1H)
