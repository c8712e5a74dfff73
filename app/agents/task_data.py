"""The data a task carries: the calls its template declares, made for the agent before it starts.

Why: an hourly analysis is a dozen small reads (snapshot, candles, four indicators, the agent's
own notes), and each read is a model call that resends the whole conversation. Fetched up front
and put in the task's first message, the model decides from them in one call and spends its
other calls on writing and signalling; it can still call any tool for more.

The calls are ordinary tool calls: made through the executor with the agent's own context (so its
permissions hold, and each is recorded in the audit trail like any other), at the current market
time (in a backtest the replay cursor, which waits for the agent, so never the future), and
their results are the same ``<tool_result>`` envelopes a call returns. The block is::

    <task_data market_time="2024-01-02T03:00:00Z">
    <tool_result tool_name="get_market_snapshot">...</tool_result>
    ...
    </task_data>

appended to the task message after a blank line. ``split_task_data`` takes it off again for the
readers of a task (the chat, the rule engine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from app.agents.templates import SYMBOL_KEY, TaskData
from app.domain.agents import Task
from app.domain.clock import Clock, ms_to_iso
from app.domain.numbers import plain
from app.memory.roles import symbol_key
from app.tools.executor import ToolExecutor
from app.tools.protocol.call import ParamNode, ToolCall
from app.tools.spec import AgentContext

OPEN = "<task_data "
CLOSE = "</task_data>"
SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class DataCall:
    """One call of the block: the tool and its parameters as the protocol carries them."""

    tool: str
    params: tuple[ParamNode, ...] = ()

    def as_call(self) -> ToolCall:
        return ToolCall(self.tool, self.params)


def _text(value: Any) -> str:
    return plain(value) if isinstance(value, Decimal) else str(value)


def _node(name: str, value: Any) -> ParamNode:
    return ParamNode(name, _text(value))


_ELSEWHERE = "elsewhere"  # the task names a symbol the agent is not configured for


def task_symbol(task: Task, config: Mapping[str, Any]) -> str | None:
    """The one symbol a task is about: its payload's (when the agent may work on it), or the
    agent's only configured symbol; None when there is no single one."""
    symbol = _symbol(task, config)
    return None if symbol == _ELSEWHERE else symbol


def _symbol(task: Task, config: Mapping[str, Any]) -> str | None:
    configured = [str(s).upper() for s in config.get("symbols") or []]
    named = task.payload.get("symbol")
    if isinstance(named, str) and named.strip():
        symbol = named.strip().upper()
        return symbol if not configured or symbol in configured else _ELSEWHERE
    return configured[0] if len(configured) == 1 else None


def plan(spec: TaskData, task: Task, config: Mapping[str, Any]) -> list[DataCall]:
    """The calls ``spec`` asks for this task, in the order they appear in the block.

    Empty when the task's type carries no data, or when the task names a symbol outside the
    agent's configured ones (the agent will turn it down; fetching for it would be waste).
    Parts that need a symbol are left out when the task names none and the agent has not
    exactly one configured.
    """
    if task.task_type not in spec.task_types:
        return []
    symbol = _symbol(task, config)
    if symbol == _ELSEWHERE:
        return []
    interval = str(task.payload.get("interval") or config.get("interval") or "1h")
    calls: list[DataCall] = []
    for path in spec.notes:
        if SYMBOL_KEY in path:
            if symbol is None:
                continue
            try:
                path = path.replace(SYMBOL_KEY, symbol_key(symbol))
            except ValueError:
                continue  # not a symbol at all: the agent's own calls will say so
        read: tuple[ParamNode, ...] = (_node("file_path", path),)
        if spec.notes_as == "TEXT":
            read += (_node("content_format", "TEXT"),)
        calls.append(DataCall("read_agent_memory_file", read))
    if symbol is not None:
        market = (_node("symbol", symbol), _node("interval", interval))
        if spec.snapshot:
            calls.append(DataCall("get_market_snapshot", market))
        if spec.klines:
            calls.append(DataCall("get_historical_klines", (*market, _node("limit", spec.klines))))
        for indicator in spec.indicators:
            entries = tuple(
                ParamNode("param", _text(config.get(value) if isinstance(value, str) else value),
                          {"name": key})
                for key, value in indicator.params.items()
            )
            calls.append(DataCall("calculate_technical_indicator", (
                *market, _node("indicator_name", indicator.name),
                ParamNode("params", "", {}, entries), _node("values", spec.indicator_values),
            )))
        if spec.positions:
            calls.append(DataCall("get_open_positions", (_node("symbol", symbol),)))
    if spec.account:
        calls.append(DataCall("get_account_balance"))
    if spec.agents:
        calls.append(DataCall("list_agent_instances"))
    return calls


async def gather(
    spec: TaskData, task: Task, config: Mapping[str, Any], executor: ToolExecutor,
    ctx: AgentContext, clock: Clock,
) -> str | None:
    """Make the calls of ``spec`` for ``task`` and return the block, or None when it has none.

    Each call gets the key ``<task_id>:data:<n>``, so a task redelivered after a crash makes the
    same calls under the same keys (they only read, so repeating them is harmless anyway).
    """
    calls = plan(spec, task, config)
    if not calls:
        return None
    market_time = ms_to_iso(clock.now_ms())
    results = []
    for number, data_call in enumerate(calls, start=1):
        keyed = replace(ctx, call_key=f"{task.task_id}:data:{number}")
        result = await executor.execute(keyed, data_call.as_call())
        results.append(result.xml)
    return f'<task_data market_time="{market_time}">\n' + "\n".join(results) + f"\n{CLOSE}"


def with_task_data(message: str, block: str | None) -> str:
    return message if block is None else f"{message}{SEPARATOR}{block}"


def split_task_data(content: str) -> tuple[str, str | None]:
    """A task message without its data block, and the block (None when it carries none).

    The block is the last thing in the message, and nothing inside it can look like its opening
    (tool results escape their text), so the last opening found is the block's.
    """
    if not content.rstrip().endswith(CLOSE):
        return content, None
    start = content.rfind(SEPARATOR + OPEN)
    if start < 0:
        return content, None
    return content[:start], content[start + len(SEPARATOR):].strip()


def data_results(block: str) -> Sequence[str]:
    """The ``<tool_result>`` envelopes of a block, as text, in order."""
    parts = block.split("<tool_result ")[1:]
    return [("<tool_result " + part).rsplit(CLOSE, 1)[0].strip() for part in parts]
