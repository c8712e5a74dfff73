"""Shared pytest fixtures of the ccxt integration tests: one fake exchange per module."""

import pytest

from app.ccxt.gate import GATES
from tests.helpers.fake_exchange import FakeExchangeServer

# 2026-02-08 06:37:15.250 UTC: mid-bucket for every interval from 5m up, near the recordings.
START_MS = 1_770_532_635_250
VENUES = ["binance", "okx"]


@pytest.fixture(scope="module", name="fake_exchange")
def fake_exchange_fixture():
    with FakeExchangeServer(START_MS) as server:
        yield server


@pytest.fixture(name="server")
def server_fixture(fake_exchange):
    fake_exchange.clear_faults()
    fake_exchange.requests.clear()
    fake_exchange.now.set(START_MS)
    fake_exchange.binance_account.reset()  # each test starts with the account's first balances
    fake_exchange.reset_markets()  # and with every market listed as recorded
    GATES.reset(clock=fake_exchange.now)  # an exchange's pauses run on the fake's time
    return fake_exchange
