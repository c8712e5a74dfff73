"""A small registry of real ToolSpecs for protocol and executor tests.

The tools cover every ParamType and every way a handler ends (data, ToolError, RiskRejection) over a
tiny in-memory exchange and memory store, so the tests exercise the executor's real paths without
the market or memory packages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from app.domain.errors import AccessDeniedError, NotFoundError, RiskRejection
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.protocol.render import Element, el
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext, ParamSpec, ParamType, Permission, ToolSpec

SYMBOLS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
PRICES = {"BTC/USDT": Decimal("25000.5"), "ETH/USDT": Decimal("1650.25"), "SOL/USDT": Decimal("21")}
MAX_ORDER_NOTIONAL = Decimal("100000")


@dataclass
class FakeWorld:
    """The state the sample tools read and change, inspected by the tests."""

    orders: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)


def _symbol(value: str) -> str:
    if value not in PRICES:
        raise NotFoundError(
            f"Unknown symbol {value!r}. Available: {', '.join(SYMBOLS)}.",
            details={"symbol": value, "available": list(SYMBOLS)},
        )
    return value


def build_sample_specs(world: FakeWorld) -> list[ToolSpec]:
    """Sample tools bound to ``world``; one per permission group the tests need."""

    async def get_order_book(ctx: AgentContext, args: dict[str, Any]) -> Element:
        symbol = _symbol(args["symbol"])
        mid = PRICES[symbol]
        bids = [
            el("level", None, price=mid - i - 1, quantity=Decimal(i + 1))
            for i in range(args["limit"])
        ]
        asks = [
            el("level", None, price=mid + i + 1, quantity=Decimal(i + 1))
            for i in range(args["limit"])
        ]
        return el(
            "order_book_data", None, el("bids", None, *bids), el("asks", None, *asks), symbol=symbol
        )

    async def get_current_ticker_info(ctx: AgentContext, args: dict[str, Any]) -> Element:
        tickers = [
            el("ticker", None, symbol=s, last_price=PRICES[_symbol(s)]) for s in args["symbols"]
        ]
        return el("tickers_data", None, *tickers)

    async def get_historical_klines(ctx: AgentContext, args: dict[str, Any]) -> Element:
        symbol = _symbol(args["symbol"])
        end = args["end_time_ms"] or 1_700_000_000_000
        bars = [
            el("kline", None, timestamp_ms=end - (i + 1) * 3_600_000, close=PRICES[symbol])
            for i in range(args["limit"])
        ]
        return el("klines_data", None, *bars, symbol=symbol, interval=args["interval"])

    async def create_order(ctx: AgentContext, args: dict[str, Any]) -> Element:
        symbol = _symbol(args["symbol"])
        price = args["price"] if args["price"] is not None else PRICES[symbol]
        notional = price * args["quantity"]
        if notional > MAX_ORDER_NOTIONAL:
            raise RiskRejection(
                "max_order_notional",
                f"order notional {notional} USDT > limit {MAX_ORDER_NOTIONAL} USDT",
                {"notional": notional, "limit": MAX_ORDER_NOTIONAL},
            )
        order_id = f"ord-{len(world.orders) + 1}"
        world.orders.append({"id": order_id, **args})
        return el(
            "order_created",
            None,
            order_id=order_id,
            symbol=symbol,
            side=args["side"],
            order_type=args["order_type"],
            quantity=args["quantity"],
            price=price,
            reduce_only=args["reduce_only"],
        )

    async def write_agent_memory_file(ctx: AgentContext, args: dict[str, Any]) -> Element:
        path = args["file_path"]
        if ".." in path or path.startswith("/"):
            raise AccessDeniedError(
                f"{path!r} is outside your memory folder. Use a relative path without '..'.",
                details={"file_path": path},
            )
        world.files[path] = args["content_base64"]
        return el(
            "memory_file_written",
            None,
            file_path_written=path,
            bytes=len(args["content_base64"]),
            status_message="File saved successfully.",
        )

    async def create_new_agent_instance(ctx: AgentContext, args: dict[str, Any]) -> Element:
        agent_id = f"agent-{len(world.agents) + 1}"
        world.agents[agent_id] = dict(args["initial_config_json"])
        status = "RUNNING" if args["start_immediately"] else "INITIALIZED"
        return el(
            "agent_instance_created",
            None,
            agent_id=agent_id,
            agent_name_label=args["agent_name_label"],
            status=status,
        )

    async def write_note(ctx: AgentContext, args: dict[str, Any]) -> Element:
        world.files[f"notes/{args['key']}.md"] = args["content"].encode("utf-8")
        return el("note_written", key=args["key"], status_message="Note saved successfully.")

    async def update_agent_settings(ctx: AgentContext, args: dict[str, Any]) -> Element:
        world.settings.update(args["settings"])
        items = [el("setting", value, name=name) for name, value in sorted(world.settings.items())]
        return el("settings_updated", None, *items, count=len(items))

    symbol = ParamSpec(
        "symbol",
        ParamType.STRING,
        'The trading symbol, e.g. "BTC/USDT"',
        required=True,
        max_length=40,
        example="BTC/USDT",
    )
    return [
        ToolSpec(
            name="get_order_book",
            group="Market Data Tools",
            description="Fetches the current order book (depth of market) for a symbol.",
            params=(
                symbol,
                ParamSpec(
                    "limit",
                    ParamType.INTEGER,
                    "Number of bid and ask levels",
                    default=10,
                    minimum=1,
                    maximum=100,
                ),
            ),
            permission=Permission.MARKET,
            handler=get_order_book,
            returns='<order_book_data symbol="string"><bids /><asks /></order_book_data>',
        ),
        ToolSpec(
            name="get_current_ticker_info",
            group="Market Data Tools",
            description="Fetches the latest price ticker for one or more symbols.",
            params=(
                ParamSpec(
                    "symbols",
                    ParamType.LIST,
                    "Trading symbols",
                    required=True,
                    item_tag="symbol",
                    maximum=5,
                    example="BTC/USDT",
                ),
            ),
            permission=Permission.MARKET,
            handler=get_current_ticker_info,
        ),
        ToolSpec(
            name="get_historical_klines",
            group="Market Data Tools",
            description="Fetches historical candles for a symbol.",
            params=(
                symbol,
                ParamSpec(
                    "interval",
                    ParamType.ENUM,
                    "The candle interval",
                    required=True,
                    choices=("1m", "5m", "15m", "1h", "4h", "1d"),
                ),
                ParamSpec(
                    "limit",
                    ParamType.INTEGER,
                    "Number of candles",
                    default=100,
                    minimum=1,
                    maximum=1000,
                ),
                ParamSpec(
                    "end_time_ms",
                    ParamType.LONG,
                    "Fetch candles before this time (ms)",
                    minimum=0,
                ),
            ),
            permission=Permission.MARKET,
            handler=get_historical_klines,
        ),
        ToolSpec(
            name="create_order",
            group="Trading Tools",
            description="Places an order; the Risk Guard checks it first.",
            params=(
                symbol,
                ParamSpec(
                    "side", ParamType.ENUM, "Buy or sell", required=True, choices=("BUY", "SELL")
                ),
                ParamSpec(
                    "order_type",
                    ParamType.ENUM,
                    "Order type",
                    default="MARKET",
                    choices=("MARKET", "LIMIT"),
                ),
                ParamSpec(
                    "quantity",
                    ParamType.DECIMAL,
                    "Quantity in base units",
                    required=True,
                    minimum=Decimal("0.00000001"),
                    maximum=Decimal("1000000"),
                ),
                ParamSpec("price", ParamType.DECIMAL, "Limit price", minimum=Decimal("0")),
                ParamSpec(
                    "reduce_only", ParamType.BOOLEAN, "Only reduce a position", default=False
                ),
            ),
            permission=Permission.TRADE,
            handler=create_order,
            extra_rules=("Every order passes the Risk Guard; a refusal is status rejected.",),
        ),
        ToolSpec(
            name="write_agent_memory_file",
            group="Agent Memory Tools",
            description="Writes (or overwrites) a file in your memory folder.",
            params=(
                ParamSpec(
                    "file_path",
                    ParamType.STRING,
                    "Relative path in your memory folder",
                    required=True,
                    max_length=200,
                    example="notes/btc.md",
                ),
                ParamSpec("content_base64", ParamType.BASE64, "Base64 content", required=True),
                ParamSpec(
                    "file_type_hint",
                    ParamType.ENUM,
                    "Storage hint",
                    choices=("YAML", "MARKDOWN", "TEXT"),
                ),
            ),
            permission=Permission.MEMORY,
            handler=write_agent_memory_file,
        ),
        ToolSpec(
            name="write_note",
            group="Agent Memory Tools",
            description="Creates or overwrites the topic note notes/{key}.md.",
            params=(
                ParamSpec("key", ParamType.STRING, "The note's name", required=True,
                          max_length=120),
                ParamSpec("content", ParamType.STRING, "The whole note, in plain text",
                          required=True, free_text=True),
            ),
            permission=Permission.MEMORY,
            handler=write_note,
        ),
        ToolSpec(
            name="create_new_agent_instance",
            group="Orchestration Tools",
            description="Creates a new agent instance from a template.",
            params=(
                ParamSpec(
                    "agent_name_label",
                    ParamType.STRING,
                    "Human-readable name",
                    required=True,
                    example="My BTC Analyst",
                ),
                ParamSpec(
                    "initial_config_json",
                    ParamType.JSON_OBJECT,
                    "Initial configuration",
                    required=True,
                ),
                ParamSpec(
                    "start_immediately", ParamType.BOOLEAN, "Start after creation", default=True
                ),
            ),
            permission=Permission.AGENTS,
            handler=create_new_agent_instance,
        ),
        ToolSpec(
            name="update_agent_settings",
            group="Orchestration Tools",
            description="Changes named settings of the calling agent.",
            params=(
                ParamSpec(
                    "settings",
                    ParamType.MAP,
                    "Settings to change",
                    required=True,
                    item_tag="setting",
                    example="risk_level",
                ),
            ),
            permission=Permission.AGENTS,
            handler=update_agent_settings,
        ),
    ]


def make_executor(
    extra: Sequence[ToolSpec] = (), world: FakeWorld | None = None
) -> tuple[ToolExecutor, MemoryRecorder, FakeWorld]:
    """An executor over the sample tools (plus ``extra``), with an in-memory recorder."""
    world = world or FakeWorld()
    recorder = MemoryRecorder()
    registry = ToolRegistry([*build_sample_specs(world), *extra])
    return ToolExecutor(registry, recorder), recorder, world


def run(coro: Any) -> Any:
    """Run one coroutine to completion; the tests stay synchronous and need no plugin."""
    return asyncio.run(coro)


OPERATOR = AgentContext(agent_id="op-1", role="orchestrator")
