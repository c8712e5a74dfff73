"""A take profit and a stop loss on one spot position, as one OCO order list on Binance.

Why: a spot exchange locks the coins of a resting sell order, so a take-profit LIMIT and a
stop-loss placed as two orders cannot both hold one position (the second finds no coins free).
Binance's OCO list (``POST /api/v3/orderList/oco``, ccxt's implicit ``privatePostOrderListOco``)
holds both on the coins once: the above leg a LIMIT_MAKER at the take profit, the below leg a
STOP_LOSS_LIMIT at the stop (its limit a band beyond, ``app.ccxt.stops``); when one fills or
triggers, the exchange expires the other, and cancelling one leg cancels the list.

Real money, so the rules of single orders hold for the list: both legs are journaled (and the
list, in the journal's meta: ``oco:<list id>`` -> the legs' client ids) before the request leaves,
with client ids derived from the tool call; the request is sent once; its failure is sorted at
the border (a refusal marks both legs REJECTED, anything ambiguous leaves both UNKNOWN, looked up
by client id by the ``Reconciler`` like any order, never sent again). Each leg is an ordinary
order on Binance (found by ``origClientOrderId``), so reading legs needs nothing new.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.ccxt.client_ids import derive
from app.ccxt.errors import RequestsPausedError, translate
from app.ccxt.orders import to_order
from app.ccxt.outcome import Outcome, check_answer, sort_failure, unknown_outcome
from app.ccxt.stops import as_stop_limit
from app.domain.errors import ExchangeError, InvalidOrderError
from app.domain.market_rules import fmt
from app.domain.trading import Order, OrderType, Side
from app.exchange.validation import check_request, check_rules
from app.store.order_journal import JournalEntry, JournalState
from app.trading.port import OrderRequest

if TYPE_CHECKING:
    from app.ccxt.broker import CcxtBroker

# exchanges whose OCO list Kestrel sends, and the ccxt implicit method that sends it
OCO_METHODS: Mapping[str, str] = {"binance": "privatePostOrderListOco"}
LIST_KEY = "oco:"


def oco_allowed(exchange: Any, symbol: str) -> bool:
    """Whether ``exchange`` takes an OCO list on ``symbol``: Kestrel knows how to send it there,
    ccxt exposes the endpoint, and the market says so (Binance's ``ocoAllowed``)."""
    method = OCO_METHODS.get(str(exchange.id))
    if method is None or getattr(exchange, method, None) is None:
        return False
    market = (getattr(exchange, "markets", None) or {}).get(symbol) or {}
    info = market.get("info") or {}
    return isinstance(info, Mapping) and info.get("ocoAllowed") in (True, "true")


@dataclass(frozen=True, slots=True)
class OcoLegs:
    """The two journal entries of one list and the list's own client id."""

    list_client_id: str
    take_profit: JournalEntry
    stop_loss: JournalEntry


def _intent(broker: CcxtBroker, req: OrderRequest, symbol: str, now: int) -> JournalEntry:
    agent_order_id = req.client_order_id
    return JournalEntry(
        venue=broker.venue, client_order_id=derive(broker.venue, req.agent_id, agent_order_id),
        agent_id=req.agent_id, agent_order_id=agent_order_id, symbol=symbol, side=req.side,
        order_type=req.order_type, quantity=req.quantity, created_ms=now, price=req.price,
        stop_price=req.stop_price, reduce_only=req.reduce_only, exit_kind=req.exit_kind,
        note=req.reason, updated_ms=now,
    )


def checked_legs(
    broker: CcxtBroker, take_profit: OrderRequest, stop_loss: OrderRequest
) -> tuple[str, OrderRequest, OrderRequest]:
    """The symbol and both legs as sent, checked like single orders (fields, rules, a sell of
    the same quantity at a take profit above a stop). The stop always goes as a stop-limit:
    that is the list's below leg on Binance."""
    for req in (take_profit, stop_loss):
        check_request(req)
        if not req.client_order_id:
            raise InvalidOrderError("An OCO leg needs its client order id.",
                                    details={"field": "client_order_id"})
    symbol = broker.canonical_symbol(take_profit.symbol)
    if (take_profit.side, stop_loss.side) != (Side.SELL, Side.SELL) or (
            take_profit.quantity != stop_loss.quantity):
        raise InvalidOrderError("Both legs of an OCO list sell the same quantity.",
                                details={"field": "quantity"})
    if take_profit.order_type is not OrderType.LIMIT or take_profit.price is None:
        raise InvalidOrderError("An OCO list's take profit is a LIMIT with its price.",
                                details={"field": "take_profit_price"})
    rules = broker.market_rules(symbol)
    stop_loss = as_stop_limit(stop_loss, broker.venue, rules, broker.stop_limit_band)
    if stop_loss.stop_price is None or stop_loss.stop_price >= take_profit.price:
        raise InvalidOrderError("An OCO list's stop loss must lie below its take profit.",
                                details={"field": "stop_loss_price"})
    for req in (take_profit, stop_loss):
        assert req.price is not None  # both legs are limits by now
        check_rules(req, req.quantity, req.price, rules)
    return symbol, take_profit, stop_loss


async def place(
    broker: CcxtBroker, take_profit: OrderRequest, stop_loss: OrderRequest
) -> tuple[Order, Order]:
    """Journal both legs and the list, send the list once, and sort the outcome."""
    if broker.grants is not None:
        broker.grants.check(take_profit.agent_id)
    symbol, take_profit, stop_loss = checked_legs(broker, take_profit, stop_loss)
    now = broker.clock.now_ms()
    intents = [_intent(broker, req, symbol, now) for req in (take_profit, stop_loss)]
    list_id = derive(broker.venue, take_profit.agent_id, take_profit.client_order_id + ":oco")
    journal = broker.journal
    found = [journal.by_agent_order_id(broker.venue, i.agent_id, i.agent_order_id)
             for i in intents]
    if any(e is not None for e in found):
        for entry, intent in zip(found, intents, strict=True):
            if entry is None or not entry.same_intent(intent):
                raise InvalidOrderError(
                    f"client_order_id {intent.agent_order_id!r} was already used for another "
                    "order; use a new id.", details={"client_order_id": intent.agent_order_id})
        legs = [e for e in found if e is not None]
        if any(e.state is JournalState.NOT_PLACED for e in legs):
            raise ExchangeError(
                f"The OCO list {take_profit.client_order_id!r} was sent once, its outcome was "
                f"lost, and it was not found on {broker.venue}; it is not sent again under this "
                "id. Check get_open_orders, then decide anew.",
                details={"client_order_id": take_profit.client_order_id})
        if any(e.state.in_flight for e in legs):
            return await _settle(broker, legs, None, "an earlier attempt's outcome is still "
                                 "being checked")
        if not all(e.state.may_send for e in legs):
            return to_order(legs[0]), to_order(legs[1])
        tp_entry, sl_entry = legs
    else:
        # the list first, then its legs: each commit is durable before the request leaves
        journal.set_meta(broker.venue, {LIST_KEY + list_id: ",".join(
            i.client_order_id for i in intents)})
        tp_entry, sl_entry = (journal.record(i) for i in intents)
    sent = []
    for entry in (tp_entry, sl_entry):
        await broker.sending.step("journaled", entry)
        sent.append(journal.update(
            entry, state=JournalState.SENDING, attempts=entry.attempts + 1,
            sent_ms=broker.clock.now_ms(), updated_ms=broker.clock.now_ms(), reason="",
            checks=0))
    await broker.sending.step("sending", sent[0])
    return await _send(broker, OcoLegs(list_id, sent[0], sent[1]))


def request_params(exchange: Any, legs: OcoLegs) -> dict[str, Any]:
    """Binance's OCO parameters: a SELL list, LIMIT_MAKER above, STOP_LOSS_LIMIT below."""
    tp, sl = legs.take_profit, legs.stop_loss
    assert tp.price is not None and sl.stop_price is not None and sl.price is not None
    return {
        "symbol": exchange.market_id(tp.symbol), "side": "SELL", "quantity": fmt(tp.quantity),
        "listClientOrderId": legs.list_client_id,
        "aboveType": "LIMIT_MAKER", "abovePrice": fmt(tp.price),
        "aboveClientOrderId": tp.client_order_id,
        "belowType": "STOP_LOSS_LIMIT", "belowStopPrice": fmt(sl.stop_price),
        "belowPrice": fmt(sl.price), "belowTimeInForce": "GTC",
        "belowClientOrderId": sl.client_order_id,
    }


def leg_reports(exchange: Any, answer: Any, symbol: str) -> dict[str, Mapping[str, Any]]:
    """The answer's order reports as ccxt orders, by client order id."""
    if not isinstance(answer, Mapping):
        return {}
    market = exchange.market(symbol)
    out = {}
    for report in answer.get("orderReports") or []:
        if isinstance(report, Mapping) and report.get("clientOrderId"):
            out[str(report["clientOrderId"])] = exchange.parse_order(dict(report), market)
    return out


async def _send(broker: CcxtBroker, legs: OcoLegs) -> tuple[Order, Order]:
    entries = [legs.take_profit, legs.stop_loss]
    method = getattr(broker.exchange, OCO_METHODS[broker.venue])
    try:
        answer = await method(request_params(broker.exchange, legs))
    except asyncio.CancelledError:
        for entry in entries:
            broker.sending.mark_unknown(entry, "the OCO request was cancelled while in flight")
        raise
    except RequestsPausedError as error:  # held by the exchange's gate: neither leg booked
        for entry in entries:
            broker.sending.paused(entry, error)
        raise
    except Exception as exc:
        outcome = sort_failure(exc, broker.id_rules)
        if outcome is Outcome.REJECTED:
            refusal = translate(exc, broker.venue,
                                what=f"placing the {entries[0].symbol} OCO list")
            for entry in entries:
                broker.journal.update(entry, state=JournalState.REJECTED, reason=refusal.message,
                                      updated_ms=broker.clock.now_ms())
            broker.sending.unknown_run = 0
            raise refusal from exc
        why = ("the exchange already has this client order id" if outcome is Outcome.DUPLICATE
               else f"{type(exc).__name__} while placing the OCO list")
        entries = [broker.sending.mark_unknown(e, why) for e in entries]
        if outcome is Outcome.DUPLICATE:
            return await _settle(broker, entries, exc, why)
        broker.sending.unknown_run += 1
        for entry in entries:
            broker.announce.unknown(entry, why, broker.sending.unknown_run)
        raise unknown_outcome(exc, broker.venue, entries[0].client_order_id,
                              entries[0].agent_order_id, why) from exc
    reports = leg_reports(broker.exchange, answer, entries[0].symbol)
    checks = [check_answer(reports.get(e.client_order_id), e.client_order_id) for e in entries]
    if not all(c.ok for c in checks):
        why = next(c.why for c in checks if not c.ok) + " (the OCO list's answer)"
        entries = [broker.sending.mark_unknown(e, why) for e in entries]
        broker.sending.unknown_run += 1
        for entry in entries:
            broker.announce.unknown(entry, why, broker.sending.unknown_run)
        raise unknown_outcome(None, broker.venue, entries[0].client_order_id,
                              entries[0].agent_order_id, why)
    broker.sending.unknown_run = 0
    out = []
    for entry in entries:
        raw = reports[entry.client_order_id]
        entry = broker.sync.record(entry, raw)
        broker.announce.placed(to_order(entry))
        entry = await broker.sync.record_fills(entry, raw)
        out.append(to_order(entry))
    return out[0], out[1]


async def _settle(
    broker: CcxtBroker, entries: list[JournalEntry], exc: BaseException | None, why: str
) -> tuple[Order, Order]:
    """Look both legs up once by client id: their orders when both are found, else the
    unknown-outcome error (the reconciler keeps looking)."""
    out = []
    for entry in entries:
        if entry.state.in_flight:
            found = await broker.sync.lookup(entry)
            if found is None:
                raise unknown_outcome(exc, broker.venue, entry.client_order_id,
                                      entry.agent_order_id, why)
            entry = await broker.sync.apply(entry, found)
        out.append(to_order(entry))
    return out[0], out[1]


def sibling(broker: CcxtBroker, entry: JournalEntry) -> JournalEntry | None:
    """The other leg of the OCO list ``entry`` belongs to, when it does."""
    for _key, value in broker.journal.meta_with_prefix(broker.venue, LIST_KEY):
        ids = value.split(",")
        if entry.client_order_id in ids:
            other = [i for i in ids if i != entry.client_order_id]
            return broker.journal.get(broker.venue, other[0]) if other else None
    return None
