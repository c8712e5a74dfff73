"""``kestrel demo``: watch a strategy trade real, bundled market data offline, narrated live.

The demo replays the last weeks of the bundled Coinbase BTC/USD hourly candles through exactly the
path an agent uses (XML tool calls -> executor -> Risk Guard -> paper broker -> SQLite ledger). It
paces the replay so a person can follow it, prints every fill and a daily status line as they
happen, writes a journal entry for each fill into the trader's memory folder through the memory
tools, and ends with the report beside buy-and-hold. Everything it prints comes from tool results.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import sys
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TextIO

from lxml import etree

from app.backtest.report import summary_table, write_report
from app.backtest.sma_cross import SmaCross
from app.backtest.strategy import BarContext, Strategy, StrategyError
from app.cli.common import check_cash
from app.config import PaperSettings
from app.domain.clock import ms_to_iso
from app.domain.errors import DataFileError, KestrelError
from app.resources import resource_path
from app.runtime.strategy_backtest import (
    collect_result,
    load_files,
    open_backtest,
    run_strategy,
    save_ledger,
)
from app.workspace import Workspace

DEMO_FILE = "BTC-USD_1h_20170701-20191017_coinbase.csv"
DEMO_AGENT = "demo-trader"
HOURS_PER_DAY = 24
CENT = Decimal("0.01")


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--days",
        type=int,
        default=45,
        help="how many of the most recent days of data to replay (default 45)",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=40.0,
        help="candles per second; 0 replays as fast as possible (default 40)",
    )
    parser.add_argument("--fast", type=int, default=10, help="fast SMA length (default 10)")
    parser.add_argument("--slow", type=int, default=30, help="slow SMA length (default 30)")
    parser.add_argument(
        "--cash", type=Decimal, default=Decimal(10_000), help="starting cash in USD (default 10000)"
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        metavar="DIR",
        help="workspace whose demo/ folder and memory receive the run",
    )


def _found(element: etree._Element, path: str, tool: str) -> etree._Element:
    """The element at ``path``; a result without it is not one the narration can read."""
    found = element.find(path)
    if found is None:
        raise StrategyError(f"{tool} answered without <{path.lstrip('./')}>")
    return found


def _attr(element: etree._Element, name: str) -> str:
    value = element.get(name)
    if value is None:
        raise StrategyError(f"a tool result has no {name} where the narration reads it")
    return value


@dataclass
class NarratedStrategy:
    """Runs a strategy and narrates, from tool results, what happened at each candle."""

    inner: Strategy
    out: TextIO
    pace_s: float
    fills_seen: set[str] = field(default_factory=set)
    journal_entries: int = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def parameters(self) -> dict[str, object]:
        return self.inner.parameters()

    async def on_bar(self, ctx: BarContext) -> None:
        await self.inner.on_bar(ctx)
        await self._report_fills(ctx)
        if ctx.step % HOURS_PER_DAY == HOURS_PER_DAY - 1:
            await self._status(ctx)
        if self.pace_s > 0:
            await asyncio.sleep(self.pace_s)

    async def _data(self, ctx: BarContext, xml: str) -> etree._Element:
        result = await ctx.call(xml)
        if not result.ok:
            raise StrategyError(f"{result.tool_name} failed: {result.message}")
        return _found(etree.fromstring(result.xml.encode()), "data", result.tool_name)

    async def _report_fills(self, ctx: BarContext) -> None:
        data = await self._data(ctx, "<get_trade_history><limit>5</limit></get_trade_history>")
        for trade in data.iter("trade"):
            key = f"{trade.get('order_id')}@{trade.get('time_ms')}"
            if key in self.fills_seen:
                continue
            self.fills_seen.add(key)
            line = (
                f"{trade.get('side')} {trade.get('quantity')} {trade.get('symbol')} at "
                f"{trade.get('price')} (fee {trade.get('fee')}, realized P&L "
                f"{trade.get('realized_pnl')})"
            )
            print(f"{ms_to_iso(int(_attr(trade, 'time_ms')))}  FILL  {line}", file=self.out)
            entry = f"Filled: {line}. Strategy {self.inner.name} {self.inner.parameters()}."
            await ctx.call(
                f"<log_journal_entry><content>{_escape(entry)}</content></log_journal_entry>"
            )
            self.journal_entries += 1

    async def _status(self, ctx: BarContext) -> None:
        symbol = ctx.symbols[0]
        interval = ctx.intervals[symbol]
        balance = _found(await self._data(ctx, "<get_account_balance/>"), "account_balance",
                         "get_account_balance")
        rsi = await ctx.executor.execute_text(
            ctx.agent,
            f"<calculate_technical_indicator><symbol>{symbol}</symbol><interval>{interval}"
            "</interval><indicator_name>RSI</indicator_name><values>1</values>"
            "</calculate_technical_indicator>",
        )
        rsi_text = "n/a"
        if rsi is not None and rsi.ok:
            point = _found(etree.fromstring(rsi.xml.encode()), ".//point", rsi.tool_name)
            rsi_text = f"{float(_attr(point, 'value')):.1f}"
        snapshot = _found(await self._data(ctx, "<get_market_snapshot/>"), ".//bar",
                          "get_market_snapshot")
        print(
            f"{ms_to_iso(ctx.now_ms)}  {symbol} close {snapshot.get('close')}  RSI(14) {rsi_text}"
            f"  equity {Decimal(_attr(balance, 'equity')).quantize(CENT)} "
            f"{balance.get('quote_currency')}"
            f"  drawdown {balance.get('max_drawdown_pct')}%",
            file=self.out,
        )


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slice_recent(source: Path, days: int, target: Path) -> Path:
    """Write the last ``days`` days of ``source`` to ``target`` (same format, same name pattern)."""
    with source.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], rows[1:]
    keep = body[-days * HOURS_PER_DAY :]
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(keep)
    return target


async def run_demo(args: argparse.Namespace, workspace: Workspace, out: TextIO) -> int:
    check_cash(args.cash)
    demo_dir = workspace.root / "demo"
    data = slice_recent(resource_path("sample_data", DEMO_FILE), args.days, demo_dir / DEMO_FILE)
    world = open_backtest(load_files([data]), paper=PaperSettings(initial_cash=args.cash),
                          memory_root=workspace.memory_root)
    strategy = NarratedStrategy(
        SmaCross(fast=args.fast, slow=args.slow), out, 1 / args.speed if args.speed > 0 else 0.0
    )
    print(
        "Kestrel offline demo: replaying real Coinbase BTC/USD hourly candles "
        f"({args.days} days) on the paper broker. The trader here is the built-in SMA-cross "
        f"rule strategy (fast {args.fast}, slow {args.slow}), not an LLM; every action is an XML "
        "tool call through the Risk Guard.\n",
        file=out,
    )
    try:
        timeline, output, seconds = await run_strategy(world, strategy, agent_id=DEMO_AGENT)
        settings = {
            "data": [data.name],
            "symbols": dict(timeline.intervals),
            "strategy": strategy.name,
            "parameters": strategy.parameters(),
            "cash": float(args.cash),
            "fee_rate": 0.001,
            "slippage_bps": 2.0,
        }
        stats = {"seconds": round(seconds, 3), "bars_per_second": None}
        result = collect_result(world, timeline, output, settings=settings, stats=stats)
        save_ledger(world, demo_dir)
    finally:
        world.close()
    write_report(result, demo_dir)
    print("\n" + summary_table(result), file=out)
    print(
        f"\n{strategy.journal_entries} journal entries written to "
        f"{workspace.memory_root / DEMO_AGENT / 'journal'}; report and equity chart in {demo_dir}.",
        file=out,
    )
    return 0


def demo_command(args: argparse.Namespace) -> int:
    if args.days < 3:
        print("kestrel demo: --days must be at least 3", file=sys.stderr)
        return 2
    if args.speed < 0:
        print("kestrel demo: --speed must be 0 (as fast as possible) or positive", file=sys.stderr)
        return 2
    workspace = (Workspace.at(args.workspace) if args.workspace else Workspace.default()).ensure()
    try:
        return asyncio.run(run_demo(args, workspace, sys.stdout))
    except (DataFileError, KestrelError, StrategyError, OSError) as exc:
        print(f"kestrel demo: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nkestrel demo: stopped.", file=sys.stderr)
        return 130
