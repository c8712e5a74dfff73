"""Tool calls on a workspace whose disk fills part-way, run as a subprocess by test_disk_full.py.

Usage: python disk_full_worker.py WORKSPACE

It opens the workspace's world without agents (as ``kestrel tool`` does) and makes calls that
are recorded. Then it limits the size of the files it may write (RLIMIT_FSIZE, with SIGXFSZ
ignored, so a write past the limit fails with EFBIG as a write to a full disk fails) to a few
pages past the end of the database's WAL, and makes more calls: market reads, whose audit rows
soon cannot be written, and a memory write larger than the limit. It closes the world and
prints, as JSON, the calls it made under the limit and what closing the world said.
"""

from __future__ import annotations

import asyncio
import base64
import json
import resource
import signal
import sys
from pathlib import Path

from app.store.disk_full import DiskFullError
from app.tools.spec import AgentContext
from app.workspace import Workspace
from tests.helpers.agents import tool_world
from tests.helpers.paths import BTC_USD_1H

AT = 1_560_000_000_000  # 2019-06-08
AGENT = "disk-test"
SNAPSHOT = "<get_market_snapshot><symbol>BTC/USD</symbol></get_market_snapshot>"
FRAME = 4096 + 24  # one page in the WAL


def memory_write(size: int) -> str:
    content = base64.b64encode(b"x" * size).decode()
    return (f"<write_agent_memory_file><file_path>notes/big.md</file_path>"
            f"<content_base64>{content}</content_base64></write_agent_memory_file>")


async def main(root: Path) -> None:
    world = tool_world(Workspace.at(root), [BTC_USD_1H], at_ms=AT)
    world.disk.agent_names[AGENT] = "Disk Test"
    ctx = AgentContext(AGENT)
    for _ in range(3):
        await world.executor.execute_text(ctx, SNAPSHOT)
    await world.executor.execute_text(ctx, memory_write(10))  # opens the agent's recall index
    wal = root / "kestrel.db-wal"
    limit = wal.stat().st_size + 4 * FRAME
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    made = []
    for _ in range(8):
        result = await world.executor.execute_text(ctx, SNAPSHOT)
        made.append(["get_market_snapshot", result.status if result else None])
    result = await world.executor.execute_text(ctx, memory_write(limit + 1))
    made.append(["write_agent_memory_file", result.status if result else None,
                 result.xml if result else ""])
    try:
        world.close()
        said = ""
    except DiskFullError as exc:
        said = str(exc)
    print(json.dumps({"limit": limit, "made": made, "said": said}))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
