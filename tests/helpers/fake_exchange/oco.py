"""The fake Binance's OCO order list, ``POST /api/v3/orderList/oco``, as Binance answers it.

Why: the live broker places a position's take profit and stop loss as one list, and must be
proven against ccxt's real signed request and Binance's rules: the above leg (LIMIT_MAKER) above
the last price, the below leg's stop (STOP_LOSS_LIMIT) below it, both legs of the list's quantity,
the coins locked once for the list. The legs are ordinary orders of the account (found by
``origClientOrderId``, listed as open); when one triggers or fills the other EXPIRES and
cancelling one cancels both (``FakeBinanceAccount._engage`` and ``cancel``).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from tests.helpers.fake_exchange.account import OPEN, FakeBinanceAccount, FakeOrder, Refused

PRICES_WRONG = "The relationship of the prices for the orders is not correct."


def create_oco(account: FakeBinanceAccount, params: Mapping[str, str]) -> dict[str, Any]:
    """Check, book both legs, lock the coins once; the list's answer with its order reports."""
    with account.lock:
        account.match()
        symbol = account._symbol(params)
        rules = account.rules[symbol]
        if not rules.oco_allowed:
            raise Refused(400, -2010, "OCO orders are not supported for this symbol.")
        side = params.get("side", "")
        if side != "SELL":
            raise Refused(400, -1013, "The fake exchange books SELL OCO lists only.")
        above, below = params.get("aboveType", ""), params.get("belowType", "")
        if above != "LIMIT_MAKER" or below != "STOP_LOSS_LIMIT":
            raise Refused(400, -1102, "aboveType LIMIT_MAKER and belowType STOP_LOSS_LIMIT, "
                          "please (the fake's one combination).")
        missing = [k for k in ("quantity", "abovePrice", "belowStopPrice", "belowPrice",
                               "belowTimeInForce") if not params.get(k)]
        if missing:
            raise Refused(400, -1102, f"Mandatory parameter '{missing[0]}' was not sent, was "
                          "empty/null, or malformed.")
        ids = [params.get(k, "") for k in ("listClientOrderId", "aboveClientOrderId",
                                           "belowClientOrderId")]
        if any(o.client_id in ids and o.status in OPEN for o in account.orders) or (
                ids[0] in account.lists.values()):
            raise Refused(400, -2010, "Duplicate order sent.")
        qty = Decimal(params["quantity"])
        above_price = Decimal(params["abovePrice"])
        stop, below_price = Decimal(params["belowStopPrice"]), Decimal(params["belowPrice"])
        last = Decimal(str(account.state.last(symbol)))
        if above_price <= last or stop >= last:
            raise Refused(400, -2010, PRICES_WRONG)
        if qty % rules.step != 0 or qty < rules.min_qty:
            raise Refused(400, -1013, "Filter failure: LOT_SIZE")
        for price in (above_price, stop, below_price):
            if price % rules.tick != 0:
                raise Refused(400, -1013, "Filter failure: PRICE_FILTER")
        if qty * below_price < rules.min_notional:
            raise Refused(400, -1013, "Filter failure: NOTIONAL")
        base = account._balance(rules.base)
        if qty > base[0]:
            raise Refused(400, -2010, "Account has insufficient balance for requested action.")
        account._next_order += 1
        list_id = account._next_order
        now = account._now()
        legs = []
        for client_id, kind, price, stop_price in (
                (ids[2], "STOP_LOSS_LIMIT", below_price, stop),
                (ids[1], "LIMIT_MAKER", above_price, Decimal(0))):
            account._next_order += 1
            legs.append(FakeOrder(
                order_id=account._next_order, client_id=client_id, symbol=symbol,
                market_id=params["symbol"], side=side, type=kind, orig_qty=qty, price=price,
                stop_price=stop_price, time_ms=now, list_id=list_id))
        # the coins once, on the limit leg; a leg that triggers or fills takes them over
        base[0] -= qty
        base[1] += qty
        legs[1].locked = qty
        account.orders.extend(legs)
        account.lists[list_id] = ids[0]
        reports = []
        for leg in legs:
            report = leg.wire()
            report["transactTime"] = now
            reports.append(report)
        return {
            "orderListId": list_id, "contingencyType": "OCO", "listStatusType": "EXEC_STARTED",
            "listOrderStatus": "EXECUTING", "listClientOrderId": ids[0], "transactionTime": now,
            "symbol": params["symbol"],
            "orders": [{"symbol": params["symbol"], "orderId": leg.order_id,
                        "clientOrderId": leg.client_id} for leg in legs],
            "orderReports": reports,
        }
