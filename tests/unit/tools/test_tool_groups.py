"""Each tool group is a class whose handlers can be called alone, with fakes for its dependencies.

No registry, executor or store here: a group is built from hand-written fakes and one handler is
awaited with the arguments validation would have produced (defaults filled), so a handler's
behaviour is pinned without the machinery around it. The last tests walk every group's table.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest

from app.domain.agents import Question, QuestionKind
from app.domain.errors import NotFoundError
from app.domain.market import Ticker
from app.domain.market_rules import MarketRules
from app.domain.trading import OrderStatus, Position
from app.indicators.catalogue import default_catalogue
from app.memory.store import WriteOutcome
from app.tools.account_tools import AccountTools
from app.tools.group import ToolDef, ToolGroup
from app.tools.indicator_tools import IndicatorTools
from app.tools.market_tools import MarketTools
from app.tools.memory_tools import MemoryTools
from app.tools.orchestration_tools import OrchestrationTools
from app.tools.protocol.render import Element, serialise
from app.tools.spec import AgentContext, Permission
from app.tools.trade_tools import TradeTools
from app.trading.entry import Caller

CTX = AgentContext(agent_id="agent-1", task_id="task-9", call_key="task-9:3")


def run[T](coro: Awaitable[T]) -> T:
    async def wait() -> T:
        return await coro

    return asyncio.run(wait())


def xml(element: Element) -> str:
    return serialise(element)


# --- market -----------------------------------------------------------------------------------


class FakeMarket:
    """Two symbols, a fixed ticker each; records which tickers were asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def symbols(self) -> list[str]:
        return ["BTC/USDT", "ETH/USDT"]

    async def ticker(self, symbol: str) -> Ticker:
        self.asked.append(symbol)
        return Ticker(symbol, 0, Decimal("100.5"), Decimal("101"), Decimal("99"), Decimal("12"),
                      Decimal("1.5"))


def test_the_ticker_handler_asks_once_per_distinct_symbol() -> None:
    market = FakeMarket()
    tools = MarketTools(market)  # type: ignore[arg-type]
    element = run(tools.get_current_ticker_info(CTX, {"symbols": ["BTC/USDT", "BTC/USDT"]}))
    assert market.asked == ["BTC/USDT"]
    assert xml(element) == (
        "<tickers_data>\n"
        '    <ticker symbol="BTC/USDT" last_price="100.5" high_24h="101" low_24h="99" '
        'volume_24h="12" change_percent_24h="1.5" />\n'
        "</tickers_data>"
    )


def test_the_ticker_handler_refuses_an_unknown_symbol_naming_the_known_ones() -> None:
    market = FakeMarket()
    with pytest.raises(NotFoundError, match="Unknown symbol.*DOGE/USDT.*BTC/USDT, ETH/USDT"):
        run(MarketTools(market).get_current_ticker_info(  # type: ignore[arg-type]
            CTX, {"symbols": ["BTC/USDT", "DOGE/USDT"]}))
    assert market.asked == []  # refused before any ticker was fetched


# --- indicators -------------------------------------------------------------------------------


@dataclass
class FakeEngine:
    """Only the catalogue: describing an indicator computes nothing."""

    catalogue: Any = field(default_factory=default_catalogue)


def test_the_describe_handler_reads_the_catalogue_alone() -> None:
    tools = IndicatorTools(market=None, engine=FakeEngine())  # type: ignore[arg-type]
    element = run(tools.describe_technical_indicator(CTX, {"indicator_name": "rsi"}))
    assert (element.tag, element.attr("name"), element.attr("outputs")) == (
        "indicator", "RSI", "value")
    assert [p.attr("name") for p in element.find_all("param")] == ["length"]


# --- account ----------------------------------------------------------------------------------


class FakeBroker:
    """One position, rounded by rules with a 0.01 tick and a 0.0001 step."""

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    def canonical_symbol(self, symbol: str) -> str:
        return symbol.upper()

    def market_rules(self, symbol: str) -> MarketRules:
        return MarketRules(symbol, tick=Decimal("0.01"), step=Decimal("0.0001"))

    async def positions(self, symbol: str | None) -> list[Position]:
        self.asked.append(symbol)
        return [Position("BTC/USDT", Decimal("0.123456"), Decimal("100.2049"),
                         Decimal("100.5"), Decimal("0.0364"), Decimal("12.756"))]


def test_the_positions_handler_rounds_to_the_market_and_canonicalises_the_filter() -> None:
    broker = FakeBroker()
    element = run(AccountTools(broker).get_open_positions(  # type: ignore[arg-type]
        CTX, {"symbol": "btc/usdt"}))
    assert broker.asked == ["BTC/USDT"]
    assert xml(element) == (
        "<positions>\n"
        '    <position symbol="BTC/USDT" size="0.1235" avg_price="100.2" current_price="100.5" '
        'unrealized_pnl="0.0364" weight_pct="12.76" />\n'
        "</positions>"
    )


# --- trade ------------------------------------------------------------------------------------


@dataclass
class CancelledOrder:
    order_id: str
    status: OrderStatus


class FakeEntry:
    """Order entry that cancels whatever it is asked to, remembering who asked."""

    def __init__(self) -> None:
        self.broker = FakeBroker()
        self.calls: list[tuple[Caller, str, str | None, str | None]] = []

    async def cancel(self, caller: Caller, symbol: str, order_id: str | None,
                     client_order_id: str | None) -> CancelledOrder:
        self.calls.append((caller, symbol, order_id, client_order_id))
        return CancelledOrder(order_id or "P00000042", OrderStatus.CANCELLED)


def test_the_cancel_handler_passes_the_caller_and_reads_an_empty_id_as_none() -> None:
    entry = FakeEntry()
    element = run(TradeTools(entry).cancel_order(  # type: ignore[arg-type]
        CTX, {"symbol": "BTC/USDT", "order_id": "", "client_order_id": "mine-1"}))
    ((caller, symbol, order_id, client_order_id),) = entry.calls
    assert (caller.agent_id, caller.task_id, caller.call_key) == ("agent-1", "task-9", "task-9:3")
    assert (symbol, order_id, client_order_id) == ("BTC/USDT", None, "mine-1")
    assert xml(element) == '<order_cancelled order_id="P00000042" status="CANCELLED" />'


# --- memory -----------------------------------------------------------------------------------


class FakeBank:
    """Notes in a dict; every write stamped at the same market time."""

    def __init__(self) -> None:
        self.notes: dict[tuple[str, str], str] = {}

    async def awrite_note(self, agent_id: str, key: str, content: str) -> WriteOutcome:
        self.notes[(agent_id, key)] = content
        return WriteOutcome(f"notes/{key}.md", "created", len(content), 0)


def test_the_note_handler_writes_in_the_callers_own_memory() -> None:
    bank = FakeBank()
    element = run(MemoryTools(bank).write_note(  # type: ignore[arg-type]
        CTX, {"key": "position_BTCUSDT", "content": "long 0.1"}))
    assert bank.notes == {("agent-1", "position_BTCUSDT"): "long 0.1"}
    assert xml(element) == (
        '<note_written key="position_BTCUSDT" file_path="notes/position_BTCUSDT.md" '
        'status_message="Note saved successfully." />'
    )


# --- orchestration ----------------------------------------------------------------------------


class FakeQuestions:
    """Questions in a list, each keyed as the store keys them."""

    def __init__(self) -> None:
        self.asked: list[tuple[Any, ...]] = []

    def ask(self, agent_id: str, task_id: str, kind: QuestionKind, text: str,
            replies: Any, hint: str, *, key: str | None = None) -> Question:
        self.asked.append((agent_id, task_id, kind, text, tuple(replies), hint, key))
        return Question("q-1", agent_id, task_id, kind, text, tuple(replies), hint, 0)


@dataclass
class FakeNotifications:
    timeout_s: float = 12.0


def orchestration(questions: FakeQuestions | None = None) -> OrchestrationTools:
    return OrchestrationTools(
        directory=None, queue=None, scheduler=None,  # type: ignore[arg-type]
        notifications=FakeNotifications(), questions=questions,  # type: ignore[arg-type]
    )


def test_the_clarification_handler_asks_once_under_the_calls_key() -> None:
    questions = FakeQuestions()
    element = run(orchestration(questions).ask_user_clarification(CTX, {
        "question_text": "Proceed?", "suggested_replies": None,
        "expected_response_format_hint": None,
    }))
    assert questions.asked == [
        ("agent-1", "task-9", QuestionKind.CLARIFICATION, "Proceed?", (), "TEXT", "task-9:3")
    ]
    assert xml(element) == (
        '<clarification_requested question_id="q-1" status="WAITING_FOR_USER" />'
    )


def test_a_notification_may_take_the_channels_own_limit_and_five_seconds_more() -> None:
    limits = {spec.name: spec.timeout_s for spec in orchestration().specs()}
    assert limits["send_notification"] == 17.0
    assert {name for name, limit in limits.items() if limit is not None} == {"send_notification"}


# --- every group, walked ----------------------------------------------------------------------


def every_group() -> list[ToolGroup]:
    return [
        MarketTools(FakeMarket()),  # type: ignore[arg-type]
        IndicatorTools(None, FakeEngine()),  # type: ignore[arg-type]
        AccountTools(FakeBroker()),  # type: ignore[arg-type]
        TradeTools(FakeEntry()),  # type: ignore[arg-type]
        MemoryTools(FakeBank()),  # type: ignore[arg-type]
        orchestration(FakeQuestions()),
    ]


@pytest.mark.parametrize("group", every_group(), ids=lambda g: type(g).__name__)
def test_each_spec_is_its_table_row_run_by_the_method_of_its_name(group: ToolGroup) -> None:
    specs = group.specs()
    assert [s.name for s in specs] == [t.name for t in group.TOOLS]
    for tool, spec in zip(group.TOOLS, specs, strict=True):
        assert spec.handler == getattr(group, tool.name) == group.handler(tool.name)
        assert (spec.description, spec.params, spec.permission, spec.returns,
                spec.extra_rules) == (tool.description, tool.params, tool.permission,
                                      tool.returns, tool.extra_rules)
        assert spec.group == (tool.group or group.GROUP)


def test_the_groups_together_name_each_tool_once() -> None:
    names = [spec.name for group in every_group() for spec in group.specs()]
    assert len(names) == len(set(names)) == 30


def test_a_group_without_a_handler_for_a_tool_is_refused_when_defined() -> None:
    with pytest.raises(TypeError, match="'ping' but has no async method"):

        class Broken(ToolGroup):
            GROUP = "Broken"
            TOOLS = (ToolDef("ping", "Answers pong.", (), Permission.MARKET),)


def test_a_group_naming_a_tool_twice_is_refused_when_defined() -> None:
    with pytest.raises(TypeError, match="declares the tool 'ping' twice"):

        class Twice(ToolGroup):
            GROUP = "Twice"
            TOOLS = (ToolDef("ping", "Answers pong.", (), Permission.MARKET),) * 2

            async def ping(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
                return Element("pong")


def test_asking_a_group_for_a_tool_it_lacks_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="MemoryTools has no tool 'get_order_book'"):
        MemoryTools(FakeBank()).handler("get_order_book")  # type: ignore[arg-type]
