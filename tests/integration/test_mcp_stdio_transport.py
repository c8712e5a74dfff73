"""Kestrel's stdio transport against a real hostile MCP server process.

However much a server writes, and however it shapes it, the event loop (which the app shares with
its window) keeps running, the call waiting for the answer fails at once with a clear error, and
the connection either stays usable or is closed and started again on the next call.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from app.config.mcp import McpServerSettings
from app.domain.errors import ErrorCode, ToolError
from app.mcp.servers import McpConnection
from app.mcp.stdio_transport import DROPPED_LINE_FACTOR
from tests.helpers.eventually import eventually_blocking
from tests.helpers.heartbeat import Heartbeat

HOSTILE = str(Path(__file__).resolve().parents[1] / "helpers" / "hostile_mcp_server.py")
LIMIT = 8 * 1024 * 1024  # what max_result_chars = 5000 gives


def _connection(timeout_s: float = 20) -> McpConnection:
    settings = McpServerSettings(command=sys.executable, args=[HOSTILE, "--mode", "transport"],
                                 timeout_s=timeout_s, max_result_chars=5000)
    assert settings.max_message_bytes == LIMIT
    return McpConnection("hostile", settings, lambda _entry: None)


def _run(scenario: Callable[[McpConnection], Awaitable[None]]) -> None:
    async def main() -> None:
        connection = _connection()
        try:
            await scenario(connection)
        finally:
            await connection.aclose()

    asyncio.run(main())


async def _text(connection: McpConnection, tool: str, arguments: dict) -> str:
    result = await connection.call_tool(tool, arguments)
    return result.content[0].text


def test_a_32_mb_answer_keeps_the_loop_responsive_and_fails_its_call_clearly():
    async def scenario(connection: McpConnection) -> None:
        client = await connection.client()
        with Heartbeat() as beat:
            await asyncio.sleep(0.05)
            beat.reset()
            with pytest.raises(ToolError) as caught:
                await connection.call_tool("flood", {"megabytes": 32})
            beats = beat.beats
        assert beats > 0, "the loop ran other tasks while the answer came in"
        error = caught.value
        assert error.code is ErrorCode.INTERNAL_ERROR
        assert (f"The MCP server 'hostile' sent a message of more than {LIMIT} bytes as its "
                "answer to the call of flood; it was dropped.") in error.message
        assert error.details["limit"] == LIMIT
        assert await _text(connection, "echo", {"text": "still here"}) == "still here"
        assert await connection.client() is client, "the same connection, not a restart"

    _run(scenario)


def test_an_answer_of_a_few_mb_is_read_whole_for_the_caller_to_cut():
    async def scenario(connection: McpConnection) -> None:
        assert len(await _text(connection, "flood", {"megabytes": 4})) == 4 * 1024 * 1024

    _run(scenario)


def test_an_answer_of_too_many_tiny_values_is_dropped_without_a_long_pause():
    async def scenario(connection: McpConnection) -> None:
        await connection.client()
        with Heartbeat() as beat:
            await asyncio.sleep(0.05)
            beat.reset()
            with pytest.raises(ToolError, match="more than 50000 JSON values"):
                await connection.call_tool("flood_values", {"thousands": 500})
            beats = beat.beats
        assert beats > 0, "the loop ran other tasks while the answer came in"
        result = await connection.call_tool("flood_values", {"thousands": 10})
        assert len(result.structured_content["rows"]) == 10_000

    _run(scenario)


def test_an_oversized_answer_whose_id_comes_last_still_fails_only_its_call():
    async def scenario(connection: McpConnection) -> None:
        client = await connection.client()
        with pytest.raises(ToolError, match=f"more than {LIMIT} bytes"):
            await connection.call_tool("flood_id_last", {"megabytes": 9})
        assert await _text(connection, "echo", {"text": "on"}) == "on"
        assert await connection.client() is client

    _run(scenario)


def test_an_oversized_notification_is_dropped_and_the_call_is_still_answered():
    async def scenario(connection: McpConnection) -> None:
        text = await _text(connection, "flood_notification", {"megabytes": 9})
        assert text == "answered after the notification"

    _run(scenario)


def test_an_oversized_line_matching_no_call_closes_the_connection_and_the_next_call_restarts():
    async def scenario(connection: McpConnection) -> None:
        client = await connection.client()
        with pytest.raises(ToolError) as caught:
            await connection.call_tool("flood_unmatched", {"megabytes": 9})
        # failed at once, as a closed connection: the call's deadline would say TIMEOUT
        assert caught.value.code is ErrorCode.NETWORK_ERROR
        assert f"sent a message of more than {LIMIT} bytes; it was dropped" in caught.value.message
        assert "started again on the next call" in caught.value.message
        assert await _text(connection, "echo", {"text": "back"}) == "back"
        assert await connection.client() is not client, "a fresh connection"

    _run(scenario)


def test_a_line_that_never_ends_is_given_up_at_its_bound_and_the_next_call_restarts():
    async def scenario(connection: McpConnection) -> None:
        client = await connection.client()
        with pytest.raises(ToolError) as caught:
            await connection.call_tool("flood_endless", {})
        error = caught.value
        assert error.code is ErrorCode.NETWORK_ERROR, error.message
        assert (f"sent a message of more than {DROPPED_LINE_FACTOR * LIMIT} bytes that did not "
                "end (the most Kestrel reads of one message, even to drop it)") in error.message
        assert error.details["limit"] == DROPPED_LINE_FACTOR * LIMIT
        assert await _text(connection, "echo", {"text": "back"}) == "back"
        assert await connection.client() is not client, "a fresh connection"

    _run(scenario)


def _gone(pid: int) -> bool:
    """The process no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states in /proc")
def test_closing_the_connection_ends_what_the_server_started():
    child: list[int] = []

    async def scenario(connection: McpConnection) -> None:
        child.append(int(await _text(connection, "spawn_child", {})))
        assert not _gone(child[0])

    _run(scenario)
    try:
        eventually_blocking(lambda: _gone(child[0]))  # else the child outlived the connection
    finally:
        if not _gone(child[0]):
            os.kill(child[0], signal.SIGKILL)
