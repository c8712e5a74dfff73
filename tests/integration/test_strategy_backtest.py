"""The backtest engine end to end: the replay cursor, fills at the next open, one shared account,
the Risk Guard in the path, and the report files."""

from __future__ import annotations

import asyncio
import csv
import json
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest

from app.backtest.sma_cross import SmaCross
from app.backtest.strategy import BarContext
from app.config import PaperSettings
from app.config.risk import RiskConfig
from app.runtime.strategy_backtest import (
    RunOptions,
    load_files,
    open_backtest,
    run_backtest,
    run_strategy,
)

HOUR = 3_600_000
START = 1_600_000_000_000 - 1_600_000_000_000 % HOUR


def write_candles(path: Path, closes: list[float], bar_ms: int = HOUR, start: int = START) -> Path:
    """Candles whose open is the previous close, so every open is known to the test."""
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["timestamp_ms", "open", "high", "low", "close", "volume"])
        prev = closes[0]
        for i, close in enumerate(closes):
            out.writerow([start + i * bar_ms, f"{prev:.2f}", f"{max(prev, close) + 1:.2f}",
                          f"{min(prev, close) - 1:.2f}", f"{close:.2f}", "10"])
            prev = close
    return path


def zigzag(n: int, low: float = 100.0, high: float = 200.0, leg: int = 10) -> list[float]:
    """A price that rises and falls in straight legs, crossing any short SMA pair each leg."""
    out, price, step = [], low, (high - low) / leg
    for i in range(n):
        out.append(price)
        price += step if (i // leg) % 2 == 0 else -step
    return out


@dataclass
class Probe:
    """A strategy that checks what it can see and trades at fixed steps."""

    buy_at: int
    sell_at: int
    name: str = "probe"
    seen: list[tuple[int, int]] = field(default_factory=list)

    def parameters(self) -> dict[str, object]:
        return {}

    async def on_bar(self, ctx: BarContext) -> None:
        result = await ctx.call("<get_historical_klines><symbol>BTC/USDT</symbol>"
                                "<interval>1h</interval><limit>3</limit></get_historical_klines>")
        newest = int(result.data[0].children[-1].attr("timestamp_ms") or 0)
        self.seen.append((ctx.now_ms, newest))
        if ctx.step == self.buy_at:
            await ctx.call("<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
                           "<quote_amount>1000</quote_amount></create_order>")
        if ctx.step == self.sell_at:
            await ctx.call("<close_position><symbol>BTC/USDT</symbol></close_position>")


def test_strategy_sees_exactly_the_candle_that_just_closed_at_each_step(tmp_path: Path) -> None:
    path = write_candles(tmp_path / "BTC-USDT_1h_probe.csv", zigzag(40))
    probe = Probe(buy_at=5, sell_at=10)
    run_backtest([path], probe, RunOptions(paper=PaperSettings(slippage_bps=Decimal(0))))
    assert len(probe.seen) == 40
    for now, newest_open in probe.seen:
        assert newest_open + HOUR == now


def test_market_orders_fill_at_the_next_bars_open(tmp_path: Path) -> None:
    closes = zigzag(40)
    path = write_candles(tmp_path / "BTC-USDT_1h_fills.csv", closes)
    result = run_backtest([path], Probe(buy_at=5, sell_at=10),
                          RunOptions(paper=PaperSettings(slippage_bps=Decimal(0))))
    [trade] = result.trades
    # decided at step 5 (close of candle 5), filled at candle 6's open = candle 5's close
    assert trade.entry_time_ms == START + 6 * HOUR
    assert trade.entry_price == pytest.approx(closes[5])
    assert trade.exit_time_ms == START + 11 * HOUR
    assert trade.exit_price == pytest.approx(closes[10])
    assert result.metrics.trades == 1


def test_slippage_moves_market_fills_against_the_trader(tmp_path: Path) -> None:
    closes = zigzag(40)
    path = write_candles(tmp_path / "BTC-USDT_1h_slip.csv", closes)
    result = run_backtest([path], Probe(buy_at=5, sell_at=10),
                          RunOptions(paper=PaperSettings(slippage_bps=Decimal(10))))
    [trade] = result.trades
    assert trade.entry_price == pytest.approx(closes[5] * 1.001, abs=0.01)
    assert trade.exit_price == pytest.approx(closes[10] * 0.999, abs=0.01)


def test_sma_cross_trades_every_leg_of_a_zigzag_and_reports_against_buy_and_hold(
    tmp_path: Path,
) -> None:
    path = write_candles(tmp_path / "BTC-USDT_1h_zig.csv", zigzag(200))
    out = tmp_path / "report"
    result = run_backtest([path], SmaCross(fast=2, slow=5), RunOptions(out_dir=out))
    assert result.metrics.trades >= 7
    assert result.metrics.fees_paid > 0
    assert 0 < result.metrics.exposure_pct < 100
    assert result.baseline.exposure_pct == 100
    summary = json.loads((out / "summary.json").read_text())
    assert summary["strategy"]["trades"] == result.metrics.trades
    assert summary["buy_and_hold"]["final_equity"] == pytest.approx(result.baseline.final_equity)
    assert summary["settings"]["parameters"] == {"fast": 2, "slow": 5}
    with (out / "equity.csv").open() as handle:
        assert sum(1 for _ in handle) == 201
    with (out / "trades.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(result.trades)
    assert (out / "equity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "backtest.db").stat().st_size > 0


def test_two_symbols_share_one_account_and_one_timeline(tmp_path: Path) -> None:
    btc = write_candles(tmp_path / "BTC-USDT_1h_a.csv", zigzag(120))
    eth = write_candles(tmp_path / "ETH-USDT_2h_b.csv", zigzag(60, 10, 20, leg=6), bar_ms=2 * HOUR)
    files = load_files([btc, eth])
    session = open_backtest(files)
    strategy = SmaCross(fast=2, slow=5)
    timeline, output, _ = asyncio.run(run_strategy(session, strategy))
    assert len(timeline) == 120  # every 1h close; the 2h closes are a subset
    assert sum("ETH/USDT" in closed for closed in timeline.closed) == 60
    symbols = {f.symbol for f in session.ledger.fills()}
    assert symbols == {"BTC/USDT", "ETH/USDT"}
    assert len(session.ledger.equity_curve()) == 120
    assert output.exposed.any() and strategy.failures == []


def test_risk_guard_rejections_reach_the_strategy_and_the_run_still_reports(
    tmp_path: Path,
) -> None:
    path = write_candles(tmp_path / "BTC-USDT_1h_risk.csv", zigzag(120))
    strategy = SmaCross(fast=2, slow=5)
    result = run_backtest([path], strategy, RunOptions(risk=RiskConfig()))  # 20% weight cap
    assert result.metrics.trades == 0 and result.metrics.win_rate_pct is None
    assert result.stats["risk_rejections"] >= 4
    assert any("Position weight would be" in f for f in strategy.failures)
    assert result.metrics.final_equity == pytest.approx(10_000)


def test_progress_bar_goes_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_candles(tmp_path / "BTC-USDT_1h_bar.csv", zigzag(300))
    run_backtest([path], SmaCross(fast=2, slow=5), RunOptions(progress=True))
    captured = capsys.readouterr()
    assert "backtest sma_cross" in captured.err and "300/300" in captured.err
    assert captured.out == ""
