"""The rule-engine agents on the real world: what the Orchestrator does with each command, and
how the Trader decides, with its memory, the Risk Guard and the paper broker all real."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path

import yaml

from app.domain.agents import AgentRole, AgentState
from app.memory.roles import TradeRecord, TradesFile, to_yaml, trades_path
from app.runtime.world import World
from tests.helpers.agents import SETUP_COMMAND, agent_world, settle

Body = Callable[[World], Awaitable[None]]
TRADER = "TraderAgent_Default_v1"


def run(tmp_path: Path, body: Body, settings: str = "") -> None:
    if settings:
        tmp_path.mkdir(exist_ok=True)
        (tmp_path / "settings.toml").write_text(settings, encoding="utf-8")

    async def scenario() -> None:
        world = agent_world(tmp_path)
        try:
            await world.start()
            await body(world)
        finally:
            await world.aclose()

    asyncio.run(scenario())


async def say(world: World, text: str) -> str:
    """Send the Orchestrator a chat message; return its final answer."""
    orchestrator = await world.ensure_orchestrator()
    task = world.agents.manager.send_user_message(orchestrator.agent_id, text)
    await settle(world)
    return world.agents.queue.get(task.task_id).result or ""


def calls(world: World, agent_id: str) -> list[tuple[str, str]]:
    rows = world.ledger.connection.execute(
        "SELECT tool_name, status FROM tool_calls WHERE agent_id=? ORDER BY id", (agent_id,)
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def test_a_setup_missing_its_interval_asks_again_after_a_bad_answer_and_can_be_cancelled(
    tmp_path: Path,
) -> None:
    async def body(world: World) -> None:
        orchestrator = await world.ensure_orchestrator()
        task = world.agents.manager.send_user_message(orchestrator.agent_id, "watch BTC/USDT")
        await settle(world)
        (question,) = world.agents.questions.pending(orchestrator.agent_id)
        assert "interval" in question.text and "1h" in question.suggested_replies
        world.agents.manager.answer(question.question_id, "2h")
        await settle(world)
        again = [q for q in world.agents.questions.pending(orchestrator.agent_id)
                 if q.answer is None]
        assert len(again) == 1 and "There is no 2h interval" in again[0].text
        world.agents.manager.answer(again[0].question_id, "4h")
        await settle(world)
        (schedule,) = [q for q in world.agents.questions.pending(orchestrator.agent_id)
                       if q.answer is None]
        assert "How often" in schedule.text
        assert schedule.suggested_replies[0] == "Every 4h, as each candle closes"
        world.agents.manager.answer(schedule.question_id, "cancel")
        await settle(world)
        assert world.agents.queue.get(task.task_id).result == "Cancelled: nothing was set up."
        assert [a.role for a in world.agents.manager.list_agents()] == [AgentRole.ORCHESTRATOR]
        assert world.agents.store.get(orchestrator.agent_id).state is AgentState.RUNNING

    run(tmp_path, body)


def test_status_reports_each_agent_with_its_state_and_next_run(tmp_path: Path) -> None:
    async def body(world: World) -> None:
        assert (await say(world, "status")).startswith("No agents yet")
        await say(world, SETUP_COMMAND)
        report = await say(world, "status")
        assert report.startswith("2 agent(s):")
        assert "BTC/USDT 1h Trend Analyst [analyst" in report and ": running" in report
        assert "every hour, next 2019-10-10 08:00 UTC" in report
        assert "BTC/USDT Trader [trader" in report

    run(tmp_path, body)


def test_pause_all_and_resume_by_role_change_only_the_named_agents(tmp_path: Path) -> None:
    async def body(world: World) -> None:
        await say(world, SETUP_COMMAND)
        answer = await say(world, "pause all")
        assert answer.startswith("Paused: ") and "Trader" in answer and "Analyst" in answer
        states = {a.role: a.state for a in world.agents.manager.list_agents()}
        assert states == {AgentRole.ORCHESTRATOR: AgentState.RUNNING,
                          AgentRole.ANALYST: AgentState.PAUSED,
                          AgentRole.TRADER: AgentState.PAUSED}
        assert (await say(world, "resume analysts")).startswith("Resumed: BTC/USDT 1h Trend")
        states = {a.role: a.state for a in world.agents.manager.list_agents()}
        assert states[AgentRole.ANALYST] is AgentState.RUNNING
        assert states[AgentRole.TRADER] is AgentState.PAUSED
        assert "No agent matches 'nobody'" in await say(world, "stop nobody")

    run(tmp_path, body)


def test_add_a_trader_links_every_analyst_that_had_none(tmp_path: Path) -> None:
    async def body(world: World) -> None:
        answer = await say(world, "watch BTC/USDT on 1h every 1h with a trend analyst")
        assert "no Trader" in answer
        (analyst,) = [a for a in world.agents.manager.list_agents() if a.role is AgentRole.ANALYST]
        assert analyst.config["trader_agent_id"] is None
        answer = await say(world, "add a trader")
        (trader,) = [a for a in world.agents.manager.list_agents() if a.role is AgentRole.TRADER]
        assert trader.config["symbols"] == ["BTC/USDT"]
        assert f"The signals of {analyst.name} now go to it" in answer
        linked = world.agents.store.get(analyst.agent_id)
        assert linked.config["trader_agent_id"] == trader.agent_id
        stored = yaml.safe_load(world.memory.read_file(analyst.agent_id, "config.yaml").data)
        assert stored["config"]["trader_agent_id"] == trader.agent_id
        assert stored["created_by"] != ""
        prompt = world.agents.manager.profile_for(linked).system_prompt
        assert trader.agent_id in prompt, "the analyst's next task runs with the new config"

    run(tmp_path, body)


def test_an_unknown_request_is_answered_with_what_the_rule_engine_understands(
    tmp_path: Path,
) -> None:
    async def body(world: World) -> None:
        answer = await say(world, "what do you think of the Fed?")
        assert "I did not understand" in answer and "rule engine (not an LLM)" in answer

    run(tmp_path, body)


async def signal(world: World, trader_id: str, side: str = "BUY",
                 confidence: str = "0.8", symbol: str = "BTC/USDT") -> str:
    price = await world.venue.broker.last_price("BTC/USDT")
    task = world.agents.queue.enqueue(trader_id, "NEW_MARKET_ANALYSIS_SIGNAL", {
        "symbol": symbol, "side": side, "confidence": confidence, "price": str(price),
        "stop_loss": str((price * Decimal("0.98")).quantize(Decimal("0.01"))),
        "take_profit": str((price * Decimal("1.04")).quantize(Decimal("0.01"))),
        "reason": "test signal"}, "agent:analyst-1")
    await settle(world)
    return world.agents.queue.get(task.task_id).result or ""


async def trader(world: World, **config: object) -> str:
    info = await world.agents.manager.create_agent(
        TRADER, "Test trader", {"symbols": ["BTC/USDT"], **config}, start=True)
    return info.agent_id


def journal(world: World, agent_id: str) -> str:
    files = world.memory.list_files(agent_id, "journal")
    return "".join(world.memory.read_file(agent_id, f.path).data.decode() for f in files)


def test_a_sell_signal_while_flat_places_nothing_and_says_why(tmp_path: Path) -> None:
    async def body(world: World) -> None:
        trader_id = await trader(world)
        answer = await signal(world, trader_id, side="SELL")
        assert "cannot sell short" in answer
        assert "create_order" not in [n for n, _ in calls(world, trader_id)]
        assert "cannot sell short" in journal(world, trader_id)

    run(tmp_path, body)


def test_a_risk_guard_refusal_is_recorded_and_never_resent(tmp_path: Path) -> None:
    async def body(world: World) -> None:
        trader_id = await trader(world)
        answer = await signal(world, trader_id)
        orders = [s for n, s in calls(world, trader_id) if n == "create_order"]
        assert orders == ["rejected"]
        assert "Order not placed: rejected by the Risk Guard (max_position_weight)" in answer
        assert "max_position_weight" in journal(world, trader_id)
        assert not world.ledger.connection.execute(
            "SELECT COUNT(*) FROM orders WHERE agent_id=?", (trader_id,)).fetchone()[0]

    run(tmp_path, body, "[risk.max_position_weight]\nlimit_pct = 5\n")


def test_a_signal_sized_by_risk_is_ordered_recorded_and_notified(tmp_path: Path) -> None:
    async def body(world: World) -> None:
        trader_id = await trader(world, risk_per_trade_pct="0.5")
        answer = await signal(world, trader_id)
        assert answer.startswith("Placed MARKET BUY")
        (quantity,) = world.ledger.connection.execute(
            "SELECT quantity FROM orders WHERE agent_id=?", (trader_id,)).fetchone()
        price = await world.venue.broker.last_price("BTC/USDT")
        # 0.5% of 10,000 at risk over a 2% stop: a position worth 2,500, capped at 20% (2,000)
        assert Decimal(quantity) * price <= Decimal(2000)
        record = TradesFile.model_validate(yaml.safe_load(
            world.memory.read_file(trader_id, trades_path("BTC/USDT")).data))
        (trade,) = record.trades
        assert trade.stop_loss is not None and trade.take_profit is not None
        assert trade.signal_source == "analyst-1" and trade.confidence == Decimal("0.8")
        assert ("send_notification", "success") in calls(world, trader_id)

    run(tmp_path, body)


def test_after_three_losses_a_weak_signal_is_declined(tmp_path: Path) -> None:
    async def body(world: World) -> None:
        trader_id = await trader(world)
        losses = TradesFile(symbol="BTC/USDT", trades=[
            TradeRecord(trade_id=f"t{n}", side="BUY", quantity=Decimal(1),
                        entry_price=Decimal(8000), opened_at="2019-10-01T00:00:00Z",
                        realized_pnl=Decimal(-10)) for n in range(3)])
        await world.memory.awrite_file(
            trader_id, trades_path("BTC/USDT"), to_yaml(losses).encode())
        answer = await signal(world, trader_id, confidence="0.7")
        assert "my last 3 trades with BTC/USDT lost" in answer
        assert "create_order" not in [n for n, _ in calls(world, trader_id)]
        assert (await signal(world, trader_id, confidence="0.8")).startswith("Placed")

    run(tmp_path, body)


async def exit_fill(world: World, trader_id: str, pnl: str) -> str:
    task = world.agents.queue.enqueue(trader_id, "ORDER_FILLED", {
        "fill_id": "f-exit", "order_id": "o-exit", "symbol": "BTC/USDT", "side": "SELL",
        "quantity": "1", "price": "8100", "fee": "0", "fee_currency": "USDT",
        "time": "2019-10-02T00:00:00Z", "realized_pnl": pnl, "exit_kind": "TAKE_PROFIT"},
        "system")
    await settle(world)
    return world.agents.queue.get(task.task_id).result or ""


def test_a_long_record_rolls_its_oldest_trades_over_to_an_archive_losing_none(
    tmp_path: Path,
) -> None:
    async def body(world: World) -> None:
        trader_id = await trader(world)
        history = [
            TradeRecord(trade_id=f"t{n}", side="BUY", quantity=Decimal(1),
                        entry_price=Decimal(8000), opened_at=f"2019-09-{1 + n // 2:02d}T00:00:00Z",
                        closed_at=f"2019-09-{1 + n // 2:02d}T12:00:00Z", exit_price=Decimal(8010),
                        realized_pnl=Decimal(10 if n % 3 else -5), reflection=f"lesson {n}")
            for n in range(50)
        ]
        still_open = TradeRecord(trade_id="t-open", side="BUY", quantity=Decimal(1),
                                 entry_price=Decimal(8000), opened_at="2019-10-01T00:00:00Z",
                                 order_ids=["o-open"])
        path = trades_path("BTC/USDT")
        await world.memory.awrite_file(trader_id, path, to_yaml(
            TradesFile(symbol="BTC/USDT", trades=[*history, still_open])).encode())

        answer = await exit_fill(world, trader_id, "100")
        assert answer.startswith("Closed 1 BTC/USDT: take profit at 8100: won 100.00")
        record = TradesFile.model_validate(yaml.safe_load(
            world.memory.read_file(trader_id, path).data))
        assert record.archived is not None
        (archive_path,) = record.archived.files
        assert archive_path == "symbols/BTCUSDT/trades_archive/2019-09-01_2019-09-13.yaml"
        archive = TradesFile.model_validate(yaml.safe_load(
            world.memory.read_file(trader_id, archive_path).data))
        assert [t.trade_id for t in archive.trades] == [f"t{n}" for n in range(26)]
        assert [t.trade_id for t in record.trades] == [*(f"t{n}" for n in range(26, 50)),
                                                      "t-open"]
        summary = yaml.safe_load(world.memory.read_file(
            trader_id, "symbols/BTCUSDT/performance_summary.yaml").data)
        # every one of the 51 trades counts: 17 losses of 5 and 33 wins of 10, then a win of 100
        assert (summary["total_trades"], summary["wins"], summary["losses"]) == (51, 34, 17)
        assert Decimal(summary["net_pnl"]) == 33 * 10 - 17 * 5 + 100
        writes = world.ledger.connection.execute(
            "SELECT params_json FROM tool_calls WHERE agent_id=? AND tool_name=? ORDER BY id",
            (trader_id, "write_agent_memory_file")).fetchall()
        # the archive is written before trades.yaml is trimmed, then the summary
        paths = [json.loads(w[0])["file_path"] for w in writes]
        assert ["trades_archive" in p for p in paths] == [True, False, False]
        assert paths[1:] == [path, "symbols/BTCUSDT/performance_summary.yaml"]

    run(tmp_path, body)


def test_a_record_is_not_trimmed_when_its_archive_could_not_be_written(tmp_path: Path) -> None:
    async def body(world: World) -> None:
        trader_id = await trader(world)
        history = [
            TradeRecord(trade_id=f"t{n}", side="BUY", quantity=Decimal(1),
                        entry_price=Decimal(8000), opened_at="2019-09-01T00:00:00Z",
                        closed_at="2019-09-02T00:00:00Z", exit_price=Decimal(8010),
                        realized_pnl=Decimal(10)) for n in range(50)
        ]
        still_open = TradeRecord(trade_id="t-open", side="BUY", quantity=Decimal(1),
                                 entry_price=Decimal(8000), opened_at="2019-10-01T00:00:00Z")
        path = trades_path("BTC/USDT")
        await world.memory.awrite_file(trader_id, path, to_yaml(
            TradesFile(symbol="BTC/USDT", trades=[*history, still_open])).encode())
        # a folder where the archive file would go: the archive write fails
        blocked = "symbols/BTCUSDT/trades_archive/2019-09-01_2019-09-02.yaml/x.md"
        await world.memory.awrite_file(trader_id, blocked, b"in the way")

        answer = await exit_fill(world, trader_id, "-5")
        assert answer.startswith("Closed 1 BTC/USDT")
        record = TradesFile.model_validate(yaml.safe_load(
            world.memory.read_file(trader_id, path).data))
        assert record.archived is None and len(record.trades) == 51
        assert record.trades[-1].realized_pnl == Decimal(-5)

    run(tmp_path, body)


def test_a_signal_for_a_symbol_not_configured_is_ignored(tmp_path: Path) -> None:
    async def body(world: World) -> None:
        trader_id = await trader(world)
        answer = await signal(world, trader_id, symbol="ETH/USDT")
        assert "ETH/USDT is not one of my symbols" in answer
        assert [n for n, _ in calls(world, trader_id)] == ["log_journal_entry"]

    run(tmp_path, body)


def test_add_a_trader_with_no_analyst_creates_none_and_says_how_to_set_one_up(
    tmp_path: Path,
) -> None:
    async def body(world: World) -> None:
        answer = await say(world, "add a trader")
        assert "a Trader only acts on an analyst's signals, so I created none" in answer
        assert "watch BTC/USDT on 1h every 1h with a trend analyst and a trader" in answer
        answer = await say(world, "add a trader for ETH/USDT")
        assert answer.startswith("No analyst watches ETH/USDT")
        assert [a.role for a in world.agents.manager.list_agents()] == [AgentRole.ORCHESTRATOR]

    run(tmp_path, body)


def test_add_a_trader_when_every_analyst_has_one_asks_which_and_links_the_one_named(
    tmp_path: Path,
) -> None:
    async def body(world: World) -> None:
        await say(world, SETUP_COMMAND)
        (analyst,) = [a for a in world.agents.manager.list_agents() if a.role is AgentRole.ANALYST]
        orchestrator = await world.ensure_orchestrator()
        task = world.agents.manager.send_user_message(orchestrator.agent_id, "add a trader")
        await settle(world)
        (question,) = [q for q in world.agents.questions.pending(orchestrator.agent_id)
                       if q.answer is None]
        assert question.text.startswith("Every analyst already has a Trader: "
                                        f"{analyst.name} (signals to BTC/USDT Trader)")
        assert analyst.name in question.suggested_replies
        traders = [a for a in world.agents.manager.list_agents() if a.role is AgentRole.TRADER]
        assert len(traders) == 1
        world.agents.manager.answer(question.question_id, "the trend analyst")
        await settle(world)
        answer = world.agents.queue.get(task.task_id).result or ""
        traders = [a for a in world.agents.manager.list_agents() if a.role is AgentRole.TRADER]
        assert len(traders) == 2
        linked = world.agents.store.get(analyst.agent_id).config["trader_agent_id"]
        assert linked == traders[-1].agent_id
        assert answer.startswith(f"Created the Trader {traders[-1].name}. The signals of "
                                 f"{analyst.name} now go to it.")

    run(tmp_path, body)


def test_the_orchestrator_names_agents_by_their_names_not_their_ids(tmp_path: Path) -> None:
    async def body(world: World) -> None:
        said = [await say(world, SETUP_COMMAND), await say(world, "status"),
                await say(world, "stop nobody"), await say(world, SETUP_COMMAND)]
        agents = {a.role: a for a in world.agents.manager.list_agents()}
        orchestrator, analyst = agents[AgentRole.ORCHESTRATOR], agents[AgentRole.ANALYST]
        reply = world.agents.queue.enqueue(
            analyst.agent_id, "RUN_ANALYSIS", {"symbol": "BTC/USDT", "interval": "1h"},
            f"agent:{orchestrator.agent_id}", reply_to=orchestrator.agent_id,
            reply_expected=True)
        await settle(world)
        (answered,) = [t for t in world.agents.queue.tasks(orchestrator.agent_id)
                       if t.task_type == "TASK_REPLY" and t.payload["task_id"] == reply.task_id]
        said.append(answered.result or "")
        assert said[-1].startswith(f"Reply from {analyst.name}: ")
        said += [n.message for n in world.agents.notifications.recent()]
        for text in said:
            for agent in agents.values():
                assert agent.agent_id not in text and agent.agent_id[:8] not in text.replace(
                    f"_{agent.agent_id[:8]}", ""), text  # a job's name may end in one

    run(tmp_path, body)
