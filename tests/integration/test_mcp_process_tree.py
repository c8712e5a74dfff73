"""Nothing an MCP server starts outlives its connection, not even a daemon that left the tree.

A server may double-fork a grandchild (its parent exits, so it is nobody's child) and may also
move it into a session of its own (``setsid``), out of the process group Kestrel ends. The hostile
server does both on request (``daemonize``); the daemon writes its pid to a file and sleeps. When
Kestrel closes the connection, and when Kestrel itself is killed with SIGKILL (no code of its own
runs then), the daemon must be gone within seconds.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.config.mcp import McpServerSettings
from app.mcp.servers import McpConnection
from tests.helpers.eventually import eventually_blocking
from tests.helpers.paths import REPO

HOSTILE = str(Path(__file__).resolve().parents[1] / "helpers" / "hostile_mcp_server.py")
WORKER = Path(__file__).with_name("mcp_tree_worker.py")

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="reads process states in /proc")
KINDS = pytest.mark.parametrize("new_session", [False, True], ids=["double-fork", "setsid"])


def _gone(pid: int) -> bool:
    """The process no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _wait_gone(pid: int) -> bool:
    try:
        eventually_blocking(lambda: _gone(pid))
    except AssertionError:
        return False
    return True


def _end(pid: int) -> None:
    """Clean up after a failure: the daemon must not outlive the test either."""
    if not _gone(pid):
        os.kill(pid, signal.SIGKILL)


@KINDS
def test_closing_the_connection_ends_a_daemon_the_server_left_behind(tmp_path, new_session):
    pid_file = str(tmp_path / "daemon.pid")
    daemon: list[int] = []

    async def scenario() -> None:
        settings = McpServerSettings(command=sys.executable,
                                     args=[HOSTILE, "--mode", "transport"], timeout_s=20)
        connection = McpConnection("hostile", settings, lambda _entry: None)
        try:
            result = await connection.call_tool(
                "daemonize", {"pid_file": pid_file, "setsid": new_session})
            daemon.append(int(result.content[0].text))
            assert not _gone(daemon[0]), "the daemon runs while the connection is open"
        finally:
            await connection.aclose()

    asyncio.run(scenario())
    try:
        assert _wait_gone(daemon[0]), "the server's daemon outlived the closed connection"
    finally:
        _end(daemon[0])


@KINDS
def test_a_daemon_of_the_server_ends_when_kestrel_is_killed(tmp_path, new_session):
    pid_file = str(tmp_path / "daemon.pid")
    app = subprocess.Popen(  # noqa: S603 - our own interpreter and worker
        [sys.executable, str(WORKER), pid_file, *(["--setsid"] if new_session else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    daemon = 0
    try:
        line = app.stdout.readline()
        assert line.strip().isdigit(), app.stderr.read()
        daemon = int(line)
        assert not _gone(daemon)
        app.kill()  # SIGKILL: Kestrel runs no code of its own from here on
        app.wait()
        assert _wait_gone(daemon), "the server's daemon outlived Kestrel"
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
        if daemon:
            _end(daemon)
