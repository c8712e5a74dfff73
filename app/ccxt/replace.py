"""Moving a resting order in one request: Binance's cancel-replace.

Why: moving a limit order by cancelling it and placing another leaves a moment with neither,
and when the second is refused the order is simply gone. Binance's ``POST
/api/v3/order/cancelReplace`` (ccxt's ``edit_order`` on a spot market) cancels and places in one
request; with ``STOP_ON_FAILURE`` a cancel that fails places nothing.

Real money, so the rules of single orders hold: the new order is journaled (NEW, then SENDING)
under a client id derived from its own request before the request leaves, the request is sent
once, and its outcome is sorted by reading the exchange, never by sending again. Binance answers
a failed part with -2022 (the cancel failed: nothing changed) or -2021 (the cancel went through,
the new order was refused), which ccxt raises as a bad response; so any failure is settled by
reading both orders: the old one by its exchange id, the new one by its client id. Found, the new
order is returned; not found while the old one still rests, nothing changed; not found with the
old one cancelled, the refusal says so (order entry then puts an exit back); a lost answer with
the old one cancelled stays unknown, looked up by the reconciler like any order.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from app.ccxt.client_ids import derive
from app.ccxt.errors import RequestsPausedError, is_ccxt_error, translate
from app.ccxt.orders import to_order
from app.ccxt.outcome import check_answer, unknown_outcome
from app.domain.agents import agent_key
from app.domain.errors import AccessDeniedError, InvalidOrderError
from app.domain.trading import Order, OrderType
from app.exchange.validation import check_request, check_rules
from app.store.order_journal import JournalEntry, JournalState
from app.trading.port import OrderRequest

if TYPE_CHECKING:
    from app.ccxt.broker import CcxtBroker

# exchanges whose ``edit_order`` is a cancel-replace Kestrel knows how to settle
CANCEL_REPLACE = frozenset({"binance"})


def cancel_replace_allowed(exchange: Any) -> bool:
    """Whether Kestrel moves an order on ``exchange`` in one request."""
    has = getattr(exchange, "has", None) or {}
    return str(exchange.id) in CANCEL_REPLACE and bool(has.get("editOrder"))


async def replace(
    broker: CcxtBroker, agent_id: str, symbol: str, order_id: str, req: OrderRequest
) -> Order:
    """Cancel ``order_id`` and place ``req`` in one request (see the module docstring)."""
    old = broker.entry_of(agent_id, symbol, order_id)
    if agent_key(old.agent_id) != agent_key(agent_id):
        raise AccessDeniedError(
            f"Order {order_id} belongs to agent {old.agent_id!r}; an agent may only move its "
            "own orders.", details={"order_id": order_id, "owner": old.agent_id})
    if not old.state.on_exchange_open or old.exchange_order_id is None:
        state = to_order(old).status.value
        raise InvalidOrderError(f"Order {order_id} is {state} and cannot be moved.",
                                details={"order_id": order_id, "status": state})
    if broker.grants is not None:
        broker.grants.check(req.agent_id)
    check_request(req)
    symbol = broker.canonical_symbol(symbol)
    req = broker.as_sent(req, symbol)
    ref = await broker.last_price(symbol)
    check_rules(req, req.quantity, ref, broker.market_rules(symbol))
    agent_order_id = req.client_order_id or f"mv-{uuid.uuid4().hex[:16]}"
    now = broker.clock.now_ms()
    entry = broker.journal.record(JournalEntry(
        venue=broker.venue, client_order_id=derive(broker.venue, req.agent_id, agent_order_id),
        agent_id=req.agent_id, agent_order_id=agent_order_id, symbol=symbol, side=req.side,
        order_type=req.order_type, quantity=req.quantity, created_ms=now, price=req.price,
        stop_price=req.stop_price, reduce_only=req.reduce_only, exit_kind=req.exit_kind,
        note=req.reason, updated_ms=now,
    ))
    await broker.sending.step("journaled", entry)
    entry = broker.journal.update(entry, state=JournalState.SENDING, attempts=1,
                                  sent_ms=broker.clock.now_ms(),
                                  updated_ms=broker.clock.now_ms())
    await broker.sending.step("sending", entry)
    try:
        answer = await _send(broker, old, entry)
    except asyncio.CancelledError:
        broker.sending.mark_unknown(entry, "the cancel-replace was cancelled while in flight")
        raise
    except RequestsPausedError as error:  # held by the exchange's gate: nothing was sent
        broker.sending.paused(entry, error)
        raise
    except Exception as exc:
        if not is_ccxt_error(exc):
            raise
        return await _settle(broker, old, entry, exc)
    check = check_answer(answer, entry.client_order_id)
    if not check.ok:
        return await _settle(broker, old, entry, None)
    entry = broker.sync.record(entry, answer)
    broker.announce.placed(to_order(entry))
    entry = await broker.sync.record_fills(entry, answer)
    await _old_cancelled(broker, old)
    return to_order(entry)


async def _send(broker: CcxtBroker, old: JournalEntry, entry: JournalEntry) -> Any:
    params: dict[str, Any] = {broker.id_rules.create_param: entry.client_order_id}
    kind = "limit" if entry.order_type in (OrderType.LIMIT, OrderType.STOP_LIMIT) else "market"
    if entry.stop_price is not None:
        params["stopPrice"] = float(entry.stop_price)
    price = None if entry.price is None else float(entry.price)
    return await broker.exchange.edit_order(
        old.exchange_order_id, entry.symbol, kind, entry.side.value.lower(),
        float(entry.quantity), price, params)


async def _old_cancelled(broker: CcxtBroker, old: JournalEntry) -> JournalEntry:
    """Read the replaced order again (the exchange cancelled it) and say so."""
    raw = await broker.sync.fetch_by_id(old)
    if raw is None:
        return old
    now = await broker.sync.apply(old, raw)
    if not now.state.on_exchange_open:
        broker.forget_balances()  # what it held is free again
        broker.announce.cancelled(to_order(now))
    return now


async def _settle(
    broker: CcxtBroker, old: JournalEntry, entry: JournalEntry, exc: BaseException | None
) -> Order:
    """Read both orders after a failed or unreadable answer, and say what happened."""
    why = f"{type(exc).__name__} while moving the order" if exc else "an unreadable answer"
    entry = broker.sending.mark_unknown(entry, why)
    old = await _old_cancelled(broker, old)
    found = await broker.sync.lookup(entry)
    if found is not None:
        entry = await broker.sync.apply(entry, found)
        broker.announce.placed(to_order(entry))
        return to_order(entry)
    said = "" if exc is None else translate(exc, broker.venue, what="moving the order").message
    definite = exc is not None and any(code in str(exc) for code in ("-2021", "-2022"))
    if old.state.on_exchange_open:  # the cancel failed: nothing changed
        broker.journal.update(entry, state=JournalState.REJECTED, reason=said or why,
                              updated_ms=broker.clock.now_ms())
        raise InvalidOrderError(
            f"The order was not moved: the exchange refused ({said or why}); order "
            f"{to_order(old).order_id} stands as it was.",
            details={"order_id": to_order(old).order_id, "old_cancelled": False})
    if definite:  # the cancel went through, the new order was refused
        broker.journal.update(entry, state=JournalState.REJECTED, reason=said,
                              updated_ms=broker.clock.now_ms())
        raise InvalidOrderError(
            f"The order was cancelled but its replacement was refused ({said}): order "
            f"{to_order(old).order_id} is gone and nothing rests in its place.",
            details={"order_id": to_order(old).order_id, "old_cancelled": True})
    broker.sending.unknown_run += 1
    broker.announce.unknown(entry, why, broker.sending.unknown_run)
    raise unknown_outcome(exc, broker.venue, entry.client_order_id, entry.agent_order_id, why)
