"""The executor's deadline: a tool that never suspends pays no timer, one that suspends continues
under the deadline exactly as if awaited directly (results, errors, timeouts, cancellation)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.domain.errors import ErrorCode, NotFoundError
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.protocol.render import Element, el
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext, Permission, ToolSpec

AGENT = AgentContext(agent_id="t", permissions=frozenset({Permission.NOTIFY}))


def _executor(handler: Any, timeout_s: float = 1.0) -> ToolExecutor:
    spec = ToolSpec(name="tool", group="Test Tools", description="A tool for tests.", params=(),
                    permission=Permission.NOTIFY, handler=handler, timeout_s=timeout_s)
    return ToolExecutor(ToolRegistry([spec]), MemoryRecorder())


async def _instant(ctx: AgentContext, args: dict[str, Any]) -> Element:
    return el("done", "now")


async def _suspends_then_returns(ctx: AgentContext, args: dict[str, Any]) -> Element:
    got = []
    for i in range(3):
        await asyncio.sleep(0)
        got.append(await asyncio.sleep(0.001, result=i))  # a future's result is sent back in
    return el("done", ",".join(map(str, got)))


async def _suspends_then_fails(ctx: AgentContext, args: dict[str, Any]) -> Element:
    await asyncio.sleep(0.001)
    raise NotFoundError("nothing here", details={"what": "x"})


async def _suspends_too_long(ctx: AgentContext, args: dict[str, Any]) -> Element:
    await asyncio.sleep(0)
    await asyncio.sleep(5)
    return el("never")


def _run(executor: ToolExecutor) -> Any:
    return asyncio.run(executor.execute_text(AGENT, "<tool></tool>"))


def test_a_tool_that_never_suspends_returns_its_result() -> None:
    result = _run(_executor(_instant))
    assert result.ok and result.data[0].text == "now"


def test_a_tool_that_suspends_gets_every_awaited_value_and_returns_its_result() -> None:
    result = _run(_executor(_suspends_then_returns))
    assert result.ok and result.data[0].text == "0,1,2"


def test_an_error_raised_after_suspending_keeps_its_code() -> None:
    result = _run(_executor(_suspends_then_fails))
    assert result.error_code is ErrorCode.NOT_FOUND and result.message == "nothing here"


def test_the_deadline_covers_a_tool_that_suspends_after_its_first_step() -> None:
    result = _run(_executor(_suspends_too_long, timeout_s=0.05))
    assert result.error_code is ErrorCode.TIMEOUT
    assert result.details == {"timeout_s": 0.05}


def test_cancelling_the_caller_cancels_a_suspended_tool() -> None:
    finished: list[str] = []

    async def waits(ctx: AgentContext, args: dict[str, Any]) -> Element:
        try:
            await asyncio.sleep(5)
        finally:
            finished.append("cleaned up")
        return el("never")

    async def main() -> None:
        task = asyncio.create_task(_executor(waits, timeout_s=30).execute_text(AGENT, "<tool/>"))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert finished == ["cleaned up"]
