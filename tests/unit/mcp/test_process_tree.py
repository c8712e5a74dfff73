"""The MCP server's process keeper as Kestrel starts it: it passes the server's exit code on, and
a server program that does not exist is named at once, as starting it directly would."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.mcp.process_tree import KEEPER_FLAG, keep_command, supported
from tests.helpers.paths import REPO

pytestmark = pytest.mark.skipif(not supported(), reason="the keeper runs on Linux only")


def test_the_keeper_run_by_kestrel_itself_exits_with_the_servers_code():
    """The packaged app runs the keeper as ``kestrel --mcp-process-keeper -- COMMAND``."""
    done = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-m", "app", KEEPER_FLAG, "--", "sh", "-c", "echo served; exit 7"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )
    assert done.returncode == 7
    assert done.stdout == "served\n", "the server writes to the keeper's stdout, not the keeper"


def test_a_server_ended_by_a_signal_is_reported_as_the_shell_does():
    command = keep_command(["sh", "-c", "kill -TERM $$"], {"PATH": "/usr/bin:/bin"})
    done = subprocess.run(command, capture_output=True, timeout=60)  # noqa: S603
    assert done.returncode == 128 + 15


def test_a_missing_server_program_is_named_before_anything_starts():
    with pytest.raises(FileNotFoundError, match="no-such-mcp-server-program"):
        keep_command(["no-such-mcp-server-program", "--flag"], {"PATH": "/usr/bin:/bin"})
