"""Blind mode: the agents cannot recognise the market, and their orders still execute for real.

A blind eval runs a model behind the fake OpenAI-compatible server; everything the model was sent
(system prompts, task messages with their data blocks, tool results) and everything written to
the agents' memory is searched for the real symbol, its assets, the window's real dates and
timestamps, and its real prices. An order placed in blind terms must fill exactly as the same
order placed in real terms, a well-behaved model must trade and protect its positions blind as it
does in real terms, and what comes back when an order is refused must not name the real market.
"""

from __future__ import annotations

import asyncio
import base64
import re
import sqlite3
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path

import pytest

from app.config import LLMSettings, Settings
from app.config.risk import AllowedSymbolsConfig, RiskConfig
from app.domain.clock import ms_to_iso
from app.domain.trading import Mode
from app.market.csv_loader import load_csv
from app.orchestration.ids import SeededIds
from app.runtime.agent_backtest import AgentBacktestOptions, run_agent_backtest
from app.runtime.blind_map import PRICE_FACTOR
from app.runtime.eval_reading import Answers, read_answers, read_endings_of
from app.runtime.evaluation import STANDARD_WINDOWS, EvalOptions, EvalWindow, run_eval
from app.runtime.venue import VenueSpec
from app.runtime.world import World, WorldOptions, build_world
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


# bars 205 to 217 of the bundled BTC/USDT file: the trend analyst signals a BUY, the trader's entry
# fills, and it protects the position with a take profit and a stop loss
SIGNAL_WARMUP, SIGNAL_BARS = 205, 12
TRADER_CTX = AgentContext(agent_id="trader-1", permissions=ALL_PERMISSIONS, role="trader")
TICK = Decimal("0.01")  # the real market's tick and step (from the file's price precision)
STEP = Decimal("0.000001")


def _agent_run(out: Path, blind: bool) -> tuple[Answers, list[tuple[str, ...]]]:
    """A model that answers exactly as the rule engine would, through the OpenAI-compatible API;
    its answers and the orders the run placed (from the real ledger)."""
    model = PromptRuleModel()
    with FakeOpenAIServer(default=model) as server:
        asyncio.run(run_agent_backtest([STANDARD_WINDOWS[0].path()], AgentBacktestOptions(
            templates=["AnalystAgent_Trend_v1", "TraderAgent_Default_v1"],
            warmup_bars=SIGNAL_WARMUP, bars=SIGNAL_BARS, blind=blind,
            llm=LLMSettings(provider="openai-compatible", base_url=server.base_url,
                            model="gpt-4o", max_retries=0, stream=False),
        ), out))
    with sqlite3.connect(out / "workspace" / "kestrel.db") as db:
        orders = db.execute("SELECT symbol, side, order_type, exit_kind, quantity, price, "
                            "stop_price, status FROM orders ORDER BY seq").fetchall()
    return read_answers(out, read_endings_of(out)), orders


def test_a_well_behaved_model_trades_and_protects_blind_exactly_as_in_real_terms(
    tmp_path: Path,
) -> None:
    real_answers, real_orders = _agent_run(tmp_path / "real", blind=False)
    blind_answers, blind_orders = _agent_run(tmp_path / "blind", blind=True)
    for answers in (real_answers, blind_answers):
        assert answers.responses > 0
        assert answers.refused == {} and answers.accepted == answers.responses
    kinds = [order[3] for order in real_orders]
    assert kinds == ["NONE", "TAKE_PROFIT", "STOP_LOSS"]  # the entry, then its exits
    # the blind run placed the same orders at the same real prices and quantities
    assert blind_orders == real_orders


def _world_at_bar(tmp_path: Path, bar: int, *, settings: Settings | None = None
                  ) -> tuple[World, int]:
    """A blind paper world whose cursor is at ``bar`` of the BTC/USDT file, and that bar's real
    time (the driver moves the real clock)."""
    data = STANDARD_WINDOWS[0].path()
    at = int(load_csv(data).series.timestamp_ms[bar])
    world = build_world(Workspace.at(tmp_path / "ws").ensure(),
                        VenueSpec.replay([data], at, blind=True),
                        WorldOptions(agents=False, mode=Mode.PAPER, settings=settings))
    return world, at


async def _call(world: World, xml: str) -> str:
    result = await world.executor.execute_text(TRADER_CTX, xml)
    assert result is not None
    return result.xml


def _order(symbol: str, side: str, kind: str, quantity: str, price: str = "") -> str:
    priced = f"<price>{price}</price>" if price else ""
    return (f"<create_order><symbol>{symbol}</symbol><side>{side}</side><order_type>{kind}"
            f"</order_type><quantity>{quantity}</quantity>{priced}</create_order>")


def _between_real_ticks(blind: Decimal) -> Decimal:
    """A blind price of two decimals (as a model writes it) whose real price is not on the real
    tick: 0.01 blind is 0.3125 real, so a whole number of cents not divisible by 4."""
    cents = int(blind * 100)
    return Decimal(cents - cents % 4 + 1) / 100


def test_blind_prices_and_quantities_land_on_the_real_grid_on_the_traders_safe_side(
    tmp_path: Path,
) -> None:
    async def trade() -> tuple[list[str], list[tuple[object, ...]], Decimal, Decimal, Decimal]:
        world, at = _world_at_bar(tmp_path, 100)
        try:
            answers = [await _call(world, _order("ASSET1/QUOTE", "BUY", "MARKET", "3.1234567"))]
            world.venue.driver.advance_to(at + 3_600_000)
            last = await world.venue.broker.last_price("ASSET1/QUOTE")
            below = _between_real_ticks(last * Decimal("0.95"))
            answers.append(await _call(world, _order("ASSET1/QUOTE", "BUY", "LIMIT", "1",
                                                     str(below))))
            take = _between_real_ticks(last * Decimal("1.05"))
            stop = _between_real_ticks(last * Decimal("0.97"))
            answers.append(await _call(world, (
                "<set_position_tp_sl_orders><symbol>ASSET1/QUOTE</symbol><take_profit_price>"
                f"{take}</take_profit_price><stop_loss_price>{stop}</stop_loss_price>"
                "</set_position_tp_sl_orders>")))
            orders = [
                tuple(Decimal(v) if i >= 3 and v is not None else v for i, v in enumerate(row))
                for row in world.ledger.connection.execute(
                    "SELECT side, order_type, exit_kind, quantity, price, stop_price FROM orders "
                    "ORDER BY seq")
            ]
            return answers, orders, below, take, stop
        finally:
            world.close()

    answers, orders, below, take, stop = asyncio.run(trade())
    assert all("<status>success</status>" in a for a in answers), answers

    def real(blind: Decimal, rounding: str) -> Decimal:
        return (blind / PRICE_FACTOR / TICK).to_integral_value(rounding) * TICK

    bought = (Decimal("3.1234567") * PRICE_FACTOR / STEP).to_integral_value(ROUND_FLOOR) * STEP
    assert orders == [
        ("BUY", "MARKET", "NONE", bought, None, None),  # the quantity down to the step
        ("BUY", "LIMIT", "NONE", Decimal("0.032"), real(below, ROUND_FLOOR), None),  # pays no more
        ("SELL", "LIMIT", "TAKE_PROFIT", bought, real(take, ROUND_CEILING), None),  # gets no less
        ("SELL", "STOP", "STOP_LOSS", bought, None, real(stop, ROUND_CEILING)),  # sells no later
    ]


def _numbers(text: str) -> set[Decimal]:
    return {Decimal(n) for n in re.findall(r"\d+(?:\.\d+)?", text)}


def test_a_refused_order_is_told_in_blind_terms_without_the_real_symbol_price_or_quantity(
    tmp_path: Path,
) -> None:
    async def refusals() -> tuple[dict[str, str], list[Decimal]]:
        world, at = _world_at_bar(tmp_path, 100)
        try:
            lasts = [await world.venue.real_broker.last_price("BTC/USDT")]
            told = {"funds": await _call(world, _order("ASSET1/QUOTE", "BUY", "MARKET", "1000"))}
            await _call(world, _order("ASSET1/QUOTE", "BUY", "MARKET", "3.125"))  # 0.1 real
            world.venue.driver.advance_to(at + 3_600_000)
            told["held"] = await _call(world, _order("ASSET1/QUOTE", "SELL", "MARKET", "6.25"))
            lasts.append(await world.venue.real_broker.last_price("BTC/USDT"))
            told["band"] = await _call(world, _order(
                "ASSET1/QUOTE", "BUY", "LIMIT", "1", str(lasts[1] * PRICE_FACTOR * 2)))
            return told, lasts
        finally:
            world.close()

    told, lasts = asyncio.run(refusals())
    # the broker: quantity 1000 at about the blind last price (32 BTC at the real one)
    assert "INSUFFICIENT_FUNDS" in told["funds"] and "Not enough QUOTE" in told["funds"]
    assert {Decimal(1000), lasts[0] * PRICE_FACTOR} <= _numbers(told["funds"])
    # selling 6.25 of the 3.125 held (0.2 of 0.1 real), with every figure of the details
    assert "Not enough ASSET1 to sell" in told["held"]
    assert {Decimal("6.25"), Decimal("3.125")} <= _numbers(told["held"])
    # the Risk Guard, judging in real terms: the blind limit and last prices
    blind_last = lasts[1] * PRICE_FACTOR
    assert "<rule>limit_price_band</rule>" in told["band"]
    assert {blind_last * 2, blind_last} <= _numbers(told["band"])
    real = {Decimal(32), Decimal("0.2"), Decimal("0.1"), *lasts, lasts[1] * 2,
            *(last.quantize(Decimal("0.01")) for last in lasts)}
    for answer in told.values():
        assert "BTC" not in answer and "USDT" not in answer
        assert _numbers(answer) & real == set(), answer


def test_the_risk_guard_judges_a_blind_order_by_the_persons_real_limits(tmp_path: Path) -> None:
    allowed = Settings(risk=RiskConfig(allowed_symbols=AllowedSymbolsConfig(symbols=["BTC/USDT"])))

    async def place() -> tuple[str, list[dict[str, object]]]:
        world, _at = _world_at_bar(tmp_path, 100, settings=allowed)
        try:
            answer = await _call(world, _order("ASSET1/QUOTE", "BUY", "MARKET", "3.125"))
            return answer, world.ledger.risk_decisions()
        finally:
            world.close()

    answer, decisions = asyncio.run(place())
    assert "<status>success</status>" in answer, answer
    # the audit trail holds the decision in the ledger's terms: the real symbol and quantity
    assert [(d["symbol"], d["quantity"], d["accepted"]) for d in decisions] == [
        ("BTC/USDT", "0.1", 1)]


def test_the_prompt_of_every_blind_agent_holds_no_date_and_no_price_level(
    tmp_path: Path,
) -> None:
    async def prompts() -> list[str]:
        world = build_world(Workspace.at(tmp_path / "ws").ensure(),
                            VenueSpec.replay([STANDARD_WINDOWS[0].path()], None, blind=True),
                            WorldOptions(mode=Mode.BACKTEST, ids=SeededIds("prompts")))
        try:
            assert world.agents is not None
            manager = world.agents.manager
            built = []
            for template in sorted(manager.templates):
                info = await manager.create_agent(template, template, {}, start=False,
                                                  created_by="test")
                built.append(manager.profile_for(info).system_prompt.replace(info.agent_id, ""))
            return built
        finally:
            await world.aclose()

    built = asyncio.run(prompts())
    assert len(built) == 4  # the orchestrator, both analysts and the trader
    # numbers of four digits or more that are no price: the klines limit, the Unix epoch's year,
    # the seconds of an hour and the ISO standard's number
    named = {Decimal(1000), Decimal(1970), Decimal(3600), Decimal(8601)}
    for prompt in built:
        assert "ASSET1/QUOTE" in prompt and "BTC" not in prompt and "USDT" not in prompt
        assert re.search(r"\b20\d\d\b|\d{4}-\d\d-\d\d|\b1\d{12}\b", prompt) is None
        assert {n for n in _numbers(prompt) if n >= 1000} <= named


@pytest.mark.parametrize("blind", [False, True])
def test_a_memory_listing_shows_when_a_file_changed_by_the_market_clock(
    tmp_path: Path, blind: bool
) -> None:
    async def listing() -> tuple[str, str]:
        data = STANDARD_WINDOWS[0].path()
        at = int(load_csv(data).series.timestamp_ms[100])
        world = build_world(Workspace.at(tmp_path / "ws").ensure(),
                            VenueSpec.replay([data], at, blind=blind),
                            WorldOptions(agents=False, mode=Mode.PAPER))
        try:
            written = ms_to_iso(world.venue.clock.now_ms())
            content = base64.b64encode(b"plan: hold\n").decode()
            saved = await _call(world, (
                "<write_agent_memory_file><file_path>notes/plan.md</file_path><content_base64>"
                f"{content}</content_base64></write_agent_memory_file>"))
            assert "<status>success</status>" in saved, saved
            world.venue.driver.advance_to(at + 2 * 3_600_000)  # listed two bars later
            return written, await _call(world, "<list_agent_memory_files/>")
        finally:
            world.close()

    written, listed = asyncio.run(listing())
    assert 'path="notes/plan.md"' in listed and f'modified_iso="{written}"' in listed
    assert written.startswith("1971-01-" if blind else "2019-10-")


def test_a_blind_model_deciding_as_the_rule_engine_agrees_with_it_on_every_bar(
    tmp_path: Path,
) -> None:
    data = STANDARD_WINDOWS[0]
    start = ms_to_iso(int(load_csv(data.path()).series.timestamp_ms[SIGNAL_WARMUP]))
    with FakeOpenAIServer(default=PromptRuleModel()) as server:
        report = asyncio.run(run_eval(EvalOptions(
            subject=LLMSettings(provider="openai-compatible", base_url=server.base_url,
                                model="gpt-4o", max_retries=0),
            out_dir=tmp_path / "run", windows=[EvalWindow("signal", data.file, start,
                                                          SIGNAL_BARS)], blind=True)))
    [window] = report.data["windows"]
    assert window["trades"] == 1  # the BUY signal, its entry and exits: a trade to agree on
    # the blind agents stamp their tasks in blind time; their signals still fall on their bars
    assert window["disagreements"] == [] and window["figures"]["agreement_pct"] == 100.0


def test_a_blind_venue_reports_its_market_reads_as_every_driver_does(tmp_path: Path) -> None:
    # the window's status bar reads these of any venue's driver
    world, _at = _world_at_bar(tmp_path, 100)
    try:
        assert (world.venue.driver.held, world.venue.driver.last_error) == (None, None)
    finally:
        world.close()
