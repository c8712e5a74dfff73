"""The whole flow: a person asks the Orchestrator to watch a market; it creates an Analyst, a Trader
and a job; the Analyst analyses and signals; the Trader orders through the Risk Guard, protects the
position with TP/SL once filled, and records what it did; notifications are raised.

It runs three ways: on the built-in rule engine, and through the real ``openai`` and ``anthropic``
SDKs over real HTTP against local fake servers whose "model" answers as the rule engine does and
now and then sends a malformed call first, which the loop must recover from. A recorded run is
then replayed offline with identical decisions, and a changed recording is reported.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from app.agents.llm.anthropic_provider import AnthropicProvider
from app.agents.llm.openai_compat import OpenAICompatibleProvider
from app.agents.llm.port import LLMProvider
from app.agents.llm.replay import RecordingProvider, ReplayProvider
from app.agents.rule_engine.engine import RuleEngineProvider
from app.agents.templates import AgentTemplate
from app.domain.agents import AgentInfo, AgentRole, AgentState, TaskStatus
from app.events import NotificationRaised
from app.memory.roles import ANALYSIS_LOG, trades_path
from app.runtime.world import World
from app.store.texts import install
from tests.helpers.agents import SETUP_COMMAND, advance_hours, agent_world, settle
from tests.helpers.fake_llm_servers import FakeAnthropicServer, FakeOpenAIServer
from tests.helpers.rule_model import RuleModel

Override = Callable[[AgentInfo, AgentTemplate], LLMProvider | None]


def _calls(world: World, agent_id: str) -> list[tuple[str, str]]:
    rows = world.ledger.connection.execute(
        "SELECT tool_name, status FROM tool_calls WHERE agent_id=? ORDER BY id", (agent_id,)
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


async def watch_and_trade(world: World, max_hours: int = 240) -> None:
    """The person's request, then hours of replay until the Trader has protected a position."""
    alerts: list[NotificationRaised] = []
    world.bus.subscribe(NotificationRaised, alerts.append)
    orchestrator = await world.ensure_orchestrator()
    world.agents.manager.send_user_message(orchestrator.agent_id, SETUP_COMMAND)
    await settle(world)

    agents = {a.role: a for a in world.agents.manager.list_agents()}
    assert set(agents) == {AgentRole.ORCHESTRATOR, AgentRole.ANALYST, AgentRole.TRADER}
    analyst, trader = agents[AgentRole.ANALYST], agents[AgentRole.TRADER]
    assert analyst.config["trader_agent_id"] == trader.agent_id
    assert analyst.state is AgentState.RUNNING and trader.state is AgentState.RUNNING
    (job,) = world.agents.scheduler.jobs()
    assert job.target_agent_id == analyst.agent_id and job.enabled
    assert job.next_run_ms == world.venue.clock.now_ms() + 3_600_000
    assert any(a.channel == "UI_ALERT" for a in alerts)
    answer = [m for m in world.agents.conversations.recent(orchestrator.agent_id)
              if m.kind == "final"]
    assert answer, "the Orchestrator answered the person in text"

    for _hour in range(max_hours):
        await advance_hours(world, 1)
        names = [name for name, status in _calls(world, trader.agent_id) if status == "success"]
        if "set_position_tp_sl_orders" in names:
            break
    analyst_calls = [n for n, _ in _calls(world, analyst.agent_id)]
    for tool in ("get_historical_klines", "calculate_technical_indicator",
                 "append_to_agent_memory_file", "dispatch_task_to_agent"):
        assert tool in analyst_calls
    trader_calls = _calls(world, trader.agent_id)
    names = [n for n, _ in trader_calls]
    assert "read_agent_memory_file" in names and "get_account_balance" in names
    assert ("create_order", "success") in trader_calls
    assert ("set_position_tp_sl_orders", "success") in trader_calls
    assert names.index("read_agent_memory_file") < names.index("create_order")

    accepted = world.ledger.connection.execute(
        "SELECT COUNT(*) FROM risk_decisions WHERE agent_id=? AND accepted=1",
        (trader.agent_id,),
    ).fetchone()[0]
    assert accepted >= 1, "the order passed the Risk Guard"
    fills = world.ledger.fills()
    assert any(f.agent_id == trader.agent_id for f in fills)
    signals = [t for t in world.agents.queue.tasks(trader.agent_id)
               if t.task_type == "NEW_MARKET_ANALYSIS_SIGNAL"]
    assert signals and all(t.status is TaskStatus.DONE for t in signals)
    memory = world.memory
    assert memory.read_file(analyst.agent_id, ANALYSIS_LOG).data
    assert memory.read_file(trader.agent_id, trades_path("BTC/USDT")).data
    assert len(alerts) >= 2, "the fill was notified too"
    assert not [a for a in world.agents.manager.list_agents() if a.state is AgentState.FAULTED]


def _run(folder: Path, override: Override | None = None,
         on_runtime: Callable[[World], None] | None = None) -> None:
    async def scenario() -> None:
        world = agent_world(folder, provider_override=override)
        if on_runtime is not None:
            on_runtime(world)
        try:
            await world.start()
            await watch_and_trade(world)
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_person_sets_up_a_watch_and_the_rule_engine_agents_analyse_signal_and_trade(
    tmp_path: Path,
) -> None:
    _run(tmp_path)


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_the_same_flow_through_a_real_sdk_recovers_from_malformed_calls(
    tmp_path: Path, sdk: str
) -> None:
    server = (FakeOpenAIServer() if sdk == "openai" else FakeAnthropicServer()).start()
    models: list[RuleModel] = []
    server.default = lambda body: models[0](body)
    if sdk == "openai":
        provider: LLMProvider = OpenAICompatibleProvider(
            server.base_url, "sk-test", default_model="m", timeout_s=10, max_retries=1)
    else:
        provider = AnthropicProvider("sk-ant-test", base_url=server.base_url, default_model="m",
                                     timeout_s=10, max_retries=1)
    try:
        _run(tmp_path, lambda _info, _template: provider,
             lambda world: models.append(RuleModel(world, malformed_every=7)))
    finally:
        server.close()
    (model,) = models
    assert model.malformed >= 3, "malformed calls were sent and recovered from"
    assert len(server.bodies) == model.calls > 50
    assert all(body["stream"] for body in server.bodies)


def _decisions(folder: Path) -> dict[str, list[tuple[str, str, str]]]:
    """Each agent's calls in order (agents run concurrently, so only per agent is order fixed)."""
    conn = install(sqlite3.connect(folder / "kestrel.db"))
    try:
        rows = conn.execute(
            "SELECT agent_id, tool_name, params_json, status FROM tool_calls ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    decisions: dict[str, list[tuple[str, str, str]]] = {}
    for agent_id, *call in rows:
        decisions.setdefault(agent_id, []).append(tuple(call))
    return decisions


def test_a_recorded_run_replays_offline_with_identical_decisions_and_a_change_is_reported(
    tmp_path: Path,
) -> None:
    recording = tmp_path / "run.jsonl"
    recorder = RecordingProvider(RuleEngineProvider(), recording)
    _run(tmp_path / "recorded", lambda _info, _template: recorder)
    player = ReplayProvider(recording)
    _run(tmp_path / "replayed", lambda _info, _template: player)
    recorded, replayed = _decisions(tmp_path / "recorded"), _decisions(tmp_path / "replayed")
    assert sum(len(calls) for calls in recorded.values()) > 100 and replayed == recorded

    lines = recording.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):  # the Analyst's first assessment says something else
        entry = json.loads(line)
        written = "<assessment>\n"
        if entry["type"] == "exchange" and written in entry["response"]["text"]:
            entry["response"]["text"] = entry["response"]["text"].replace(
                written, f"{written}# changed_by_hand\n")
            lines[number] = json.dumps(entry)
            break
    changed = tmp_path / "changed.jsonl"
    changed.write_text("\n".join(lines) + "\n", encoding="utf-8")

    async def diverge() -> None:
        changed_player = ReplayProvider(changed)
        world = agent_world(tmp_path / "diverged",
                                provider_override=lambda _info, _template: changed_player)
        try:
            await world.start()
            orchestrator = await world.ensure_orchestrator()
            world.agents.manager.send_user_message(orchestrator.agent_id, SETUP_COMMAND)
            await settle(world)
            await advance_hours(world, 1)
            (analyst,) = [a for a in world.agents.manager.list_agents()
                          if a.role is AgentRole.ANALYST]
            analyst = world.agents.store.get(analyst.agent_id)
            assert analyst.state is AgentState.FAULTED
            assert "differs" in (analyst.fault_reason or "")
            assert "changed_by_hand" in (analyst.fault_reason or "")
        finally:
            await world.aclose()

    asyncio.run(diverge())
