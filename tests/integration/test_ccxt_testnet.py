"""Opt-in, read-only: the live broker's reads against a real exchange's public testnet.

Skipped unless ``KESTREL_TESTNET`` names a ccxt exchange with a sandbox (e.g. ``binance``) and its
testnet keys are set as ``KESTREL_EXCHANGE_<ID>_API_KEY`` / ``_SECRET`` (the same names the app
reads, see ``app.ccxt.credentials``). It places nothing: it loads the markets, reads the balances,
the open orders and the trade history, and checks that start-up reconciliation of an empty
journal finds no in-flight order. CI never sets the variable; it is for a person with keys:

    KESTREL_TESTNET=binance KESTREL_EXCHANGE_BINANCE_API_KEY=... \\
    KESTREL_EXCHANGE_BINANCE_SECRET=... .venv/bin/python -m pytest -m testnet
"""

from __future__ import annotations

import asyncio
import os

import pytest

from app.ccxt.broker import CcxtBroker, build_broker_exchange
from app.ccxt.credentials import load_keys
from app.ccxt.market import CcxtMarketData
from app.ccxt.reconcile import Reconciler
from app.domain.errors import OperationalError
from app.secrets import SecretStore
from app.store.order_journal import OrderJournal

EXCHANGE = os.environ.get("KESTREL_TESTNET", "")
pytestmark = [
    pytest.mark.testnet,
    pytest.mark.skipif(not EXCHANGE, reason="KESTREL_TESTNET names no exchange"),
]


def test_the_testnet_account_reads_and_reconciles_without_placing_anything(tmp_path):
    try:
        keys = load_keys(EXCHANGE, SecretStore())
    except OperationalError as exc:
        pytest.skip(str(exc))

    async def scenario() -> None:
        exchange = build_broker_exchange(EXCHANGE, None, keys)
        exchange.set_sandbox_mode(True)
        market = CcxtMarketData(exchange)
        await market.start()
        broker = CcxtBroker(exchange, market, OrderJournal(tmp_path / "kestrel.db"))
        try:
            account = await broker.account()
            assert account.quote_currency == "USDT"
            await broker.open_orders()
            report = await Reconciler(broker).startup()
            assert report.unresolved == [] and report.not_sent == []
        finally:
            await broker.close()
            broker.journal.close()

    asyncio.run(scenario())
