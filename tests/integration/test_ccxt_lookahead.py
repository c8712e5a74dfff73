"""The live adapter never shows an unclosed candle as closed, nor closed values it saw forming.

The fake exchange's time is driven across many closes in uneven steps (and onto the exact
boundaries); after every step each candle the adapter shows as closed must equal what the exchange
shows for it long after its close, and the newest must be marked forming exactly while its close
is in the exchange's future. The local clock runs ahead of the exchange's here, which is when a
wall-clock rule would call a candle closed early: the measured clock offset prevents it. The
control test removes the offset and shows the check catches the difference.
"""

import asyncio

import pytest

from app.ccxt.market import Freshness
from tests.helpers.fake_exchange.client import open_market
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    START_MS,
    VENUES,
    fake_exchange_fixture,
    server_fixture,
)

H = 3_600_000
M = 60_000
FAR_FUTURE = START_MS + 400 * 86_400_000
DECIMALS = {"binance": 2, "okx": 1}
INTERVALS = {"15m": 15 * M, "1h": H}


class Ahead:
    """The local clock, ``delta_ms`` ahead of the exchange's."""

    def __init__(self, exchange_now, delta_ms):
        self.exchange_now, self.delta = exchange_now, delta_ms

    def now_ms(self):
        return self.exchange_now.now_ms() + self.delta


def steps(count=200):
    """Uneven steps over hours, plus landings exactly on, just before and just after closes."""
    out, t = [], START_MS
    for _ in range(count):
        t += 7 * M + 13_000
        out.append(t)
        boundary = t - t % H + H
        out.extend([boundary - 1, boundary, boundary + 1])
    return sorted(set(out))


def violations(server, venue, seen, now):
    """Every way the candles shown at exchange time ``now`` break the look-ahead rule."""
    found = []
    tape = server.state.markets["BTC/USDT"].tape
    for interval, series in seen.items():
        bar = INTERVALS[interval]
        opens = series.timestamp_ms.tolist()
        if series.last_complete != (opens[-1] + bar <= now):
            found.append(f"{interval} @{now}: newest marked complete={series.last_complete}")
        closed = len(opens) if series.last_complete else len(opens) - 1
        for i in range(max(closed - 3, 0), closed):  # the newest closed ones are at risk
            if opens[i] + bar > now:
                found.append(f"{interval} @{now}: candle {opens[i]} not closed but shown closed")
                continue
            final = tape.candle(opens[i], bar, FAR_FUTURE)
            shown = (series.open[i], series.high[i], series.low[i], series.close[i])
            want = tuple(round(v, DECIMALS[venue])
                         for v in (final.open, final.high, final.low, final.close))
            if shown != want:
                found.append(f"{interval} @{now}: closed candle {opens[i]} shows {shown}, "
                             f"final {want}")
    return found


def walk(server, venue, *, keep_offset=True, streams=False):
    """Step the exchange's time and read after each step; return the violations found.

    With streams, answers go stale at once (``candles_s=0``) and each step waits a few pushes, so
    the forming candle is taken from the stream whenever the stream can serve it.
    """
    freshness = Freshness(candles_s=0.0, stream_s=5.0) if streams else Freshness()

    async def scenario():
        market = await open_market(server, venue, history=60, clock=Ahead(server.now, 20_000),
                                   streams=streams, freshness=freshness)
        if not keep_offset:
            market._offset_ms = 0  # noqa: SLF001 - what a plain wall-clock rule would do
        found, reads = [], 0
        try:
            for when in steps(60 if streams else 200):
                server.now.set(when)
                if streams:
                    await asyncio.sleep(0.03)
                seen = {iv: await market.series("BTC/USDT", iv) for iv in INTERVALS}
                reads += len(seen)
                found.extend(violations(server, venue, seen, server.now.now_ms()))
        finally:
            await market.close()
        return found, reads

    found, reads = asyncio.run(scenario())
    walk.reads, walk.rest = reads, server.count(venue, "klines")
    return found


@pytest.mark.parametrize("venue", VENUES)
def test_no_unclosed_candle_is_ever_shown_closed_while_time_runs(server, venue):
    assert walk(server, venue) == []


def test_no_unclosed_candle_is_shown_closed_with_streams_refreshing_the_forming_one(server):
    assert walk(server, "binance", streams=True) == []
    assert walk.rest < walk.reads  # the stream served reads that REST would otherwise have


def test_the_check_catches_a_wall_clock_rule_when_the_local_clock_runs_ahead(server):
    """Control: with the offset dropped, candles are called closed 20 s before their close."""
    found = walk(server, "binance", keep_offset=False)
    assert any("not closed but shown closed" in f or "newest marked complete=True" in f
               for f in found)
