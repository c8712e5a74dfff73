"""Tasks carry the data their template declares (issue 17): fetched with the agent's own tools at
the task's market time, recorded like any call, read by the rule engine and by models instead of
a dozen round trips, and never more than the task needs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.agents.loop import task_message
from app.agents.rule_engine.analyst import _FROM_TASK_DATA, AnalystPolicy
from app.agents.rule_engine.transcript import parse_task
from app.agents.task_data import plan, split_task_data, with_task_data
from app.agents.template_files import load_templates
from app.agents.templates import validate_config
from app.domain.agents import AgentRole, Task
from app.domain.clock import ms_to_iso
from app.memory.roles import MARKET_ASSESSMENT, MarketAssessment, load_yaml
from app.runtime.world import World
from tests.helpers.agents import SETUP_COMMAND, advance_hours, agent_world, settle

TEMPLATES = load_templates()
TREND = TEMPLATES["AnalystAgent_Trend_v1"]
TRADER = TEMPLATES["TraderAgent_Default_v1"]


def _task(task_type: str, payload: dict[str, Any]) -> Task:
    return Task("t-1", "a-1", task_type, payload, "job:j-1", 1_570_000_000_000)


def test_an_analysis_task_plans_the_snapshot_candles_configured_indicators_and_notes() -> None:
    config = validate_config(TREND, {"symbols": ["BTC/USDT"], "rsi_period": 21, "bb_std": "2.5"})
    calls = plan(TREND.task_data, _task("RUN_ANALYSIS", {"symbol": "BTC/USDT",
                                                         "interval": "4h"}), config)
    assert [c.tool for c in calls] == [
        "read_agent_memory_file", "get_market_snapshot", "get_historical_klines",
        *["calculate_technical_indicator"] * 4,
    ]
    assert calls[0].params[0].text == "current_market_assessment.yaml"
    assert [(p.tag, p.text) for p in calls[2].params] == [
        ("symbol", "BTC/USDT"), ("interval", "4h"), ("limit", "30")]
    rsi = calls[4].params
    assert rsi[2].text == "RSI" and rsi[3].children[0].attrs == {"name": "length"}
    assert rsi[3].children[0].text == "21"  # the agent's own setting, not the default 14
    assert calls[6].params[3].children[1].text == "2.5" and rsi[4].text == "3"


def test_memory_files_travel_in_the_task_data_as_their_text_not_base64() -> None:
    config = validate_config(TRADER, {"symbols": ["BTC/USDT"]})
    signal = _task("NEW_MARKET_ANALYSIS_SIGNAL", {"symbol": "BTC/USDT"})
    reads = [c for c in plan(TRADER.task_data, signal, config)
             if c.tool == "read_agent_memory_file"]
    assert [[(p.tag, p.text) for p in c.params] for c in reads] == [
        [("file_path", "symbols/BTCUSDT/trades.yaml"), ("content_format", "TEXT")],
        [("file_path", "symbols/BTCUSDT/performance_summary.yaml"), ("content_format", "TEXT")],
    ]
    as_before = TRADER.task_data.model_copy(update={"notes_as": "BASE64"})
    (seed_read, _) = [c for c in plan(as_before, signal, config)
                      if c.tool == "read_agent_memory_file"]
    assert [p.tag for p in seed_read.params] == ["file_path"]


def test_a_task_of_another_type_or_symbol_carries_nothing() -> None:
    config = validate_config(TRADER, {"symbols": ["BTC/USDT"]})
    spec = TRADER.task_data
    assert plan(spec, _task("PAUSE_AGENT", {}), config) == []
    assert plan(spec, _task("NEW_MARKET_ANALYSIS_SIGNAL", {"symbol": "ETH/USDT"}), config) == []
    calls = plan(spec, _task("NEW_MARKET_ANALYSIS_SIGNAL", {"symbol": "btc/usdt"}), config)
    assert [c.tool for c in calls] == [
        "read_agent_memory_file", "read_agent_memory_file", "get_open_positions",
        "get_account_balance"]
    assert [c.params[0].text for c in calls[:2]] == [
        "symbols/BTCUSDT/trades.yaml", "symbols/BTCUSDT/performance_summary.yaml"]


def test_the_block_travels_after_the_task_and_readers_take_it_off_again() -> None:
    task = _task("RUN_ANALYSIS", {"symbol": "BTC/USDT"})
    block = ('<task_data market_time="2019-10-02T07:06:40Z">\n'
             '<tool_result tool_name="get_account_balance">\n    <status>success</status>\n'
             '    <data>\n        <balance equity="100" />\n    </data>\n</tool_result>\n'
             "</task_data>")
    content = with_task_data(task_message(task), block)
    assert split_task_data(content) == (task_message(task), block)
    facts = parse_task(content)
    assert facts.task_type == "RUN_ANALYSIS" and facts.payload == {"symbol": "BTC/USDT"}
    ((tool, result),) = facts.data
    assert tool == "get_account_balance" and result.ok and result.attr("equity") == "100"
    typed = parse_task(with_task_data("how are we doing?", block))
    assert typed.is_user_message and typed.text == "how are we doing?" and len(typed.data) == 1
    assert split_task_data("text ending in </task_data>") == ("text ending in </task_data>", None)


def _run(tmp_path: Path, body: Any) -> None:
    async def scenario() -> None:
        world = agent_world(tmp_path)
        try:
            await world.start()
            await body(world)
        finally:
            await world.aclose()

    asyncio.run(scenario())


def _analyst(world: World) -> str:
    (analyst,) = [a for a in world.agents.manager.list_agents() if a.role is AgentRole.ANALYST]
    return analyst.agent_id


def test_an_hourly_analysis_arrives_with_its_data_fetched_at_its_market_time_and_audited(
    tmp_path: Path,
) -> None:
    async def body(world: World) -> None:
        orchestrator = await world.ensure_orchestrator()
        world.agents.manager.send_user_message(orchestrator.agent_id, SETUP_COMMAND)
        await settle(world)
        await advance_hours(world, 1)
        analyst = _analyst(world)
        now = world.venue.clock.now_ms()
        (task,) = [t for t in world.agents.queue.tasks(agent_id=analyst) if t.created_ms == now]
        first = world.agents.conversations.messages(task.task_id)[0]
        facts = parse_task(first.content)
        assert f'<task_data market_time="{ms_to_iso(now)}">' in first.content
        assert [tool for tool, _ in facts.data] == [
            "read_agent_memory_file", "get_market_snapshot", "get_historical_klines",
            *["calculate_technical_indicator"] * 4]
        assert all(result.ok for _, result in facts.data)
        note = facts.data[0][1].first()  # the assessment the setup's first analysis wrote
        assert note is not None and note.find("content_base64") is None
        assert "schema_version: 1" in (note.findtext("content") or "")
        snapshot = facts.data[1][1]
        assert snapshot.attr("time_ms") == str(now)  # the task's market time, not later
        candles = facts.data[2][1].first()
        assert max(int(k.get("timestamp_ms")) for k in candles) < now
        # recorded in the audit trail like any call, right before the analysis itself
        rows = world.ledger.connection.execute(
            "SELECT tool_name FROM tool_calls WHERE agent_id=? AND started_ms=? ORDER BY id",
            (analyst, now),
        ).fetchall()
        names = [r[0] for r in rows]
        assert names[:7] == [tool for tool, _ in facts.data]
        # the rule engine decided from the data and answered; the runtime wrote the answer's
        # log entry and assessment for it, audited like the calls before
        kinds = [m.kind for m in world.agents.conversations.messages(task.task_id)]
        assert kinds[-3:] == ["answer_blocks", "block_results", "final"]
        assert names[7:9] == ["append_to_agent_memory_file", "write_agent_memory_file"]

    _run(tmp_path, body)


def test_the_same_analysis_without_task_data_makes_the_calls_itself_and_decides_the_same(
    tmp_path: Path,
) -> None:
    results: dict[str, list[str]] = {}
    calls: dict[str, int] = {}
    steps: dict[str, int] = {}

    async def body(world: World) -> None:
        orchestrator = await world.ensure_orchestrator()
        world.agents.manager.send_user_message(orchestrator.agent_id, SETUP_COMMAND)
        await settle(world)
        await advance_hours(world, 3)
        analyst = _analyst(world)
        results[world.workspace.root.name] = [
            t.result or "" for t in world.agents.queue.tasks(agent_id=analyst)]
        calls[world.workspace.root.name] = world.ledger.connection.execute(
            "SELECT COUNT(*) FROM tool_calls WHERE agent_id=?", (analyst,)).fetchone()[0]
        steps[world.workspace.root.name] = sum(
            1 for t in world.agents.queue.tasks(agent_id=analyst)
            for m in world.agents.conversations.messages(t.task_id)
            if m.kind in ("assistant", "final"))

    def without(world: World) -> None:
        for name, template in list(world.agents.manager.templates.items()):
            world.agents.manager.templates[name] = template.model_copy(update={"task_data": None})

    async def plain(world: World) -> None:
        without(world)
        await body(world)

    _run(tmp_path / "with", body)
    _run(tmp_path / "without", plain)
    assert results["with"] == results["without"] and len(results["with"]) == 4
    assert calls["with"] == calls["without"]  # the same reads, made before the task or in it
    assert steps["with"] * 2 < steps["without"]  # in far fewer model turns


def test_the_analyst_assesses_a_task_from_its_carried_data_once_not_at_every_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its later turns (record, rewrite the assessment, answer: the protocol with a call per
    write) ask for the same assessment again; it is the one the first turn computed, not the
    carried results read again."""
    assessed: list[str] = []
    _FROM_TASK_DATA.clear()  # an earlier test's world wrote the same tasks
    real = AnalystPolicy._calculate_from
    real_init = AnalystPolicy.__init__

    def with_calls(self: AnalystPolicy, *args: Any, blocks: bool = True) -> None:
        real_init(self, *args, blocks=False)

    monkeypatch.setattr(AnalystPolicy, "__init__", with_calls)

    def counting(self: AnalystPolicy, t: Any, *args: Any) -> Any:
        assessed.append(t.task.task_id)
        return real(self, t, *args)

    monkeypatch.setattr(AnalystPolicy, "_calculate_from", counting)
    turns: list[int] = []

    async def body(world: World) -> None:
        orchestrator = await world.ensure_orchestrator()
        world.agents.manager.send_user_message(orchestrator.agent_id, SETUP_COMMAND)
        await settle(world)
        await advance_hours(world, 3)
        tasks = world.agents.queue.tasks(agent_id=_analyst(world))
        turns.extend(
            sum(1 for m in world.agents.conversations.messages(t.task_id)
                if m.kind in ("assistant", "final"))
            for t in tasks
        )
        assert sorted(assessed) == sorted(t.task_id for t in tasks)

    _run(tmp_path, body)
    assert len(turns) == 4 and all(n >= 3 for n in turns)  # asked at every turn, assessed once


def test_the_assessment_written_from_a_tasks_data_is_dated_at_the_tasks_market_time(
    tmp_path: Path,
) -> None:
    """The snapshot came in the task's data, not from a call of the engine's own: the file
    said 1970-01-01 (no snapshot found), to the person and to every agent reading it."""
    async def body(world: World) -> None:
        orchestrator = await world.ensure_orchestrator()
        world.agents.manager.send_user_message(orchestrator.agent_id, SETUP_COMMAND)
        await settle(world)
        await advance_hours(world, 2)
        now = ms_to_iso(world.venue.clock.now_ms())
        assert world.memory is not None
        path = world.memory.agent_folder(_analyst(world)) / MARKET_ASSESSMENT
        document = load_yaml(MarketAssessment, path.read_text(encoding="utf-8"))
        assert document.updated_at == now
        assert [a.assessed_at for a in document.symbols.values()] == [now]

    _run(tmp_path, body)
