"""A world that trips its kill switch and freezes, run by ``test_kill_switch.py`` and killed
with SIGKILL right after the trip was committed.

Usage: python kill_switch_worker.py WORKSPACE

It builds the agent world on the test data, lets the Orchestrator set up a trend analyst and a
trader (rule engine), has the trader place a limit buy that stays open, then trips the switch.
The moment the trip is committed (``KillSwitchTripped``, published before any action runs) it
prints ``TRIPPED <trip id>`` and blocks the whole process, so the kill lands after the commit and
before a single order was cancelled or an agent paused.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from app.domain.agents import AgentRole
from app.events import KillSwitchTripped
from app.tools.spec import AgentContext
from tests.helpers.agents import SETUP_COMMAND, agent_world, settle


def frozen(event: KillSwitchTripped) -> None:
    print(f"TRIPPED {event.trip_id}", flush=True)
    while True:  # noqa: ASYNC110 - the point: nothing after the commit may run before the kill
        time.sleep(1)


async def main(folder: Path) -> None:
    world = agent_world(folder)
    await world.start()
    orchestrator = await world.ensure_orchestrator()
    world.agents.manager.send_user_message(orchestrator.agent_id, SETUP_COMMAND)
    await settle(world)
    trader = next(a for a in world.agents.manager.list_agents() if a.role is AgentRole.TRADER)
    price = await world.venue.broker.last_price("BTC/USDT")
    result = await world.executor.execute_text(
        AgentContext(agent_id=trader.agent_id),
        "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>LIMIT</order_type>"
        f"<price>{(price * 95 / 100).quantize(1)}</price><quantity>0.01</quantity>"
        "</create_order>")
    assert result is not None and result.status == "success", result
    print(f"ORDER {dict(result.data[0].attrs)['order_id']}", flush=True)
    world.bus.subscribe(KillSwitchTripped, frozen)
    await world.agents.kill_switch.trip("a test of kill -9 right after the trip", "the test")
    print("NOT FROZEN", flush=True)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
