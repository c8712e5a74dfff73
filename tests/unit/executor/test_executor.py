"""The executor: permission, validation, timeout, rendering and recording of every call."""

from __future__ import annotations

import asyncio
import logging
from decimal import Decimal
from typing import Any

import pytest

from app.domain.clock import ReplayClock
from app.domain.errors import ErrorCode
from app.tools.executor import MemoryRecorder, ToolCallRecord, ToolExecutor
from app.tools.protocol.parser import parse_response
from app.tools.protocol.render import Element, el
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext, ParamSpec, ParamType, Permission, ToolSpec
from tests.unit.protocol.envelope import parse_envelope
from tests.unit.protocol.sample_tools import (
    OPERATOR,
    FakeWorld,
    build_sample_specs,
    make_executor,
    run,
)

ANALYST = AgentContext(
    agent_id="analyst-1",
    permissions=frozenset({Permission.MARKET, Permission.INDICATOR, Permission.MEMORY}),
    role="analyst",
)
ORDER = (
    "<create_order><symbol>BTC/USDT</symbol><side>buy</side><quantity>0.5</quantity></create_order>"
)
SECRET = "db-password=hunter2"


def _spec(name: str, handler: Any, timeout_s: float | None = None) -> ToolSpec:
    return ToolSpec(
        name=name,
        group="Test Tools",
        description=f"{name} for tests.",
        params=(ParamSpec("n", ParamType.INTEGER, "A number", default=1, minimum=0, maximum=10),),
        permission=Permission.NOTIFY,
        handler=handler,
        timeout_s=timeout_s,
    )


async def _sleepy(ctx: AgentContext, args: dict[str, Any]) -> Element:
    await asyncio.sleep(5)
    return el("never")


async def _broken(ctx: AgentContext, args: dict[str, Any]) -> Element:
    raise RuntimeError(f"connection string {SECRET} leaked in a traceback")


async def _service_timeout(ctx: AgentContext, args: dict[str, Any]) -> Element:
    raise TimeoutError("upstream took too long")


async def _not_elements(ctx: AgentContext, args: dict[str, Any]) -> Element:
    return {"n": args["n"]}  # type: ignore[return-value]


async def _many(ctx: AgentContext, args: dict[str, Any]) -> list[Element]:
    return [el("item", None, index=i) for i in range(args["n"])]


EXTRA = [
    _spec("slow_tool", _sleepy, timeout_s=0.05),
    _spec("waiting_tool", _sleepy, timeout_s=30),
    _spec("broken_tool", _broken),
    _spec("service_timeout_tool", _service_timeout),
    _spec("shapeless_tool", _not_elements),
    _spec("many_tool", _many),
]


def _execute(response: str, ctx: AgentContext = OPERATOR) -> tuple[Any, MemoryRecorder, FakeWorld]:
    executor, recorder, world = make_executor(EXTRA)
    return run(executor.execute_text(ctx, response)), recorder, world


def test_a_valid_call_runs_with_coerced_values_and_renders_its_data() -> None:
    result, recorder, world = _execute(ORDER)
    assert result.status == "success", result.message
    root = parse_envelope(result.xml)
    order = root.find("data/order_created")
    assert order.attrib == {
        "order_id": "ord-1",
        "symbol": "BTC/USDT",
        "side": "BUY",
        "order_type": "MARKET",
        "quantity": "0.5",
        "price": "25000.5",
        "reduce_only": "false",
    }
    assert world.orders[0]["quantity"] == Decimal("0.5")
    assert world.orders[0]["price"] is None


def test_a_tool_may_return_several_elements() -> None:
    result, _, _ = _execute("<many_tool><n>3</n></many_tool>")
    root = parse_envelope(result.xml)
    assert [item.get("index") for item in root.find("data")] == ["0", "1", "2"]


def test_permission_denied_names_the_permission_group() -> None:
    result, recorder, world = _execute(ORDER, ANALYST)
    assert (result.status, result.error_code) == ("error", ErrorCode.PERMISSION_DENIED)
    assert "permission group 'trade'" in result.message
    assert "analyst" in result.message
    assert result.details == {"tool": "create_order", "permission": "trade"}
    assert world.orders == []
    assert recorder.entries[0].error_code == "PERMISSION_DENIED"


def test_permission_is_checked_before_parameters() -> None:
    result, _, _ = _execute("<create_order><bogus>1</bogus></create_order>", ANALYST)
    assert result.error_code is ErrorCode.PERMISSION_DENIED


def test_unknown_tool_suggests_only_tools_the_agent_may_use() -> None:
    result, _, _ = _execute("<create_ordr><symbol>X</symbol></create_ordr>", ANALYST)
    assert result.error_code is ErrorCode.UNKNOWN_TOOL
    assert "create_order" not in result.message
    result, _, _ = _execute("<create_ordr><symbol>X</symbol></create_ordr>", OPERATOR)
    assert "Did you mean create_order" in result.message
    assert result.details["closest"][0] == "create_order"


def test_a_slow_tool_times_out() -> None:
    executor, recorder, _ = make_executor(EXTRA)
    result = run(executor.execute_text(OPERATOR, "<slow_tool/>"))
    assert (result.status, result.error_code) == ("error", ErrorCode.TIMEOUT)
    assert "did not finish within 0.05 s" in result.message
    assert recorder.entries[0].duration_ms < 2_000


def test_the_executor_default_timeout_applies_when_a_tool_sets_none() -> None:
    registry = ToolRegistry([_spec("sleepy", _sleepy)])
    executor = ToolExecutor(registry, MemoryRecorder(), default_timeout_s=0.02)
    result = run(executor.execute_text(OPERATOR, "<sleepy/>"))
    assert result.error_code is ErrorCode.TIMEOUT
    assert "0.02 s" in result.message


def test_a_tools_own_timeout_error_is_reported_as_a_service_timeout() -> None:
    result, _, _ = _execute("<service_timeout_tool/>")
    assert result.error_code is ErrorCode.TIMEOUT
    assert "waiting for a service" in result.message


def test_an_unexpected_exception_is_internal_error_without_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="app.tools.executor"):
        result, recorder, _ = _execute("<broken_tool><n>2</n></broken_tool>")
    assert (result.status, result.error_code) == ("error", ErrorCode.INTERNAL_ERROR)
    assert "RuntimeError" in result.message
    assert SECRET not in result.xml
    assert "Traceback" not in result.xml and "File " not in result.xml
    assert SECRET not in recorder.entries[0].result_xml
    assert any(record.exc_info for record in caplog.records)  # the log keeps the traceback


def test_a_handler_returning_the_wrong_shape_is_internal_error() -> None:
    result, _, _ = _execute("<shapeless_tool/>")
    assert result.error_code is ErrorCode.INTERNAL_ERROR
    assert "TypeError" in result.message


def test_a_domain_error_keeps_its_code_message_and_details() -> None:
    result, _, _ = _execute("<get_order_book><symbol>DOGE/USDT</symbol></get_order_book>")
    assert result.error_code is ErrorCode.NOT_FOUND
    root = parse_envelope(result.xml)
    assert "Available: BTC/USDT, ETH/USDT, SOL/USDT" in root.findtext("error_details/message")
    assert '"symbol": "DOGE/USDT"' in root.findtext("error_details/details_json")


def test_access_denied_comes_through_as_its_own_code() -> None:
    result, _, world = _execute(
        "<write_agent_memory_file><file_path>../other/a.md</file_path>"
        "<content_base64>aGk=</content_base64></write_agent_memory_file>"
    )
    assert result.error_code is ErrorCode.ACCESS_DENIED
    assert world.files == {}


def test_risk_rejection_renders_status_rejected_with_rule_and_reason() -> None:
    result, recorder, world = _execute(
        "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><quantity>10</quantity>"
        "</create_order>"
    )
    assert (result.status, result.rule, result.error_code) == (
        "rejected",
        "max_order_notional",
        None,
    )
    root = parse_envelope(result.xml)
    assert root.findtext("rule") == "max_order_notional"
    assert root.findtext("reason") == "order notional 250005.0 USDT > limit 100000 USDT"
    assert world.orders == []
    assert recorder.entries[0].status == "rejected"


def test_the_recorder_receives_every_call_with_params_status_and_duration() -> None:
    clock = ReplayClock(1_700_000_000_000)
    recorder = MemoryRecorder()
    executor = ToolExecutor(
        ToolRegistry([*build_sample_specs(FakeWorld()), *EXTRA]), recorder, clock
    )
    responses = [
        ORDER,
        "<get_order_book><symbol>BTC/USDT</symbol><limit>500</limit></get_order_book>",
        "<get_order_book><symbol>A & B</symbol></get_order_book>",
        "<slow_tool/>",
        "A plain answer, no call.",
    ]
    results = [run(executor.execute_text(OPERATOR, response)) for response in responses]
    assert results[-1] is None
    entries: list[ToolCallRecord] = list(recorder.entries)
    assert [(e.tool_name, e.status, e.error_code) for e in entries] == [
        ("create_order", "success", None),
        ("get_order_book", "error", "INVALID_PARAMETER"),
        ("get_order_book", "error", "PARSE_ERROR"),
        ("slow_tool", "error", "TIMEOUT"),
    ]
    assert entries[0].params == {
        "symbol": "BTC/USDT",
        "side": "BUY",
        "order_type": "MARKET",
        "quantity": Decimal("0.5"),
        "price": None,
        "reduce_only": False,
    }
    assert entries[1].params == {"symbol": "BTC/USDT", "limit": "500"}  # raw, as sent
    assert entries[2].params == {}
    assert all(e.agent_id == "op-1" and e.started_ms == 1_700_000_000_000 for e in entries)
    assert entries[3].duration_ms >= 40
    assert all(e.duration_ms >= 0 for e in entries)
    assert [e.result_xml for e in entries] == [r.xml for r in results[:-1]]


class _FailingRecorder:
    def __init__(self) -> None:
        self.attempts = 0

    def record(self, entry: ToolCallRecord) -> None:
        self.attempts += 1
        raise OSError("disk full")


def test_a_failing_recorder_does_not_lose_the_result(caplog: pytest.LogCaptureFixture) -> None:
    recorder = _FailingRecorder()
    world = FakeWorld()
    executor = ToolExecutor(ToolRegistry(build_sample_specs(world)), recorder)
    with caplog.at_level(logging.ERROR, logger="app.tools.executor"):
        result = run(executor.execute_text(OPERATOR, ORDER))
    assert result.status == "success"
    assert world.orders and recorder.attempts == 1
    assert "could not record the call to create_order" in caplog.text


def test_a_text_answer_returns_none_and_runs_nothing() -> None:
    executor, recorder, world = make_executor()
    assert run(executor.execute_text(OPERATOR, "BTC is ranging; no trade today.")) is None
    assert run(executor.execute_text(OPERATOR, b"<thinking>x</thinking>Done.")) is None
    assert len(recorder.entries) == 0 and world.orders == []


def test_execute_parsed_refuses_a_text_answer() -> None:
    executor, _, _ = make_executor()
    with pytest.raises(ValueError, match="not a text answer"):
        run(executor.execute_parsed(OPERATOR, parse_response("hello")))


def test_a_cancelled_call_is_not_swallowed() -> None:
    executor, recorder, _ = make_executor(EXTRA)

    async def cancel_midway() -> None:
        task = asyncio.create_task(executor.execute_text(OPERATOR, "<waiting_tool/>"))
        await asyncio.sleep(0.02)  # the handler is now inside its sleep
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        run(cancel_midway())
    assert len(recorder.entries) == 0


def test_default_values_are_fresh_for_every_call() -> None:
    seen: list[list[str]] = []

    async def appender(ctx: AgentContext, args: dict[str, Any]) -> Element:
        args["tags"].append("x")
        seen.append(list(args["tags"]))
        return el("ok")

    spec = ToolSpec(
        name="tagger",
        group="Test Tools",
        description="Mutates its default list.",
        params=(ParamSpec("tags", ParamType.LIST, "Tags", default=[], item_tag="tag"),),
        permission=Permission.NOTIFY,
        handler=appender,
    )
    executor = ToolExecutor(ToolRegistry([spec]), MemoryRecorder())
    for _ in range(2):
        run(executor.execute_text(OPERATOR, "<tagger/>"))
    assert seen == [["x"], ["x"]]
