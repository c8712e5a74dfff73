"""Blind mode: the agents cannot recognise the market, and their orders still execute for real.

A blind eval runs a model behind the fake OpenAI-compatible server; everything the model was sent
(system prompts, task messages with their data blocks, tool results) and everything written to
the agents' memory is searched for the real symbol, its assets, the window's real dates and
timestamps, and its real prices. An order placed in blind terms must fill exactly as the same
order placed in real terms.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import pytest

from app.config import LLMSettings
from app.domain.clock import ms_to_iso
from app.domain.trading import Mode
from app.market.csv_loader import load_csv
from app.runtime.blind import PRICE_FACTOR
from app.runtime.evaluation import STANDARD_WINDOWS, EvalOptions, EvalWindow, run_eval
from app.runtime.venue import VenueSpec
from app.runtime.world import WorldOptions, build_world
from app.tools.spec import ALL_PERMISSIONS, AgentContext
from app.workspace import Workspace
from tests.helpers.fake_llm_servers import FakeOpenAIServer
from tests.helpers.prompt_rule_model import PromptRuleModel

BARS = 6


def _real_marks(window: EvalWindow) -> list[str]:
    """What would give the market away: names, the dates and times of the window and its
    warm-up, and its prices as the data file writes them."""
    series = load_csv(window.path()).series
    marks = ["BTC", "USDT", "2019"]
    for index in range(series.timestamp_ms.size):
        stamp = int(series.timestamp_ms[index])
        marks += [str(stamp), ms_to_iso(stamp)[:13]]
        for price in (series.open[index], series.high[index], series.low[index],
                      series.close[index]):
            text = f"{price:.2f}"
            if len(text) >= 7:  # four digits before the point: a real BTC price level
                marks.append(text)
    return marks


def test_nothing_a_blind_model_sees_names_the_real_market(tmp_path: Path) -> None:
    window = EvalWindow("rising", STANDARD_WINDOWS[1].file, STANDARD_WINDOWS[1].start, BARS)
    model = PromptRuleModel(malformed_every=5)
    with FakeOpenAIServer(default=model) as server:
        report = asyncio.run(run_eval(EvalOptions(
            subject=LLMSettings(provider="openai-compatible", base_url=server.base_url,
                                model="gpt-4o", max_retries=0),
            out_dir=tmp_path / "run", windows=[window], blind=True,
        )))
    assert model.calls > 0
    seen = "\n".join([*model.systems, *model.messages])
    assert "ASSET1/QUOTE" in seen and "1971-" in seen
    memory = tmp_path / "run" / "windows" / "1-rising" / "model" / "workspace" / "memory"
    written = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                        for p in memory.rglob("*") if p.is_file() and p.suffix != ".db")
    assert written, "the agents wrote no memory to search"
    leaks = sorted({mark for mark in _real_marks(window) if mark in seen or mark in written})
    assert leaks == []
    # the model still decides as the rule engine does on the real market, bar by bar
    assert report.data["total"]["figures"]["agreement_pct"] == 100.0
    assert report.data["blind"] is True
    assert "The run was blind" in report.data["warnings"][0]


async def _fill_of(tmp_path: Path, blind: bool, order: str) -> tuple[object, str]:
    workspace = Workspace.at(tmp_path / ("blind" if blind else "real")).ensure()
    data = STANDARD_WINDOWS[0].path()
    start = load_csv(data).series.timestamp_ms[100]
    world = build_world(workspace, VenueSpec.replay([data], int(start), blind=blind),
                        WorldOptions(agents=False, mode=Mode.PAPER))
    try:
        ctx = AgentContext(agent_id="trader-1", permissions=ALL_PERMISSIONS, role="trader")
        placed = await world.executor.execute_text(ctx, order)
        assert placed is not None and placed.status == "success", placed.xml
        world.venue.driver.advance_to(int(start) + 3_600_000)
        fills = world.ledger.fills()
        assert len(fills) == 1
        return fills[0], placed.xml
    finally:
        world.close()


def test_an_order_placed_blind_fills_at_the_real_price_for_the_real_quantity(
    tmp_path: Path,
) -> None:
    blind_quantity = Decimal("3.125")  # 0.1 BTC seen through the factor
    real_quantity = blind_quantity * PRICE_FACTOR
    assert real_quantity == Decimal("0.1")
    blind_fill, blind_answer = asyncio.run(_fill_of(tmp_path, True, (
        "<create_order><symbol>asset1/quote</symbol><side>BUY</side><order_type>MARKET"
        f"</order_type><quantity>{blind_quantity}</quantity></create_order>")))
    real_fill, _ = asyncio.run(_fill_of(tmp_path, False, (
        "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>MARKET"
        f"</order_type><quantity>{real_quantity}</quantity></create_order>")))
    assert "ASSET1/QUOTE" in blind_answer and "BTC" not in blind_answer
    for fill in (blind_fill, real_fill):
        assert fill.symbol == "BTC/USDT" and fill.quantity == Decimal("0.1")
    assert blind_fill.price == real_fill.price and blind_fill.fee == real_fill.fee
    assert blind_fill.time_ms == real_fill.time_ms


def test_a_blind_price_is_the_real_one_rescaled_and_back(tmp_path: Path) -> None:
    async def prices() -> tuple[Decimal, Decimal]:
        data = STANDARD_WINDOWS[0].path()
        at = int(load_csv(data).series.timestamp_ms[100])
        real = build_world(None, VenueSpec.replay([data], at), WorldOptions(agents=False))
        blind = build_world(None, VenueSpec.replay([data], at, blind=True),
                            WorldOptions(agents=False))
        try:
            return (await real.venue.broker.last_price("BTC/USDT"),
                    await blind.venue.broker.last_price("ASSET1/QUOTE"))
        finally:
            real.close()
            blind.close()

    real, blind = asyncio.run(prices())
    assert blind == real * PRICE_FACTOR and blind / PRICE_FACTOR == real


def test_an_unknown_blind_symbol_is_refused_without_naming_the_real_ones(
    tmp_path: Path,
) -> None:
    async def ask() -> str:
        world = build_world(None, VenueSpec.replay([STANDARD_WINDOWS[0].path()], None,
                                                   blind=True), WorldOptions(agents=False))
        try:
            ctx = AgentContext(agent_id="a", permissions=ALL_PERMISSIONS, role="trader")
            result = await world.executor.execute_text(
                ctx, "<get_order_book><symbol>BTC/USDT</symbol></get_order_book>")
            assert result is not None and result.status == "error"
            return result.xml
        finally:
            world.close()

    answer = asyncio.run(ask())
    assert "NOT_FOUND" in answer and "ASSET1/QUOTE" in answer
    # the real name appears only where the answer quotes the call's own parameter
    assert "BTC" not in answer.replace("'BTC/USDT'", "").replace('"symbol": "BTC/USDT"', "")


@pytest.mark.parametrize("blind", [False, True])
def test_the_agent_backtest_report_is_in_real_terms_either_way(
    tmp_path: Path, blind: bool
) -> None:
    from app.runtime.agent_backtest import AgentBacktestOptions, run_agent_backtest

    outcome = asyncio.run(run_agent_backtest(
        [STANDARD_WINDOWS[0].path()],
        AgentBacktestOptions(templates=["AnalystAgent_Trend_v1", "TraderAgent_Default_v1"],
                             warmup_bars=100, bars=4, blind=blind),
        tmp_path / "out"))
    assert outcome.faults == []
    assert outcome.result.settings["start"].startswith("2019-10-")
    assert outcome.result.settings["blind"] is blind
