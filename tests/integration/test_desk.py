"""Opening a workspace for the desk: a fresh one gets the offline demo, which trades within its
first simulated hour; a used one resumes where it stopped, without being seeded again."""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.domain.agents import AgentRole
from app.domain.clock import ReplayClock
from app.market.replay import ReplayMarketData
from app.resources import sample_data_files
from app.runtime.desk import DEMO_COMMAND, HOUR_MS, demo_start_ms, is_fresh, open_desk, seed_demo
from app.store.db import is_checkpointed_in_background
from app.workspace import Workspace


def test_the_demo_starts_on_the_hour_with_a_month_of_data_ahead() -> None:
    market = ReplayMarketData.from_paths(ReplayClock(0), sample_data_files())
    start = demo_start_ms(market)
    assert start % HOUR_MS == 0
    assert market.end_ms() - start >= 30 * 24 * HOUR_MS


def test_a_fresh_workspace_seeds_the_demo_which_fills_an_order_within_the_first_hour(
    tmp_path: Path,
) -> None:
    workspace = Workspace.at(tmp_path)
    assert is_fresh(workspace)

    async def first_launch() -> int:
        desk = open_desk(workspace)
        world = desk.world
        try:
            assert desk.fresh
            await world.start()
            await seed_demo(world)
            await asyncio.wait_for(world.agents.manager.wait_idle(), 30)
            start = world.venue.clock.now_ms()
            for minute in range(1, 61):  # the replay, a minute at a time
                world.venue.driver.advance_to(start + minute * 60_000)
                await asyncio.wait_for(world.agents.manager.wait_idle(), 30)
            roles = sorted(a.role.value for a in world.agents.manager.list_agents())
            assert roles == ["analyst", "orchestrator", "trader"]
            trader = next(a for a in world.agents.manager.list_agents()
                          if a.role is AgentRole.TRADER)
            fills = world.ledger.fills()
            assert [f.agent_id for f in fills] == [trader.agent_id]
            return world.venue.clock.now_ms()
        finally:
            await world.aclose()

    stopped_at = asyncio.run(first_launch())
    assert not is_fresh(workspace)

    async def second_launch() -> None:
        desk = open_desk(workspace)
        try:
            assert not desk.fresh
            assert desk.world.venue.clock.now_ms() == stopped_at
            orchestrator = desk.world.orchestrator()
            assert orchestrator is not None
            tasks = [t for t in desk.world.agents.queue.tasks(orchestrator.agent_id)]
            assert [t.payload.get("text") for t in tasks] == [DEMO_COMMAND]
        finally:
            await desk.world.aclose()

    asyncio.run(second_launch())


def test_the_desk_checkpoints_its_database_on_a_thread_not_in_the_loops_commits(
    tmp_path: Path,
) -> None:
    workspace = Workspace.at(tmp_path)

    async def run() -> None:
        world = open_desk(workspace).world
        try:
            assert world.agents.checkpointer.running
            assert (world.ledger.connection
                    .execute("PRAGMA wal_autocheckpoint").fetchone()[0]) == 0
            await world.start()
            await seed_demo(world)
            await asyncio.wait_for(world.agents.manager.wait_idle(), 30)
            ticks = world.agents.checkpointer.checkpoints
            await asyncio.sleep(3 * world.agents.checkpointer.interval_s)
            assert world.agents.checkpointer.checkpoints > ticks
            assert world.agents.checkpointer.failures == 0
        finally:
            await world.aclose()
        assert not world.agents.checkpointer.running
        assert not is_checkpointed_in_background(workspace.db_path)

    asyncio.run(run())
