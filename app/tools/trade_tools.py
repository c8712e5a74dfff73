"""Trading tools (Part B §3.3, 3.4, 3.7, 3.8): create and cancel orders, TP/SL exits, close.

Every tool that creates an order builds an ``OrderIntent`` and passes the Risk Guard before the
broker sees anything; the broker is only reached through ``_place``, which calls the guard first.
A repeated ``client_order_id`` returns the order already placed without a second guard decision,
because nothing new would reach the broker.

The person at the desk calls these tools too (``app.runtime.controls``, actor ``PERSON_ID``), with
two differences a person needs and an agent must not have: the person may cancel any agent's
order, and the person's close frees what every agent's plain sells hold back.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from decimal import Decimal
from typing import Any, Protocol

from app.domain.agents import PERSON_ID
from app.domain.errors import (
    InvalidOrderError,
    InvalidParameterError,
    KestrelError,
    MissingParameterError,
    RiskRejection,
    ToolError,
)
from app.domain.market_rules import fmt
from app.domain.trading import ExitKind, Order, OrderStatus, OrderType, Side
from app.risk.types import OrderIntent, RiskView
from app.tools.account_tools import SYMBOL_REQUIRED, amount, money, price
from app.tools.protocol.render import Element, el
from app.tools.spec import AgentContext, ParamSpec, ParamType, Permission, ToolSpec
from app.trading.exits import (
    is_unknown_outcome,
    move_refused,
    putting_back,
    subject_of,
    unprotected_alert,
)
from app.trading.port import STOP_LIMIT_NOTE, CheckedOrder, OrderRequest, TradingBroker

GROUP = "Trading Tools"
logger = logging.getLogger(__name__)


Alert = Callable[[str, str], Awaitable[None]]


class Guard(Protocol):
    def admit(self, intent: OrderIntent, view: RiskView) -> AbstractContextManager[None]:
        """Raise ``RiskRejection`` when the order may not go ahead; otherwise a context in which
        it is placed, during which the guard counts it as pending."""
        ...


def order_intent(req: OrderRequest, checked: CheckedOrder, held: Decimal) -> OrderIntent:
    """What the Risk Guard judges for ``req`` once the broker's precheck has resolved it;
    ``held``: the account's position in the symbol (a sell within it only reduces)."""
    reduces = req.reduce_only or (req.side is Side.SELL and checked.quantity <= held)
    return OrderIntent(
        agent_id=req.agent_id, symbol=checked.symbol, side=req.side, order_type=req.order_type,
        quantity=checked.quantity, reference_price=checked.reference_price, price=req.price,
        stop_price=req.stop_price, reduces_position=reduces, exit_kind=req.exit_kind,
        reserve=checked.reserve,
    )


def exit_key(ctx: AgentContext) -> str:
    """The stem of the client ids of the exits a call places: from the tool call, so a repeated
    call finds what it placed; a call without a key gets a fresh one."""
    return f"k-{ctx.call_key}" if ctx.call_key else f"auto-{uuid.uuid4().hex[:16]}"


def _decimal(name: str, description: str) -> ParamSpec:
    return ParamSpec(name, ParamType.DECIMAL, description)


def build_trade_tools(
    broker: TradingBroker, guard: Guard, *, alert: Alert | None = None
) -> list[ToolSpec]:
    """The order-placing tools bound to one broker and the Risk Guard in front of it.

    ``alert(message, subject)`` tells the person, on every channel, when a position is left
    without an exit it had (``exit_moves``)."""

    async def _place(req: OrderRequest) -> Order:
        """The only path to ``broker.create_order``: validate, ask the guard, then place."""
        checked = await broker.precheck(req)
        intent = order_intent(req, checked, broker.position_size(checked.symbol))
        with guard.admit(intent, broker.risk_view()):
            return await broker.create_order(req)

    def _created(order: Order, tag: str = "order_created") -> Element:
        rules = broker.market_rules(order.symbol)
        # a STOP the exchange took only as a stop-limit says so, with its limit
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

    async def create_order(ctx: AgentContext, args: dict[str, Any]) -> Element:
        # without an id of the model's own, the call's key stands in: a task redelivered after a
        # crash repeats the call with the same key and gets the order already placed
        client_id = args["client_order_id"] or (f"k-{ctx.call_key}" if ctx.call_key else "")
        if client_id:
            existing = broker.find_order(ctx.agent_id, client_id)
            if existing is not None:
                return _created(existing)
        quantity, quote_amount = args["quantity"], args["quote_amount"]
        if (quantity is None) == (quote_amount is None):
            raise (MissingParameterError if quantity is None else InvalidParameterError)(
                "Give exactly one of <quantity> (base amount) or <quote_amount> (quote currency "
                "to spend), not " + ("neither." if quantity is None else "both."),
                details={"parameter": "quantity"},
            )
        req = OrderRequest(
            agent_id=ctx.agent_id, symbol=args["symbol"], side=Side(args["side"]),
            order_type=OrderType(args["order_type"]), quantity=quantity or Decimal(0),
            price=args["price"], stop_price=args["stop_price"], client_order_id=client_id,
            reason=args["reason"], quote_amount=quote_amount,
        )
        return _created(await _place(req))

    async def cancel_order(ctx: AgentContext, args: dict[str, Any]) -> Element:
        if not args["order_id"] and not args["client_order_id"]:
            raise MissingParameterError(
                "<cancel_order> needs <order_id> (or <client_order_id>) to say which order.",
                details={"parameter": "order_id"},
            )
        symbol = broker.canonical_symbol(args["symbol"])
        order_id, client_id = args["order_id"] or None, args["client_order_id"] or None
        owner = ctx.agent_id
        if owner == PERSON_ID:  # the person may cancel any agent's order, as its owner would
            owner = await _owner(symbol, order_id, client_id) or owner
        order = await broker.cancel_order(owner, symbol, order_id, client_id)
        return el("order_cancelled", None, order_id=order.order_id, status=order.status.value)

    async def _owner(symbol: str, order_id: str | None, client_id: str | None) -> str | None:
        """Whose order this is; None when the broker does not know it (it then says so)."""
        for order in await broker.open_orders(None, symbol):
            if (order_id and order.order_id == order_id) or (
                    client_id and order.client_order_id == client_id):
                return order.agent_id
        if not order_id:
            return None
        try:  # no longer open: its owner hears why it cannot be cancelled (filled, cancelled)
            return (await broker.get_order(PERSON_ID, symbol, order_id)).agent_id
        except KestrelError:
            return None

    async def _held(symbol: str) -> Decimal:
        """The position's size as far as it can be sold: read fresh through the port (a live
        account's balances change with each fill, and its cache may not have seen the one that
        opened it), down to the market's amount step (an exchange that takes the fee in the coin
        leaves a remainder off the step, which no order can sell)."""
        held = sum((p.size for p in await broker.positions(symbol)), Decimal(0))
        size = broker.market_rules(symbol).floor_amount(held)
        if size <= 0:
            raise InvalidOrderError(
                f"There is no open {symbol} position to protect or close.",
                details={"symbol": symbol, "size": "0"},
            )
        return size

    async def set_position_tp_sl_orders(ctx: AgentContext, args: dict[str, Any]) -> Element:
        symbol = broker.canonical_symbol(args["symbol"])
        take_profit, stop_loss = args["take_profit_price"], args["stop_loss_price"]
        if take_profit is None and stop_loss is None:
            raise MissingParameterError(
                "Give <take_profit_price>, <stop_loss_price> or both.",
                details={"parameter": "take_profit_price"},
            )
        size = await _held(symbol)
        last = await broker.last_price(symbol)
        if take_profit is not None and take_profit <= last:
            raise InvalidOrderError(
                f"take_profit_price {take_profit} must be above the last price {last} for a long "
                "position; at or below it, it would sell at once.",
                details={"field": "take_profit_price", "last_price": str(last)},
            )
        if stop_loss is not None and stop_loss >= last:
            raise InvalidOrderError(
                f"stop_loss_price {stop_loss} must be below the last price {last} for a long "
                "position; at or above it, it would sell at once.",
                details={"field": "stop_loss_price", "last_price": str(last)},
            )
        both = take_profit is not None and stop_loss is not None
        linked = both and not getattr(broker, "exits_share_coins", True)
        if linked and not _oco_exits(symbol):
            # each exit is a sell the exchange holds the coins for: the second finds none free
            raise InvalidOrderError(
                f"This exchange account cannot hold a take profit and a stop loss for the same "
                f"{symbol} position at once: the exchange locks the coins for the first sell "
                "order, so the second would be refused, and this market takes no linked pair "
                "(OCO order list). Nothing was changed. Set the stop loss alone (it protects the "
                "position), or the take profit alone.",
                details={"field": "take_profit_price", "symbol": symbol,
                         "needs": "one exit at a time on this account"},
            )
        key = exit_key(ctx)
        requests = []
        if take_profit is not None:
            requests.append(OrderRequest(
                ctx.agent_id, symbol, Side.SELL, OrderType.LIMIT, size, price=take_profit,
                reduce_only=True, exit_kind=ExitKind.TAKE_PROFIT, reason="take profit",
                client_order_id=f"{key}:tp" if linked else "",
            ))
        if stop_loss is not None:
            requests.append(OrderRequest(
                ctx.agent_id, symbol, Side.SELL, OrderType.STOP, size, stop_price=stop_loss,
                reduce_only=True, exit_kind=ExitKind.STOP_LOSS, reason="stop loss",
                client_order_id=f"{key}:sl" if linked else "",
            ))
        if linked:
            # valid before the old exits go (their coins are free only once they are gone)
            broker.check_oco(requests[0], requests[1])  # type: ignore[attr-defined]
        replaced = [
            old for old in await broker.open_orders(ctx.agent_id, symbol)
            if old.exit_kind in (ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS) and not (
                linked and old.client_order_id in (r.client_order_id for r in requests))
        ]
        if not linked:
            # everything valid before the old exits go; the coins they hold are the new ones'
            released = sum((old.remaining for old in replaced), Decimal(0))
            for req in requests:
                await broker.precheck(req, released=released)
        cancelled = [old for old in replaced if await _cancel_exit(ctx.agent_id, symbol, old)]
        if linked:
            tp, sl = await _place_linked(requests, cancelled, size, key)
        else:
            placed = await _place_exits(requests, cancelled, size, key)
            tp, sl = placed.get(ExitKind.TAKE_PROFIT), placed.get(ExitKind.STOP_LOSS)
        # a stop the exchange takes only as a stop-limit (no stop-market there) says so
        stop_limit = sl if sl is not None and sl.order_type is OrderType.STOP_LIMIT else None
        return el(
            "tp_sl_set", None, symbol=symbol,
            take_profit_order_id=tp.order_id if tp else None,
            stop_loss_order_id=sl.order_id if sl else None,
            linked="OCO" if linked else None,
            stop_loss_order_type=stop_limit.order_type.value if stop_limit else None,
            stop_loss_limit_price=fmt(stop_limit.price) if stop_limit and stop_limit.price
            else None,
            stop_loss_note=stop_limit.reason if stop_limit else None,
        )

    async def _place_exits(
        requests: list[OrderRequest], cancelled: list[Order], held: Decimal, key: str
    ) -> dict[ExitKind, Order]:
        """Place the new exits; if one is refused, every cancelled exit that nothing new
        replaces is placed again (``exit_moves``), and the refusal says what became of each."""
        placed: dict[ExitKind, Order] = {}
        for req in requests:
            try:
                placed[req.exit_kind] = await _place(req)
            except (ToolError, RiskRejection) as exc:
                unreplaced = [old for old in cancelled if old.exit_kind not in placed]
                raise await _after_refusal(exc, unreplaced, held, key) from exc
        return placed

    async def _place_linked(
        requests: list[OrderRequest], cancelled: list[Order], held: Decimal, key: str
    ) -> tuple[Order, Order]:
        try:
            return await _place_oco(requests[0], requests[1])
        except (ToolError, RiskRejection) as exc:
            raise await _after_refusal(exc, cancelled, held, key) from exc

    async def _after_refusal(
        exc: ToolError | RiskRejection, cancelled: list[Order], held: Decimal, key: str
    ) -> KestrelError:
        """The new exits' refusal, once the exits cancelled for them are back where they can
        be: never while the new exit's outcome is unknown (it may rest on the exchange)."""
        if is_unknown_outcome(exc):
            return move_refused(exc, cancelled, [], [])
        restored: list[Order] = []
        lost: list[tuple[Order, KestrelError]] = []
        by_kind = {old.exit_kind: old for old in cancelled}
        if len(cancelled) == 2 and set(by_kind) == {ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS} \
                and _oco_exits(cancelled[0].symbol):
            # a list protected the position: it goes back as a list (the exchange would
            # refuse a second sell of coins the first one holds)
            pair = [replace(putting_back(by_kind[kind], held), client_order_id=f"{key}:{leg}")
                    for kind, leg in ((ExitKind.TAKE_PROFIT, "tp-back"),
                                      (ExitKind.STOP_LOSS, "sl-back"))]
            try:
                restored.extend(await _place_oco(pair[0], pair[1]))
            except (ToolError, RiskRejection) as again:
                lost.extend((by_kind[kind], again) for kind in (ExitKind.TAKE_PROFIT,
                                                                  ExitKind.STOP_LOSS))
        else:
            for old in cancelled:
                try:
                    restored.append(await _place(putting_back(old, held)))
                except (ToolError, RiskRejection) as again:
                    lost.append((old, again))
        unprotected = [(old, why) for old, why in lost if not is_unknown_outcome(why)]
        if unprotected:
            told = unprotected_alert(unprotected, exc)
            logger.warning("%s", told)
            if alert is not None:
                await alert(told, subject_of(unprotected))
        return move_refused(exc, [], restored, lost)

    def _oco_exits(symbol: str) -> bool:
        """Whether the broker places a take profit and a stop loss as one OCO list here."""
        check = getattr(broker, "oco_exits", None)
        return check is not None and bool(check(symbol))

    async def _cancel_exit(agent_id: str, symbol: str, old: Order) -> bool:
        """Cancel one order listed open a moment ago; the other leg of an OCO list goes with
        it on the exchange, so one no longer open by the time it is reached is already gone.
        Whether it ends cancelled (by this call or with its list), not filled."""
        try:
            await broker.cancel_order(agent_id, symbol, old.order_id)
        except InvalidOrderError:
            now = await broker.get_order(agent_id, symbol, old.order_id)
            if now.status.is_open:
                raise
            return now.status is OrderStatus.CANCELLED
        return True

    async def _place_oco(take_profit: OrderRequest, stop_loss: OrderRequest) -> tuple[Order, Order]:
        """Both exits as one list, each judged by the Risk Guard like a single order (exits
        reduce the position, so the guard lets them through), then placed at once."""
        checked = [await broker.precheck(r) for r in (take_profit, stop_loss)]
        view = broker.risk_view()
        held = broker.position_size(checked[0].symbol)
        intents = [order_intent(r, c, held) for r, c in zip(
            (take_profit, stop_loss), checked, strict=True)]
        with guard.admit(intents[0], view), guard.admit(intents[1], view):
            result: tuple[Order, Order] = await broker.create_oco(  # type: ignore[attr-defined]
                take_profit, stop_loss)
            return result

    async def close_position(ctx: AgentContext, args: dict[str, Any]) -> Element:
        symbol = broker.canonical_symbol(args["symbol"])
        await _held(symbol)
        # every sell goes first: a plain sell holds back what it will sell, and the take-profit
        # and stop-loss exits protect the position being closed while an exchange holds the coins
        # they would sell. The person's close frees what every agent holds back, an agent's only
        # its own.
        mine = None if ctx.agent_id == PERSON_ID else ctx.agent_id
        exits = []
        for old in await broker.open_orders(mine, symbol):
            if old.side is Side.SELL and await _cancel_exit(old.agent_id, symbol, old) and \
                    old.exit_kind in (ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS):
                exits.append(old)
        held = await _held(symbol)
        req = OrderRequest(
            ctx.agent_id, symbol, Side.SELL, OrderType.MARKET, held,
            reduce_only=True, exit_kind=ExitKind.CLOSE, reason=args["reason"] or "close position",
        )
        try:
            return _created(await _place(req))
        except (ToolError, RiskRejection) as exc:
            # not closed: the position keeps the exits that protected it
            raise await _after_refusal(exc, exits, held, exit_key(ctx)) from exc

    specs: Sequence[ToolSpec] = (
        ToolSpec(
            name="create_order",
            group=GROUP,
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
                ParamSpec("order_type", ParamType.ENUM, "Default MARKET", default="MARKET",
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
            handler=create_order,
            returns=(
                '<order_created order_id="P00000001" client_order_id="c1" status="SUBMITTED" '
                'filled_quantity="0" fee="0" fee_currency="USDT" />'
            ),
        ),
        ToolSpec(
            name="cancel_order",
            group=GROUP,
            description="Cancels one of your own open orders.",
            params=(
                SYMBOL_REQUIRED,
                ParamSpec("order_id", ParamType.STRING, "The order's id", default="",
                          max_length=64),
                ParamSpec("client_order_id", ParamType.STRING, "Or your client order id",
                          default="", max_length=64),
            ),
            permission=Permission.TRADE,
            handler=cancel_order,
            returns='<order_cancelled order_id="P00000001" status="CANCELLED" />',
        ),
        ToolSpec(
            name="set_position_tp_sl_orders",
            group=GROUP,
            description=(
                "Places (or replaces) reduce-only take-profit and/or stop-loss exits for the "
                "whole open position; when one fills the other is cancelled."
            ),
            params=(
                SYMBOL_REQUIRED,
                _decimal("take_profit_price", "Sell everything when the price reaches this"),
                _decimal("stop_loss_price", "Sell everything when the price falls to this"),
            ),
            permission=Permission.TRADE,
            handler=set_position_tp_sl_orders,
            returns=(
                '<tp_sl_set symbol="BTC/USDT" take_profit_order_id="P00000003" '
                'stop_loss_order_id="P00000004" />'
            ),
        ),
        ToolSpec(
            name="close_position",
            group=GROUP,
            description="Market-sells the whole open position of a symbol at the next bar's open.",
            params=(
                SYMBOL_REQUIRED,
                ParamSpec("reason", ParamType.STRING, "One-line rationale", default="",
                          max_length=500, free_text=True),
            ),
            permission=Permission.TRADE,
            handler=close_position,
            returns=(
                '<order_created order_id="P00000005" client_order_id="auto-P00000005" '
                'symbol="BTC/USDT" status="SUBMITTED" quantity="0.5" filled_quantity="0" '
                'fee="0" fee_currency="USDT" />'
            ),
        ),
    )
    return list(specs)
