"""Trading tools (Part B §3.3, 3.4, 3.7, 3.8): the XML of create, cancel, TP/SL and close.

Each tool maps its call onto ``OrderEntry`` (``app.trading.entry``), the one order path every
front shares: idempotency, approval, the kill switch, the broker's pre-check, the Risk Guard, the
send, linked exits and their put-back all live there. Here is only the protocol: the parameters
an agent writes, who is calling (``Caller``: the agent, its task and call, whether a person
approved this call or can be asked), and the elements it reads back.

The person at the desk calls these tools too (``app.runtime.controls``, actor ``PERSON_ID``), so
the audit trail records the person's orders as it records an agent's.
"""

from __future__ import annotations

from typing import Any

from app.domain.market_rules import fmt
from app.domain.trading import Order, OrderType, Side
from app.tools.account_tools import SYMBOL_REQUIRED, amount, money, price
from app.tools.group import ToolDef, ToolGroup
from app.tools.protocol.render import Element, el
from app.tools.spec import AgentContext, ParamSpec, ParamType, Permission
from app.trading.entry import Caller, OrderAsk, OrderEntry
from app.trading.port import STOP_LIMIT_NOTE


def caller(ctx: AgentContext) -> Caller:
    """The tool call's caller as order entry knows it."""
    return Caller(ctx.agent_id, task_id=ctx.task_id, call_key=ctx.call_key,
                  approved=ctx.approved, can_ask=ctx.can_ask)


def _decimal(name: str, description: str) -> ParamSpec:
    return ParamSpec(name, ParamType.DECIMAL, description)


class TradeTools(ToolGroup):
    """The order tools of one account, each a mapping of its XML onto one ``OrderEntry``."""

    GROUP = "Trading Tools"
    TOOLS = (
        ToolDef(
            name="create_order",
            description=(
                "Places a spot order after the Risk Guard accepts it. MARKET fills at the next "
                "bar's open; LIMIT/STOP/STOP_LIMIT wait for their price. Give quantity (base "
                "amount) or quote_amount (quote currency to spend, fee included). Sells can only "
                "reduce what you hold (long-only)."
            ),
            params=(
                SYMBOL_REQUIRED,
                ParamSpec("side", ParamType.ENUM, "BUY or SELL", required=True,
                          choices=("BUY", "SELL")),
                ParamSpec("order_type", ParamType.ENUM, "The order type", default="MARKET",
                          choices=("MARKET", "LIMIT", "STOP", "STOP_LIMIT")),
                _decimal("quantity", "Base-currency amount; or give quote_amount instead"),
                _decimal("quote_amount", "Spend this much quote currency (fee included)"),
                _decimal("price", "Limit price; required for LIMIT and STOP_LIMIT"),
                _decimal("stop_price", "Trigger price; required for STOP and STOP_LIMIT"),
                ParamSpec("client_order_id", ParamType.STRING,
                          "Your id for the order; repeating it returns the same order",
                          default="", max_length=64),
                ParamSpec("reason", ParamType.STRING, "One-line rationale kept with the order",
                          default="", max_length=500, free_text=True),
            ),
            permission=Permission.TRADE,
            returns=(
                '<order_created order_id="P00000001" client_order_id="c1" status="SUBMITTED" '
                'filled_quantity="0" fee="0" fee_currency="USDT" />'
            ),
        ),
        ToolDef(
            name="cancel_order",
            description="Cancels one of your own open orders.",
            params=(
                SYMBOL_REQUIRED,
                ParamSpec("order_id", ParamType.STRING, "The order's id", default="",
                          max_length=64),
                ParamSpec("client_order_id", ParamType.STRING, "Or your client order id",
                          default="", max_length=64),
            ),
            permission=Permission.TRADE,
            returns='<order_cancelled order_id="P00000001" status="CANCELLED" />',
        ),
        ToolDef(
            name="set_position_tp_sl_orders",
            description=(
                "Places (or replaces) reduce-only take-profit and/or stop-loss exits for your "
                "whole lot of the position; when one fills the other is cancelled. Where the "
                "market cannot hold both, the stop loss alone is placed and note says so."
            ),
            params=(
                SYMBOL_REQUIRED,
                _decimal("take_profit_price", "Sell everything when the price reaches this"),
                _decimal("stop_loss_price", "Sell everything when the price falls to this"),
            ),
            permission=Permission.TRADE,
            returns=(
                '<tp_sl_set symbol="BTC/USDT" take_profit_order_id="P00000003" '
                'stop_loss_order_id="P00000004" />'
            ),
        ),
        ToolDef(
            name="modify_order",
            group="Desk",
            description=(
                "Moves an open order to a new limit or stop price (the person dragging its line "
                "on the chart): replaced in one request where the exchange can, through the same "
                "checks as a new order; a take profit or stop loss moves with its lot's other "
                "exit kept."
            ),
            params=(
                SYMBOL_REQUIRED,
                ParamSpec("order_id", ParamType.STRING, "The order to move", required=True,
                          max_length=64),
                _decimal("price", "The new limit price (a limit order, a take profit)"),
                _decimal("stop_price", "The new trigger price (a stop, a stop loss)"),
            ),
            permission=Permission.DESK,
            returns=('<order_moved order_id="P00000007" client_order_id="mv-1" '
                     'symbol="BTC/USDT" status="SUBMITTED" quantity="0.5" filled_quantity="0" '
                     'fee="0" fee_currency="USDT" />'),
        ),
        ToolDef(
            name="close_position",
            description=("Market-sells your whole lot of a symbol's position at the next bar's "
                         "open (what you bought; the person's part is theirs)."),
            params=(
                SYMBOL_REQUIRED,
                ParamSpec("reason", ParamType.STRING, "One-line rationale", default="",
                          max_length=500, free_text=True),
            ),
            permission=Permission.TRADE,
            returns=(
                '<order_created order_id="P00000005" client_order_id="auto-P00000005" '
                'symbol="BTC/USDT" status="SUBMITTED" quantity="0.5" filled_quantity="0" '
                'fee="0" fee_currency="USDT" />'
            ),
        ),
    )

    def __init__(self, entry: OrderEntry) -> None:
        self._entry = entry
        self._broker = entry.broker

    def _created(self, order: Order, tag: str = "order_created") -> Element:
        """An order as placed, rounded to its market; a STOP the exchange took only as a
        stop-limit says so, with its limit."""
        rules = self._broker.market_rules(order.symbol)
        sent_as = order.order_type is OrderType.STOP_LIMIT and STOP_LIMIT_NOTE in order.reason
        return el(
            tag, None, order_id=order.order_id, client_order_id=order.client_order_id,
            symbol=order.symbol, status=order.status.value,
            quantity=amount(order.quantity, rules),
            filled_quantity=amount(order.filled_quantity, rules),
            average_price=price(order.average_price, rules), fee=money(order.fee),
            fee_currency=order.fee_currency,
            order_type=order.order_type.value if sent_as else None,
            limit_price=price(order.price, rules) if sent_as else None,
            note=order.reason if sent_as else None,
        )

    async def create_order(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """One order through order entry (approval, the Risk Guard, the send)."""
        ask = OrderAsk(
            symbol=args["symbol"], side=Side(args["side"]),
            order_type=OrderType(args["order_type"]), quantity=args["quantity"],
            quote_amount=args["quote_amount"], price=args["price"],
            stop_price=args["stop_price"], client_order_id=args["client_order_id"],
            reason=args["reason"],
        )
        return self._created(await self._entry.place(caller(ctx), ask))

    async def cancel_order(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """One of the caller's open orders, by its id or the caller's own."""
        order = await self._entry.cancel(caller(ctx), args["symbol"], args["order_id"] or None,
                                         args["client_order_id"] or None)
        return el("order_cancelled", None, order_id=order.order_id, status=order.status.value)

    async def set_position_tp_sl_orders(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """The caller's lot's exits, saying which stop the exchange holds as a stop-limit and
        which Kestrel holds itself (it protects only while Kestrel runs)."""
        done = await self._entry.set_exits(caller(ctx), args["symbol"], args["take_profit_price"],
                                           args["stop_loss_price"])
        tp, sl, held = done.take_profit, done.stop_loss, done.held_stop
        # a stop the exchange takes only as a stop-limit (no stop-market there) says so
        stop_limit = sl if sl is not None and sl.order_type is OrderType.STOP_LIMIT else None
        held_note = None if held is None else (
            f"The stop loss at {fmt(held.stop_price)} is held by Kestrel (this market holds no "
            "stop order): it sells the position when the price reaches it, only while Kestrel "
            "runs.")
        return el(
            "tp_sl_set", None, symbol=done.symbol,
            take_profit_order_id=tp.order_id if tp else None,
            stop_loss_order_id=sl.order_id if sl else None,
            linked="OCO" if done.linked else None,
            stop_loss_order_type=stop_limit.order_type.value if stop_limit else None,
            stop_loss_limit_price=fmt(stop_limit.price) if stop_limit and stop_limit.price
            else None,
            stop_loss_note=stop_limit.reason if stop_limit else None,
            stop_loss_held_by="kestrel" if held is not None else None,
            note=" ".join(n for n in (done.left_out, held_note) if n) or None,
        )

    async def close_position(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """A market sell of the caller's whole lot (never the person's part)."""
        return self._created(await self._entry.close(caller(ctx), args["symbol"], args["reason"]))

    async def modify_order(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """An open order moved to a new price, as the person's drag on the chart asks."""
        moved = await self._entry.modify(caller(ctx), args["symbol"], args["order_id"],
                                         price=args["price"], stop_price=args["stop_price"])
        return self._created(moved, "order_moved")
