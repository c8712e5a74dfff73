"""Look-ahead guard: a spike planted after the cursor is invisible to every tool and every fill.

Two worlds replay the same real candles (BTC/USDT 1h), identical except that in one of them a
candle after the cursor is a tenfold spike. Both are built exactly as a backtest builds them (XML
-> executor -> Risk Guard -> PaperBroker -> ledger). Before the spike's candle closes, every tool
must answer both worlds byte for byte the same: klines (native and resampled, with an
``end_time_ms`` in the future), ticker, order book, market snapshot, every catalogued indicator,
balance, positions, open orders and trade history. A resting limit sell at three times the price
must stay unfilled. Once the candle closes, the spike shows and the order fills at that candle's
open, which proves the comparison can see the spike when it is due.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import pytest

from app.config import PaperSettings
from app.config.risk import LimitPriceBandConfig, all_in_backtest_config
from app.indicators.catalogue import default_catalogue
from app.runtime.strategy_backtest import history, load_files, open_backtest
from app.runtime.world import World
from app.tools.spec import AgentContext
from tests.helpers.paths import BTC_USDT_1H

SOURCE = BTC_USDT_1H
SPIKE_ROW = 400  # 0-based candle index of the spike
HOUR = 3_600_000
AGENT = AgentContext(agent_id="probe", watched_symbols=("BTC/USDT",), interval="1h")


def _write(path: Path, spike: bool) -> Path:
    lines = SOURCE.read_text().splitlines()
    if spike:
        stamp, *values, volume = lines[SPIKE_ROW + 1].split(",")
        lines[SPIKE_ROW + 1] = ",".join([stamp, *(str(float(v) * 10) for v in values), volume])
    path.write_text("\n".join(lines) + "\n")
    return path


def _session(path: Path) -> World:
    risk = all_in_backtest_config().model_copy(
        update={"limit_price_band": LimitPriceBandConfig(enabled=False)}
    )
    return open_backtest(
        load_files([path]),
        paper=PaperSettings(initial_cash=Decimal(10_000), slippage_bps=Decimal(0)),
        risk=risk,
    )


def _calls() -> list[str]:
    far_future = 2_000_000_000_000
    calls = [
        "<get_historical_klines><symbol>BTC/USDT</symbol><interval>1h</interval>"
        "<limit>1000</limit></get_historical_klines>",
        "<get_historical_klines><symbol>BTC/USDT</symbol><interval>1h</interval>"
        f"<limit>5</limit><end_time_ms>{far_future}</end_time_ms></get_historical_klines>",
        "<get_historical_klines><symbol>BTC/USDT</symbol><interval>4h</interval>"
        "<limit>50</limit></get_historical_klines>",
        "<get_historical_klines><symbol>BTC/USDT</symbol><interval>1d</interval>"
        "<limit>50</limit></get_historical_klines>",
        "<get_current_ticker_info><symbols><symbol>BTC/USDT</symbol></symbols>"
        "</get_current_ticker_info>",
        "<get_order_book><symbol>BTC/USDT</symbol><limit>100</limit></get_order_book>",
        "<get_market_snapshot><symbol>BTC/USDT</symbol></get_market_snapshot>",
        "<get_market_snapshot><symbol>BTC/USDT</symbol><interval>4h</interval>"
        "</get_market_snapshot>",
        "<get_account_balance></get_account_balance>",
        "<get_open_positions></get_open_positions>",
        "<get_open_orders></get_open_orders>",
        "<get_trade_history><limit>50</limit></get_trade_history>",
    ]
    for indicator in default_catalogue():
        for interval in ("1h", "4h"):
            calls.append(
                "<calculate_technical_indicator><symbol>BTC/USDT</symbol>"
                f"<interval>{interval}</interval><indicator_name>{indicator.name}"
                "</indicator_name><values>20</values></calculate_technical_indicator>"
            )
    return calls


async def _answers(session: World, calls: list[str]) -> list[str]:
    out = []
    for xml in calls:
        result = await session.executor.execute_text(AGENT, xml)
        assert result is not None
        out.append(result.xml)
    return out


async def _do(session: World, xml: str) -> str:
    result = await session.executor.execute_text(AGENT, xml)
    assert result is not None and result.ok, result.xml if result else xml
    return result.xml


def _advance(worlds: tuple[World, World], when_ms: int) -> list[int]:
    fills = []
    for world in worlds:
        world.venue.clock.advance_to(when_ms)
        fills.append(len(world.venue.broker.settle()))
    return fills


@pytest.mark.slow
def test_no_tool_indicator_or_fill_sees_a_spike_before_its_candle_closes(tmp_path: Path) -> None:
    asyncio.run(_scenario(tmp_path))


async def _scenario(tmp_path: Path) -> None:
    clean = _session(_write(tmp_path / "BTC-USDT_1h_clean.csv", spike=False))
    spiked = _session(_write(tmp_path / "BTC-USDT_1h_spiked.csv", spike=True))
    worlds = (clean, spiked)
    stamps = history(clean).loaded("BTC/USDT", "1h").series.timestamp_ms
    spike_open = int(stamps[SPIKE_ROW])
    calls = _calls()

    # a position and a resting limit sell far above the market, placed well before the spike
    _advance(worlds, int(stamps[SPIKE_ROW - 50]) + HOUR)
    for world in worlds:
        await _do(world, "<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
                         "<quote_amount>5000</quote_amount></create_order>")
    assert _advance(worlds, int(stamps[SPIKE_ROW - 49]) + HOUR) == [1, 1]
    last = Decimal(str(history(clean).loaded("BTC/USDT", "1h").series.close[SPIKE_ROW - 49]))
    limit = (last * 3).quantize(Decimal("0.01"))
    for world in worlds:
        size = world.venue.broker.position_size("BTC/USDT")
        await _do(world, f"<create_order><symbol>BTC/USDT</symbol><side>SELL</side>"
                         f"<order_type>LIMIT</order_type><quantity>{size}</quantity>"
                         f"<price>{limit}</price></create_order>")

    # up to one millisecond before the spike's candle closes, the two worlds are identical
    for cursor in (int(stamps[SPIKE_ROW - 10]) + HOUR, spike_open, spike_open + HOUR // 2,
                   spike_open + HOUR - 1):
        assert _advance(worlds, cursor) == [0, 0], f"a fill before the spike closed at {cursor}"
        ours, theirs = await _answers(clean, calls), await _answers(spiked, calls)
        for call, a, b in zip(calls, ours, theirs, strict=True):
            assert a == b, f"the spike leaked at {cursor} into {call}"
        assert spiked.venue.broker.risk_view().open_orders == 1

    # the moment the candle closes, the spike is visible and the limit sell fills at its open
    assert _advance(worlds, spike_open + HOUR) == [0, 1]
    [fill] = spiked.ledger.fills(limit=1)
    assert fill.time_ms == spike_open
    assert fill.price > limit
    after = await _answers(spiked, calls[:1])
    before = await _answers(clean, calls[:1])
    assert after != before
