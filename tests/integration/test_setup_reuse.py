"""A setup sent again is reused, not repeated: across restarts of ``kestrel run --setup`` (one
command after another on one workspace, each opening it afresh) and within one world (paused
agents, other intervals)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.domain.agents import AgentRole, AgentState
from app.runtime.world import World
from tests.helpers.agents import SETUP_COMMAND
from tests.helpers.cli import Ran, run_cli
from tests.helpers.paths import BTC_USDT_1H
from tests.integration.test_rule_engine_agents import run, say


def kestrel_run(workspace: Path) -> Ran:
    return run_cli("run", "--workspace", workspace, "--data", BTC_USDT_1H,
                   "--setup", SETUP_COMMAND, "--for", "1h", "--speed", "100000")


def test_restarting_kestrel_run_with_the_same_setup_keeps_one_analyst_trader_and_job(
    tmp_path: Path,
) -> None:
    outputs = [kestrel_run(tmp_path) for _ in range(3)]
    for done in outputs:
        assert done.returncode == 0, done.stderr
    first, *again = (done.stdout for done in outputs)
    assert "Set up BTC/USDT 1h Trend Analyst" in first
    for later in again:
        assert "already set up, so I reused it and created nothing new" in later
        assert "Set up BTC/USDT" not in later
    conn = sqlite3.connect(tmp_path / "kestrel.db")
    try:
        roles = [r[0] for r in conn.execute("SELECT role FROM agents WHERE deleted=0")]
        jobs = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    finally:
        conn.close()
    assert sorted(roles) == ["analyst", "orchestrator", "trader"]
    assert jobs == 1
    # the rule engine's answers are counted as what they are
    assert "0 LLM calls, " in first and " rule-engine decisions" in first


def test_a_paused_watch_set_up_again_runs_again_and_another_interval_is_a_new_watch(
    tmp_path: Path,
) -> None:
    async def body(world: World) -> None:
        await say(world, SETUP_COMMAND)
        assert (await say(world, "pause all")).startswith("Paused: ")
        answer = await say(world, SETUP_COMMAND)
        assert "reused it and created nothing new" in answer
        assert "BTC/USDT 1h Trend Analyst was paused and runs again." in answer
        assert "BTC/USDT Trader was paused and runs again." in answer
        agents = world.agents.manager.list_agents()
        assert len(agents) == 3 and all(a.state is AgentState.RUNNING for a in agents)
        answer = await say(world, "watch BTC/USDT on 1h every 4h with a trend analyst and a "
                                    "trader")
        assert "the existing schedule of BTC/USDT (every hour) is kept" in answer
        answer = await say(world, "watch BTC/USDT on 4h every 4h with a trend analyst and a "
                                    "trader")
        assert answer.startswith("Set up BTC/USDT 4h Trend Analyst")
        roles = [a.role for a in world.agents.manager.list_agents()]
        assert roles.count(AgentRole.ANALYST) == 2 and len(world.agents.scheduler.jobs()) == 2

    run(tmp_path, body)


def test_a_watch_whose_job_was_removed_gets_its_job_back_and_no_second_analyst(
    tmp_path: Path,
) -> None:
    async def body(world: World) -> None:
        await say(world, SETUP_COMMAND)
        (job,) = world.agents.scheduler.jobs()
        world.agents.scheduler.delete(job.job_id)
        answer = await say(world, SETUP_COMMAND)
        assert "reused it" in answer
        (again,) = world.agents.scheduler.jobs()
        assert again.name == job.name and again.target_agent_id == job.target_agent_id
        assert len(world.agents.manager.list_agents()) == 3

    run(tmp_path, body)
