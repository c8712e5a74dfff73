"""Account tools (Part B §3.1, 3.2, 3.5, 3.6, 3.9): balances, positions, orders and trade history.

They only read the broker. Numbers are Decimal strings rounded to the market's precision (prices to
the tick, amounts to the step) and quote values to 8 decimals, so an agent never sees float noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from app.domain.market_rules import MarketRules
from app.domain.trading import Fill, Order
from app.store.held_stops import HeldStop
from app.tools.group import ToolDef, ToolGroup
from app.tools.protocol.render import Element, el
from app.tools.spec import AgentContext, ParamSpec, ParamType, Permission
from app.trading.port import TradingBroker

QUOTE_STEP = Decimal("0.00000001")
PCT_STEP = Decimal("0.01")
TRADES_MAX = 500

SYMBOL_OPTIONAL = ParamSpec(
    "symbol", ParamType.STRING, 'Only this symbol, e.g. "BTC/USDT". Default: all symbols',
    max_length=40,
)
SYMBOL_REQUIRED = ParamSpec(
    "symbol", ParamType.STRING, 'The trading symbol, e.g. "BTC/USDT"', required=True,
    max_length=40,
)


def money(value: Decimal) -> Decimal:
    return value.quantize(QUOTE_STEP, rounding=ROUND_HALF_EVEN)


def pct(value: Decimal) -> Decimal:
    return value.quantize(PCT_STEP, rounding=ROUND_HALF_EVEN)


def price(value: Decimal | None, rules: MarketRules) -> Decimal | None:
    if value is None:
        return None
    return value.quantize(rules.tick, rounding=ROUND_HALF_EVEN)


def amount(value: Decimal, rules: MarketRules) -> Decimal:
    return value.quantize(rules.step, rounding=ROUND_HALF_EVEN)


def order_element(order: Order, rules: MarketRules) -> Element:
    """One ``<order …/>`` with every field an agent may need to reason about it."""
    return el(
        "order",
        None,
        order_id=order.order_id,
        client_order_id=order.client_order_id,
        agent_id=order.agent_id,
        symbol=order.symbol,
        side=order.side.value,
        order_type=order.order_type.value,
        status=order.status.value,
        quantity=amount(order.quantity, rules),
        filled_quantity=amount(order.filled_quantity, rules),
        remaining_quantity=amount(order.remaining, rules) if order.status.is_open else None,
        price=price(order.price, rules),
        stop_price=price(order.stop_price, rules),
        average_price=price(order.average_price, rules),
        fee=money(order.fee),
        fee_currency=order.fee_currency,
        reduce_only=order.reduce_only,
        exit_kind=order.exit_kind.value,
        triggered=order.triggered if order.stop_price is not None else None,
        created_ms=order.created_ms,
        updated_ms=order.updated_ms,
        reason=order.reason or None,
    )


def held_element(stop: HeldStop, rules: MarketRules) -> Element:
    """A stop loss Kestrel holds itself (its market holds no stop order), said to be one."""
    return el(
        "held_stop", None, agent_id=stop.owner, symbol=stop.symbol,
        quantity=amount(stop.quantity, rules), stop_price=price(stop.stop_price, rules),
        held_by="kestrel",
        note="Sells at market when the price reaches stop_price; protects only while Kestrel "
             "runs.",
    )


def trade_element(fill: Fill, rules: MarketRules) -> Element:
    return el(
        "trade",
        None,
        time_ms=fill.time_ms,
        symbol=fill.symbol,
        side=fill.side.value,
        quantity=amount(fill.quantity, rules),
        price=price(fill.price, rules),
        fee=money(fill.fee),
        realized_pnl=money(fill.realized_pnl),
        order_id=fill.order_id,
    )


def _asset_rules(broker: TradingBroker, asset: str, symbols: dict[str, str]) -> MarketRules | None:
    symbol = symbols.get(asset)
    return None if symbol is None else broker.market_rules(symbol)


def _no_held_stops(symbol: str | None) -> Sequence[HeldStop]:
    """For an account whose order entry holds no stops itself."""
    return ()


class AccountTools(ToolGroup):
    """The read-only account tools, bound to one broker (and the stops Kestrel holds for it)."""

    GROUP = "Account Tools"
    TOOLS = (
        ToolDef(
            name="get_account_balance",
            description=(
                "The account status: cash and equity in the quote currency, each asset's free, "
                "used (reserved by open orders) and total amounts, today's and total P&L, the "
                "maximum drawdown so far, and the mode (PAPER, LIVE or BACKTEST)."
            ),
            params=(),
            permission=Permission.ACCOUNT,
            returns=(
                '<account_balance quote_currency="USDT" cash="412.5" equity="472.7" '
                'today_pnl="2.2" total_pnl="-27.3" max_drawdown_pct="8.0" mode="PAPER">\n'
                '    <asset currency="BTC" free="0.5" used="0.1" total="0.6" />\n'
                "</account_balance>"
            ),
        ),
        ToolDef(
            name="get_open_positions",
            description=(
                "Open spot positions with size, average cost per unit (avg_price: the buys' fees "
                "included, so unrealized P&L is what selling at the current price would make "
                "before that sale's fee), current price, unrealized P&L and weight in equity (%)."
            ),
            params=(SYMBOL_OPTIONAL,),
            permission=Permission.ACCOUNT,
            returns=(
                '<positions>\n    <position symbol="BTC/USDT" size="0.6" avg_price="100.2" '
                'current_price="100.5" unrealized_pnl="0.18" weight_pct="12.76" />\n</positions>'
            ),
        ),
        ToolDef(
            name="get_order_status",
            description="Every field of one order of this account, open or closed.",
            params=(
                SYMBOL_REQUIRED,
                ParamSpec("order_id", ParamType.STRING, "The order_id create_order returned",
                          required=True, max_length=64),
            ),
            permission=Permission.ACCOUNT,
            returns=(
                '<order order_id="P00000001" client_order_id="c1" symbol="BTC/USDT" side="BUY" '
                'order_type="LIMIT" status="SUBMITTED" quantity="0.1" filled_quantity="0" '
                'price="99.5" fee="0" fee_currency="USDT" />'
            ),
        ),
        ToolDef(
            name="get_open_orders",
            description="The account's open (unfilled) orders, of every agent, newest last.",
            params=(SYMBOL_OPTIONAL,),
            permission=Permission.ACCOUNT,
            returns=(
                '<orders>\n    <order order_id="P00000002" status="SUBMITTED" ... />\n</orders>'
            ),
        ),
        ToolDef(
            name="get_trade_history",
            description="The account's executed trades (fills), newest first.",
            params=(
                SYMBOL_OPTIONAL,
                ParamSpec("limit", ParamType.INTEGER, "How many trades",
                          default=20, minimum=1, maximum=TRADES_MAX),
            ),
            permission=Permission.ACCOUNT,
            returns=(
                '<trades>\n    <trade time_ms="long" symbol="BTC/USDT" side="BUY" '
                'quantity="0.1" price="100.2" fee="0.01002" realized_pnl="0" '
                'order_id="P00000001" />\n</trades>'
            ),
        ),
    )

    def __init__(
        self,
        broker: TradingBroker,
        held_stops: Callable[[str | None], Sequence[HeldStop]] = _no_held_stops,
    ) -> None:
        self._broker = broker
        self._held_stops = held_stops

    def _symbol(self, args: dict[str, Any]) -> str | None:
        """The optional symbol filter as the broker names it, or None for every symbol."""
        return self._broker.canonical_symbol(args["symbol"]) if args["symbol"] else None

    async def get_account_balance(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """Cash, equity, P&L and each asset, an asset held as a position rounded to its
        market's step, any other to the quote precision."""
        broker = self._broker
        state = await broker.account()
        bases = {p.symbol.split("/")[0]: p.symbol for p in state.positions}
        assets = []
        for asset in state.assets:
            rules = _asset_rules(broker, asset.currency, bases)
            free, used, total = (
                (money(v) if rules is None else amount(v, rules))
                for v in (asset.free, asset.used, asset.total)
            )
            assets.append(el("asset", None, currency=asset.currency, free=free, used=used,
                             total=total))
        return el(
            "account_balance",
            None,
            *assets,
            quote_currency=state.quote_currency,
            cash=money(state.cash),
            equity=money(state.equity),
            today_pnl=money(state.today_pnl),
            total_pnl=money(state.total_pnl),
            max_drawdown_pct=pct(state.max_drawdown_pct),
            mode=state.mode.value,
        )

    async def get_open_positions(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """Every open position (or one symbol's), at its market's precision."""
        broker = self._broker
        items = []
        for pos in await broker.positions(self._symbol(args)):
            rules = broker.market_rules(pos.symbol)
            items.append(el(
                "position", None, symbol=pos.symbol, size=amount(pos.size, rules),
                avg_price=price(pos.avg_price, rules),
                current_price=price(pos.current_price, rules),
                unrealized_pnl=money(pos.unrealized_pnl), weight_pct=pct(pos.weight_pct),
            ))
        return el("positions", None, *items)

    async def get_order_status(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """One order of the caller's, open or closed."""
        broker = self._broker
        symbol = broker.canonical_symbol(args["symbol"])
        order = await broker.get_order(ctx.agent_id, symbol, args["order_id"])
        return order_element(order, broker.market_rules(order.symbol))

    async def get_open_orders(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """The open orders of every agent, then the stop losses Kestrel holds itself (where
        the market holds no stop order), so an agent sees every exit of a lot."""
        broker = self._broker
        symbol = self._symbol(args)
        orders = await broker.open_orders(None, symbol)
        return el(
            "orders", None,
            *(order_element(o, broker.market_rules(o.symbol)) for o in orders),
            *(held_element(h, broker.market_rules(h.symbol)) for h in self._held_stops(symbol)),
        )

    async def get_trade_history(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """The newest ``limit`` fills, of every symbol or one."""
        broker = self._broker
        fills = await broker.trades(self._symbol(args), args["limit"])
        return el(
            "trades", None,
            *(trade_element(f, broker.market_rules(f.symbol)) for f in fills),
        )
