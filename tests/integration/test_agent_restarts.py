"""Durability across crashes and restarts: a trade task killed half-way is redelivered and places
no second order; a question pending when the app closed is answered after a restart and the agent
carries on."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

from app.domain.agents import AgentRole, AgentState, TaskStatus
from tests.helpers.agents import agent_world, settle
from tests.helpers.paths import REPO

CHILD = r'''
import asyncio, os, signal, sys
from decimal import Decimal
from pathlib import Path
from app.tools.executor import ToolExecutor
from tests.helpers.agents import agent_world, settle

original = ToolExecutor.execute

async def execute(self, ctx, call):
    result = await original(self, ctx, call)
    if call.name == "create_order" and result.status == "success":
        os.kill(os.getpid(), signal.SIGKILL)  # the order is placed; the task is not finished
    return result

ToolExecutor.execute = execute

async def main():
    world = agent_world(Path(sys.argv[1]))
    await world.start()
    trader = await world.agents.manager.create_agent(
        "TraderAgent_Default_v1", "Crash trader", {"symbols": ["BTC/USDT"]}, start=True)
    price = await world.venue.broker.last_price("BTC/USDT")
    world.agents.queue.enqueue(trader.agent_id, "NEW_MARKET_ANALYSIS_SIGNAL", {
        "symbol": "BTC/USDT", "side": "BUY", "confidence": "0.9", "price": str(price),
        "stop_loss": str((price * Decimal("0.97")).quantize(Decimal("0.01"))),
        "take_profit": str((price * Decimal("1.06")).quantize(Decimal("0.01"))),
        "reason": "test signal", "interval": "1h", "analyst_agent_id": "test"},
        "agent:test")
    await settle(world)
    print("NOT KILLED")

asyncio.run(main())
'''


def test_trade_task_killed_after_its_order_is_redelivered_without_a_second_order(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", CHILD, str(tmp_path)], cwd=REPO, env=env,
        capture_output=True, text=True, timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr

    async def restart() -> None:
        world = agent_world(tmp_path)
        try:
            (trader,) = world.agents.manager.list_agents()
            await world.start()
            await settle(world)
            (task,) = [t for t in world.agents.queue.tasks(trader.agent_id)
                       if t.task_type == "NEW_MARKET_ANALYSIS_SIGNAL"]
            assert task.status is TaskStatus.DONE
            assert task.attempts == 2
            orders = world.ledger.connection.execute(
                "SELECT order_id, side, quantity FROM orders WHERE agent_id=? AND exit_kind='NONE'",
                (trader.agent_id,),
            ).fetchall()
            assert len(orders) == 1, orders
            assert orders[0][1] == "BUY" and Decimal(orders[0][2]) > 0
        finally:
            await world.aclose()

    asyncio.run(restart())


def test_clarification_pending_across_a_restart_is_answered_and_the_agent_resumes(
    tmp_path: Path,
) -> None:
    async def first_session() -> str:
        world = agent_world(tmp_path)
        try:
            await world.start()
            orchestrator = await world.ensure_orchestrator()
            world.agents.manager.send_user_message(orchestrator.agent_id, "watch BTC/USDT")
            await settle(world)
            (question,) = world.agents.questions.pending(orchestrator.agent_id)
            assert question.suggested_replies
            assert world.agents.store.get(orchestrator.agent_id).state is (
                AgentState.WAITING_FOR_USER)
            return question.question_id
        finally:
            await world.aclose()

    async def second_session(question_id: str) -> None:
        world = agent_world(tmp_path)
        try:
            await world.start()
            orchestrator = world.orchestrator()
            assert orchestrator is not None
            assert orchestrator.state is AgentState.WAITING_FOR_USER
            pending = world.agents.questions.pending(orchestrator.agent_id)
            assert [q.question_id for q in pending] == [question_id]
            for _ in range(4):  # answer each follow-up question with its first suggestion
                pending = [q for q in world.agents.questions.pending(orchestrator.agent_id)
                           if q.answer is None]
                if not pending:
                    break
                world.agents.manager.answer(pending[0].question_id, pending[0].suggested_replies[0])
                await settle(world)
            roles = {a.role for a in world.agents.manager.list_agents()}
            assert AgentRole.ANALYST in roles and AgentRole.TRADER in roles
            assert world.agents.store.get(orchestrator.agent_id).state is AgentState.RUNNING
            assert len(world.agents.scheduler.jobs()) == 1
        finally:
            await world.aclose()

    asyncio.run(second_session(asyncio.run(first_session())))
