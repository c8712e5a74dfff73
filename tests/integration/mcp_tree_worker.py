"""Kestrel's side of an MCP connection, in a process of its own for the test to kill.

``python mcp_tree_worker.py PID_FILE [--setsid]``: connects to the hostile server, has it leave a
daemon behind (``daemonize``), prints the daemon's pid and then waits to be killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from app.config.mcp import McpServerSettings
from app.mcp.servers import McpConnection

HOSTILE = str(Path(__file__).resolve().parents[1] / "helpers" / "hostile_mcp_server.py")


async def main(pid_file: str, new_session: bool) -> None:
    settings = McpServerSettings(command=sys.executable, args=[HOSTILE, "--mode", "transport"],
                                 timeout_s=20)
    connection = McpConnection("hostile", settings, lambda _entry: None)
    result = await connection.call_tool("daemonize",
                                        {"pid_file": pid_file, "setsid": new_session})
    print(result.content[0].text, flush=True)
    await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], "--setsid" in sys.argv[2:]))
