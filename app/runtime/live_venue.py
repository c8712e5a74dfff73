"""The ``live`` venue: real orders on an exchange account, through ``CcxtBroker``.

Live is opt-in twice. The workspace opens this venue only with the person's confirmation naming
the exchange (``VenueSpec.confirmed``: the window's dialog, ``kestrel run --confirm-live``), and
each agent places orders here only once the person has allowed it (``LiveGrants``). Keys come
from the OS keyring (``app.ccxt.credentials``), nowhere else.

Parts: ``LiveClock`` (wall time, never back) + ``CcxtMarketData`` (public data) + ``CcxtBroker``
(the order journal in the workspace database) + ``LiveDriver``, whose read each tick is
``AccountWatch``: in-flight orders looked up when due, open orders followed (fills announced as
the journal stores them), the balances read (``AccountRefreshed``: the kill switch judges the
loss halts on them) and, every ``sweep_s``, the full sweep (unknown orders, missed fills, the
balance check). Before any agent runs, ``LiveStartup`` reconciles (``Venue.before_agents``).
While the exchange holds requests (a 418 ban or a 429 rate limit, ``app.ccxt.gate``), the driver
and ``AccountWatch`` skip their polls instead of failing every tick, the status bar says until
when, and ``ExchangeBanned`` goes to the bus.

Connecting is network I/O on the world's loop (``connect_live``); building is not
(``open_live``), as for the live-paper venue.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from app.ccxt.broker import CcxtBroker, build_broker_exchange
from app.ccxt.credentials import load_keys
from app.ccxt.gate import gate_for
from app.ccxt.live_grants import LiveGrants
from app.ccxt.market import CcxtMarketData
from app.ccxt.reconcile import ReconcilePolicy, Reconciler
from app.ccxt.stops import DEFAULT_BAND
from app.config import ExchangesSettings
from app.domain.errors import OperationalError, ToolError
from app.runtime.live_clock import LiveClock
from app.runtime.live_driver import LiveDriver
from app.runtime.live_startup import BusReports, LiveStartup
from app.runtime.venue import Venue, VenueSpec
from app.secrets import SecretStore
from app.store.order_journal import OrderJournal
from app.trading.live_account import LiveAccount

SWEEP_S = 30.0
ACCOUNT_S = 10.0


def live_label(exchange: str) -> str:
    return f"LIVE {exchange} (real money)"


def confirmation_text(exchange: str) -> str:
    """What the person confirms before a workspace trades live (the dialog and the terminal)."""
    return (f"Trade LIVE on {exchange}: agents you allow will place REAL orders with REAL money "
            f"on your {exchange} account, through the Risk Guard and your approval settings. "
            "Losses are real and cannot be undone.")


def check_confirmed(spec: VenueSpec) -> None:
    """Refuse a live venue the person has not confirmed for this exchange.

    Raises:
        OperationalError: no exchange, or no confirmation naming it.
    """
    if not spec.exchange:
        raise OperationalError("the live venue needs an exchange: give its ccxt id, e.g. "
                               "--exchange binance")
    if spec.confirmed.strip().lower() != spec.exchange.lower():
        raise OperationalError(
            f"Live trading on {spec.exchange} was not confirmed. {confirmation_text(spec.exchange)}"
            f" To go ahead, confirm it in the window's dialog or pass --confirm-live "
            f"{spec.exchange}."
        )


async def connect_live(
    spec: VenueSpec, exchanges: ExchangesSettings, secrets: SecretStore | None = None
) -> VenueSpec:
    """``spec`` with its public market and its keyed account connected (markets loaded).

    Raises:
        OperationalError: not confirmed, keys missing (saying how to set them), or the
            exchange unreachable.
    """
    check_confirmed(spec)
    keys = load_keys(spec.exchange, secrets or SecretStore())
    settings = exchanges.get(spec.exchange)
    market = spec.market
    if market is None:
        try:
            market = await CcxtMarketData.open(
                spec.exchange, settings, clock=spec.time_source, symbols=spec.symbols or None,
                **spec.market_options)
        except ToolError as exc:
            raise OperationalError(
                f"Cannot open the LIVE {spec.exchange} market: {exc.message} Check the network "
                "connection (or the exchange's proxy and URLs in Settings > Exchanges)."
            ) from exc
    account = build_broker_exchange(spec.exchange, settings, keys)
    try:
        await account.load_markets()
    except Exception as exc:
        await account.close()
        await market.close()
        raise OperationalError(
            f"Cannot reach the {spec.exchange} account: {type(exc).__name__}: {exc}"
        ) from exc
    return replace(spec, market=market, account=account,
                   stop_limit_band=settings.stop_limit_band)


class AccountWatch:
    """The live driver's read each tick (see the module docstring).

    The account itself (balances valued at last prices; the day's start and the peak equity the
    loss halts are judged on) is read every ``account_s``; the balances alone on the other ticks.
    Nothing is read while ``hold`` says the exchange holds requests (asking during a ban lengthens
    it); the next poll after the pause catches up.
    """

    def __init__(
        self,
        broker: CcxtBroker,
        reconciler: Reconciler,
        *,
        sweep_s: float = SWEEP_S,
        account_s: float = ACCOUNT_S,
        monotonic: Callable[[], float] = time.monotonic,
        hold: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.broker = broker
        self.hold = hold
        self.reconciler = reconciler
        self.sweep_s = sweep_s
        self.account_s = account_s
        self._mono = monotonic
        self._last_sweep: float | None = None
        self._last_account: float | None = None

    async def __call__(self) -> None:
        if self.hold() is not None:
            return
        await self.reconciler.check_in_flight()
        now = self._mono()
        if self._last_sweep is None or now - self._last_sweep >= self.sweep_s:
            report = await self.reconciler.sweep()
            await self.reconciler.catch_up_fills(report)
            await self.reconciler.check_balances(report)
            self._last_sweep = now
        else:
            await self.broker.open_orders()  # follows open orders: fills are announced
        if self._last_account is None or now - self._last_account >= self.account_s:
            await self.broker.account()  # balances read fresh: AccountRefreshed
            self._last_account = now
        else:
            await self.broker.refresh_balances()


def open_live(spec: VenueSpec, context: Any) -> Venue:
    """The exchange account ``spec.account`` connected (``connect_live``), its journal in the
    workspace database.

    Raises:
        OperationalError: not confirmed, not connected first, or no workspace to keep the
            order journal in.
    """
    check_confirmed(spec)
    # connect_live connected a CcxtMarketData; the port names no adapter
    market: CcxtMarketData | None = spec.market  # type: ignore[assignment]
    account = spec.account
    if market is None or account is None:
        raise OperationalError("the live account must be connected before the world is built "
                               "(app.runtime.live_venue.connect_live)")
    if context.workspace is None:
        raise OperationalError("a live account keeps its order journal in a workspace; "
                               "give --workspace")
    clock = LiveClock(spec.time_source)
    journal = OrderJournal(context.workspace)
    venue_id = str(account.id)
    grants = LiveGrants(journal, venue_id)
    broker = CcxtBroker(
        account, market, journal, quote_currency=spec.quote_currency or "USDT", clock=clock,
        events=context.events, grants=grants,
        stop_limit_band=DEFAULT_BAND if spec.stop_limit_band is None else spec.stop_limit_band,
    )
    reports = BusReports(venue_id, context.bus)
    reconciler = Reconciler(broker, notify=reports, policy=ReconcilePolicy(),
                            **({} if spec.sleep is None else {"sleep": spec.sleep}))
    gate = gate_for(venue_id)
    watch = AccountWatch(broker, reconciler, hold=gate.held)
    driver = LiveDriver(clock, lambda: (), refresh=watch, bus=context.bus, tick_s=spec.tick_s,
                        sleep=spec.sleep, hold=gate.held)
    startup = LiveStartup(reconciler, reports)
    if context.events is not None:
        gate.watch(context.events)

    async def close() -> None:
        if context.events is not None:
            gate.unwatch(context.events)
        try:
            await broker.close()
            await market.close()
        finally:
            journal.close()

    return Venue("live", live_label(venue_id), clock, market, broker, driver,
                 closers=[close], before_agents=startup,
                 live=LiveAccount(venue_id, reconciler, grants, startup.describe))
