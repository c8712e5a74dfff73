"""The kill switch on the real world: rule-engine agents set up by the Orchestrator trade the
replayed BTC/USDT market through the real Risk Guard, paper broker and SQLite workspace.

Tripped by hand it cancels the open entries, pauses every agent, refuses the next order and tells
the person; the loss halts trip it by themselves during a replay, and so do the bus events a live
broker publishes; it survives a restart, and a kill -9 right after the trip (its actions are then
completed at the next start).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.domain.agents import AgentRole, AgentState, Urgency
from app.domain.kill_switch import TripCause
from app.domain.trading import OrderStatus
from app.events import OrderOutcomeUnknown, ReconciliationMismatch
from app.runtime.desk import workspace_resume_ms
from app.runtime.world import World
from app.tools.protocol.render import ToolResult
from app.tools.spec import AgentContext
from app.workspace import Workspace
from tests.helpers.agents import HOUR_MS, SETUP_COMMAND, agent_world, settle
from tests.helpers.cli import run_cli
from tests.helpers.paths import BTC_USDT_1H

WORKER = Path(__file__).with_name("kill_switch_worker.py")
REPO = Path(__file__).resolve().parents[2]
TRADER = "TraderAgent_Default_v1"


def write_settings(folder: Path, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.toml").write_text(text, encoding="utf-8")


@asynccontextmanager
async def desk(folder: Path, settings_toml: str = "", **kwargs: Any) -> AsyncIterator[
        World]:
    """The world with the Orchestrator's usual set-up: a trend analyst, a trader, a job."""
    if settings_toml:
        write_settings(folder, settings_toml)
    world = agent_world(folder, **kwargs)
    try:
        await world.start()
        if not world.agents.manager.list_agents():
            orchestrator = await world.ensure_orchestrator()
            world.agents.manager.send_user_message(orchestrator.agent_id, SETUP_COMMAND)
            await settle(world)
        yield world
    finally:
        await world.aclose()


def trader_of(world: World) -> str:
    return next(a.agent_id for a in world.agents.manager.list_agents()
                if a.role is AgentRole.TRADER)


async def call(world: World, agent_id: str, xml: str) -> ToolResult:
    result = await world.executor.execute_text(AgentContext(agent_id=agent_id), xml)
    assert result is not None
    return result


async def limit_buy(world: World, agent_id: str) -> str:
    price = await world.venue.broker.last_price("BTC/USDT")
    placed = await call(world, agent_id, (
        "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>LIMIT</order_type>"
        f"<price>{(price * 95 / 100).quantize(1)}</price><quantity>0.01</quantity>"
        "</create_order>"))
    assert placed.status == "success", placed.xml
    return dict(placed.data[0].attrs)["order_id"]


async def advance_until(world: World, done: Callable[[], bool], hours: int) -> int:
    for hour in range(1, hours + 1):
        world.venue.driver.advance_to(world.venue.clock.now_ms() + HOUR_MS)
        await world.bus.drain()  # the settle's watch runs as a task of the clock's event
        await settle(world)
        if done():
            return hour
    raise AssertionError(f"not done within {hours} hours")


def states(world: World) -> dict[AgentRole, AgentState]:
    return {a.role: a.state for a in world.agents.manager.list_agents()}


def order_status(world: World, order_id: str) -> OrderStatus:
    return next(r.order.status for r in world.ledger.load().orders
                if r.order.order_id == order_id)


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


def test_tripping_by_hand_cancels_entries_pauses_agents_refuses_the_next_order_and_tells(
    tmp_path: Path,
) -> None:
    async def body() -> None:
        async with desk(tmp_path) as world:
            trader = trader_of(world)
            bought = await call(world, trader, "<create_order><symbol>BTC/USDT</symbol><side>"
                                "BUY</side><quantity>0.01</quantity></create_order>")
            assert bought.status == "success"
            await advance_until(world, lambda: True, 1)  # the buy fills
            protected = await call(world, trader, (
                "<set_position_tp_sl_orders><symbol>BTC/USDT</symbol><stop_loss_price>7000"
                "</stop_loss_price></set_position_tp_sl_orders>"))
            assert protected.status == "success", protected.xml
            stop_loss = dict(protected.data[0].attrs)["stop_loss_order_id"]
            entry = await limit_buy(world, trader)
            assert set(states(world).values()) == {AgentState.RUNNING}

            done = await world.agents.kill_switch.trip("testing the switch",
                                                  "the person in the Kestrel window")

            assert done == ("Cancelled 1 open order, kept 1 take-profit/stop-loss exit, paused 3 "
                            "agents.")
            assert order_status(world, entry) is OrderStatus.CANCELLED
            assert order_status(world, stop_loss).is_open  # it protects the position
            assert set(states(world).values()) == {AgentState.PAUSED}
            note = world.agents.notifications.recent()[0]
            assert note.urgency is Urgency.CRITICAL and "testing the switch" in note.message
            # closing still works while tripped, for the person and an agent alike
            closed = await call(world, trader, "<close_position><symbol>BTC/USDT</symbol>"
                                "</close_position>")
            assert closed.status == "success", closed.xml
            await advance_until(world, lambda: True, 1)  # the close fills
            assert await world.venue.broker.positions() == []
            # the trader's own next entry, on a fresh signal once resumed: refused by the guard
            await world.agents.manager.control(trader, "resume")
            price = await world.venue.broker.last_price("BTC/USDT")
            world.agents.queue.enqueue(trader, "NEW_MARKET_ANALYSIS_SIGNAL", {
                "symbol": "BTC/USDT", "side": "BUY", "confidence": "0.9", "price": str(price),
                "stop_loss": str((price * Decimal("0.97")).quantize(Decimal("0.01"))),
                "take_profit": str((price * Decimal("1.05")).quantize(Decimal("0.01"))),
                "reason": "test signal"}, "agent:analyst")
            await settle(world)
            orders = world.ledger.connection.execute(
                "SELECT status FROM tool_calls WHERE agent_id=? AND tool_name='create_order' "
                "ORDER BY id", (trader,)).fetchall()
            assert orders[-1] == ("rejected",) and len(orders) == 3  # mine, mine, the trader's
            refused = world.ledger.risk_decisions()[-1]
            assert refused["rule"] == "kill_switch" and "testing the switch" in refused["reason"]

    run(body)


DRAWDOWN_ONLY = """
[risk.max_drawdown_halt]
limit_pct = "0.5"
[risk.daily_loss_limit]
enabled = false
"""
DAILY_LOSS_ONLY = """
[risk.daily_loss_limit]
limit_pct = "0.5"
[risk.max_drawdown_halt]
enabled = false
"""


def test_the_drawdown_halt_trips_the_switch_during_a_replay(tmp_path: Path) -> None:
    async def body() -> None:
        async with desk(tmp_path, DRAWDOWN_ONLY) as world:
            switch = world.agents.kill_switch
            await advance_until(world, switch.is_tripped, 48)
            trip = switch.active()
            assert trip is not None and trip.cause is TripCause.DRAWDOWN
            assert trip.by == "Kestrel (drawdown halt)" and ">= limit 0.5%" in trip.reason
            assert trip.market_ms == world.venue.clock.now_ms()
            assert set(states(world).values()) == {AgentState.PAUSED}
            assert "drawdown" in world.agents.notifications.recent()[0].message.lower()
            # the market keeps moving; the same drawdown does not trip it again once reset
            await switch.reset("the person in the Kestrel window")
            await advance_until(world, lambda: True, 2)
            assert not switch.is_tripped()

    run(body)


def test_the_daily_loss_limit_trips_the_switch_during_a_replay(tmp_path: Path) -> None:
    async def body() -> None:
        async with desk(tmp_path, DAILY_LOSS_ONLY) as world:
            await advance_until(world, world.agents.kill_switch.is_tripped, 48)
            trip = world.agents.kill_switch.active()
            assert trip is not None and trip.cause is TripCause.DAILY_LOSS
            assert trip.reason.startswith("Daily loss limit reached: equity ")
            assert set(states(world).values()) == {AgentState.PAUSED}

    run(body)


def test_a_run_of_unknown_order_outcomes_on_the_bus_trips_it(tmp_path: Path) -> None:
    async def body() -> None:
        async with desk(tmp_path) as world:
            trader = trader_of(world)
            entry = await limit_buy(world, trader)
            for n in (1, 2):
                await world.bus.publish(OrderOutcomeUnknown(
                    "binance", trader, "BTC/USDT", f"k-{n}", "RequestTimeout", n))
            assert not world.agents.kill_switch.is_tripped()
            await world.bus.publish(OrderOutcomeUnknown(
                "binance", trader, "BTC/USDT", "k-3", "RequestTimeout", 3))
            trip = world.agents.kill_switch.active()
            assert trip is not None and trip.cause is TripCause.UNKNOWN_OUTCOMES
            assert order_status(world, entry) is OrderStatus.CANCELLED
            assert set(states(world).values()) == {AgentState.PAUSED}

    run(body)


def test_a_reconciliation_mismatch_on_the_bus_trips_it(tmp_path: Path) -> None:
    async def body() -> None:
        async with desk(tmp_path) as world:
            await world.bus.publish(ReconciliationMismatch(
                "binance", "balance", "USDT: the journal explains 1000, the exchange has 940"))
            trip = world.agents.kill_switch.active()
            assert trip is not None and trip.cause is TripCause.RECONCILIATION
            assert "the exchange has 940" in trip.reason
            assert set(states(world).values()) == {AgentState.PAUSED}

    run(body)


def test_the_trip_and_its_reset_survive_restarting_the_runtime(tmp_path: Path) -> None:
    async def body() -> None:
        async with desk(tmp_path) as world:
            await world.agents.kill_switch.trip("stop for the night", "the person")
            at = world.venue.clock.now_ms()
        async with desk(tmp_path, at_ms=at) as world:
            trip = world.agents.kill_switch.active()
            assert trip is not None and trip.reason == "stop for the night"
            assert trip.actions == "No open order to cancel, paused 3 agents."
            assert set(states(world).values()) == {AgentState.PAUSED}  # still
            refused = await call(world, trader_of(world), (
                "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><quantity>0.01"
                "</quantity></create_order>"))
            assert refused.status == "rejected" and refused.rule == "kill_switch"
            await world.agents.kill_switch.reset("the person")
        async with desk(tmp_path, at_ms=at) as world:
            assert not world.agents.kill_switch.is_tripped()
            assert [t.reset_by for t in world.agents.kill_switch.history()] == ["the person"]

    run(body)


def test_a_kill_9_right_after_the_trip_keeps_the_halt_and_the_next_start_completes_it(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, str(WORKER), str(folder)], stdout=subprocess.PIPE, text=True, cwd=REPO,
        env=env)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith("TRIPPED"):
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, lines
    entry = next(line.split()[1] for line in lines if line.startswith("ORDER"))

    async def body() -> None:
        world = agent_world(folder, at_ms=workspace_resume_ms(Workspace.at(folder)))
        try:
            trip = world.agents.kill_switch.active()
            assert trip is not None and trip.actions is None  # killed before any action
            assert order_status(world, entry).is_open
            await world.start()  # completes the trip before any agent starts
            assert order_status(world, entry) is OrderStatus.CANCELLED
            assert set(states(world).values()) == {AgentState.PAUSED}
            assert world.agents.kill_switch.active().actions == (
                "Cancelled 1 open order, paused 3 agents.")
            assert "Completed after a restart" in world.agents.notifications.recent()[0].message
            refused = await call(world, trader_of(world), (
                "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><quantity>0.01"
                "</quantity></create_order>"))
            assert refused.rule == "kill_switch"
        finally:
            await world.aclose()

    run(body)


def kestrel(command: str, folder: Path, *args: str, stdin: str = "") -> str:
    done = run_cli(command, "--workspace", folder, "--data", BTC_USDT_1H, *args, stdin=stdin)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
def test_kestrel_chat_kills_and_resets_after_a_typed_confirmation_and_run_shows_the_trip(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ws"
    talk = kestrel("chat", folder, stdin=(
        f"{SETUP_COMMAND}\n/kill the model misbehaves\nno\n/kill the model misbehaves\nyes\n"
        "/kill\nhow are we doing?\n/quit\n"))
    assert "Tripping the kill switch refuses every new order, cancels nothing (no open order) " \
           "and pauses 3 running agents." in talk
    assert "Not tripped." in talk
    assert "Kill switch tripped. No open order to cancel, paused 3 agents." in talk
    assert "The kill switch is already tripped: it was tripped " in talk
    assert "by the person in kestrel chat: the model misbehaves" in talk
    assert "Orchestrator is paused: your message waits in its inbox until you /resume it." in talk

    run = kestrel("run", folder, "--for", "2h", "--speed", "100000")
    assert "KILL SWITCH TRIPPED: it was tripped " in run
    assert "the model misbehaves. The Risk Guard refuses every new order" in run

    talk = kestrel("chat", folder, stdin="/reset\nnope\n/reset\nreset\n/resume\n/reset\n/quit\n")
    assert "KILL SWITCH TRIPPED" in talk.split("you>")[0]  # said before the first prompt
    assert "Not reset: the kill switch stays tripped." in talk
    assert ("Kill switch reset by the person in kestrel chat: new orders pass the Risk Guard "
            "again. 3 agents stay paused: resume those that should trade.") in talk
    assert talk.count("Resumed ") == 3
    assert "The kill switch is not tripped." in talk
