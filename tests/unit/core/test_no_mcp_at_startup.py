"""Start-up never pays for the MCP SDK when no MCP server is configured (and not even when one
is: the SDK is imported when the first connection starts)."""

import subprocess
import sys

PROBE = """
import sys, tempfile, asyncio
from pathlib import Path
import app.cli.main
from app.runtime.world import build_world
from app.workspace import Workspace
with tempfile.TemporaryDirectory() as tmp:
    ws = Workspace.at(Path(tmp)).ensure()
    if sys.argv[1] == "configured":
        ws.settings_path.write_text('[mcp.servers.time]\\ncommand = "mcp-server-time"\\n')
    world = build_world(ws)
    print("hub:", world.agents.mcp is not None)
    asyncio.run(world.aclose())
loaded = sorted(n for n in sys.modules if n.split('.')[0] in ('mcp', 'mcp_types'))
print('mcp modules:', loaded)
"""


def _probe(kind):
    done = subprocess.run([sys.executable, "-c", PROBE, kind], capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()


def test_a_world_without_mcp_servers_does_not_import_the_sdk():
    assert _probe("none")[-2:] == ["hub: False", "mcp modules: []"]


def test_a_configured_server_is_not_started_nor_the_sdk_imported_before_first_use():
    assert _probe("configured")[-2:] == ["hub: True", "mcp modules: []"]
