"""The nine account and trading tools through the executor, with numbers from the data file."""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal

import pytest

from app.domain.trading import ExitKind
from tests.unit.trading_tools.rig import make_tool_rig

D = Decimal


def buy(qty: str = "0.5", extra: str = "") -> str:
    return (f"<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
            f"<quantity>{qty}</quantity>{extra}</create_order>")


def attrs(element) -> dict[str, str]:
    return dict(element.attrs)


def test_get_account_balance_of_a_new_account():
    t = make_tool_rig()
    data = t.data("<get_account_balance></get_account_balance>")
    assert data.tag == "account_balance"
    assert attrs(data) == {
        "quote_currency": "USDT", "cash": "10000", "equity": "10000", "today_pnl": "0",
        "total_pnl": "0", "max_drawdown_pct": "0", "mode": "BACKTEST",
    }
    assert [attrs(a) for a in data.children] == [
        {"currency": "USDT", "free": "10000", "used": "0", "total": "10000"}
    ]


def test_market_buy_then_balance_positions_and_history_show_the_fill():
    t = make_tool_rig()
    created = t.data(buy(extra="<reason>trend up</reason><client_order_id>b1</client_order_id>"))
    assert created.tag == "order_created"
    assert attrs(created) == {
        "order_id": "P00000001", "client_order_id": "b1", "symbol": "BTC/USDT",
        "status": "SUBMITTED", "quantity": "0.5", "filled_quantity": "0", "fee": "0",
        "fee_currency": "USDT",
    }
    t.rig.step()
    (trade,) = t.data("<get_trade_history></get_trade_history>").children
    assert attrs(trade) == {
        "time_ms": "1577923200000", "symbol": "BTC/USDT", "side": "BUY", "quantity": "0.5",
        "price": "7202.22", "fee": "3.60111", "realized_pnl": "0",
        "order_id": "P00000001",
    }
    cash = D("10000") - D("3601.11") - D("3.60111")
    equity = cash + D("0.5") * D("6965.71")
    balance = t.data("<get_account_balance/>")
    assert attrs(balance)["cash"] == str(cash)
    assert attrs(balance)["equity"] == str(equity)
    assert attrs(balance)["total_pnl"] == str(equity - 10000)
    btc = next(a for a in balance.children if attrs(a)["currency"] == "BTC")
    assert attrs(btc) == {"currency": "BTC", "free": "0.5", "used": "0", "total": "0.5"}
    (pos,) = t.data("<get_open_positions/>").children
    weight = (D("0.5") * D("6965.71") / equity * 100).quantize(D("0.01"))
    cost = (D("3601.11") + D("3.60111")) / D("0.5")  # the fee is part of the position's cost
    shown = attrs(pos)
    unrealized = D(shown.pop("unrealized_pnl"))
    assert shown == {
        "symbol": "BTC/USDT", "size": "0.5", "avg_price": str(cost.quantize(D("0.01"))),
        "current_price": "6965.71", "weight_pct": str(weight),
    }
    assert unrealized == D("0.5") * (D("6965.71") - cost) == equity - 10000  # sold now, all of it
    status = attrs(t.data("<get_order_status><symbol>BTC/USDT</symbol>"
                          "<order_id>P00000001</order_id></get_order_status>"))
    assert status["status"] == "FILLED"
    assert status["average_price"] == "7202.22"
    assert status["fee"] == "3.60111"
    assert status["reason"] == "trend up"


def test_quote_amount_market_buy_through_the_tool():
    t = make_tool_rig()
    t.data("<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
           "<quote_amount>1000</quote_amount></create_order>")
    t.rig.step()
    (trade,) = t.data("<get_trade_history/>").children
    qty = (D("1000") / (D("7202.22") * D("1.001"))).quantize(D("0.000001"), ROUND_DOWN)
    assert attrs(trade)["quantity"] == str(qty)


@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        ("<side>BUY</side>", "MISSING_PARAMETER", "exactly one"),
        ("<side>BUY</side><quantity>1</quantity><quote_amount>10</quote_amount>",
         "INVALID_PARAMETER", "exactly one"),
        ("<side>BUY</side><quantity>-1</quantity>", "INVALID_PARAMETER", "greater than 0"),
        ("<side>BUY</side><quantity>NaN</quantity>", "INVALID_PARAMETER", "written plainly"),
        ("<side>BUY</side><quantity>abc</quantity>", "INVALID_PARAMETER", "decimal"),
        ("<side>BUY</side><quantity>1</quantity><order_type>LIMIT</order_type>",
         "INVALID_PARAMETER", "needs <price>"),
        ("<side>BUY</side><quantity>1</quantity><order_type>STOP</order_type>",
         "INVALID_PARAMETER", "needs <stop_price>"),
        ("<side>BUY</side><quantity>0.0000001</quantity>", "INVALID_ORDER", "precision"),
        ("<side>BUY</side><quantity>0.001</quantity>", "INVALID_ORDER", "minimum notional"),
        ("<side>BUY</side><quantity>5</quantity>", "INSUFFICIENT_FUNDS", "only 10000 is free"),
        ("<side>SELL</side><quantity>1</quantity>", "INVALID_ORDER", "hold no BTC"),
        ("<side>HOLD</side><quantity>1</quantity>", "INVALID_PARAMETER", "BUY, SELL"),
    ],
)
def test_create_order_errors(body, code, fragment):
    t = make_tool_rig()
    result = t.call(f"<create_order><symbol>BTC/USDT</symbol>{body}</create_order>")
    assert result.status == "error"
    assert result.error_code.value == code
    assert fragment in result.message
    assert t.rig.ledger.load().orders == []


def test_unknown_symbol_is_not_found():
    t = make_tool_rig()
    result = t.call(buy().replace("BTC/USDT", "XYZ/USDT"))
    assert result.error_code.value == "NOT_FOUND"
    assert "BTC/USDT" in result.message


def test_risk_guard_rejection_reaches_no_broker():
    t = make_tool_rig(limit="1000")
    result = t.call(buy())
    assert result.status == "rejected"
    assert result.rule == "max_order_notional"
    assert "<rule>max_order_notional</rule>" in result.xml
    # reference price = last close of bar 0: 0.5 x 7200.85
    assert t.guard.seen[0].reference_price == D("7200.85")
    assert t.guard.seen[0].notional == D("3600.425")
    assert t.rig.ledger.load().orders == []


def test_repeated_client_order_id_returns_the_same_order():
    t = make_tool_rig()
    first = t.data(buy(extra="<client_order_id>dup</client_order_id>"))
    again = t.data(buy(extra="<client_order_id>dup</client_order_id>"))
    assert attrs(first)["order_id"] == attrs(again)["order_id"]
    assert len(t.guard.seen) == 1
    assert len(t.rig.ledger.load().orders) == 1
    assert len(t.rig.step()) == 1


def test_a_client_order_id_used_for_another_order_is_refused_naming_both():
    t = make_tool_rig()
    t.data(buy(extra="<client_order_id>dup</client_order_id>"))
    other = t.call(buy(qty="0.7", extra="<client_order_id>dup</client_order_id>"))
    assert other.error_code is not None and other.error_code.value == "INVALID_ORDER"
    assert "BUY 0.5 BTC/USDT" in other.message and "BUY 0.7 BTC/USDT" in other.message
    assert "its own id" in other.message
    assert len(t.rig.ledger.load().orders) == 1


def test_limit_order_open_orders_cancel_and_errors():
    t = make_tool_rig()
    order_id = attrs(t.data(buy(extra="<order_type>LIMIT</order_type><price>6000</price>")))[
        "order_id"]
    (listed,) = t.data("<get_open_orders><symbol>BTC/USDT</symbol></get_open_orders>").children
    assert attrs(listed)["order_id"] == order_id
    assert attrs(listed)["price"] == "6000"
    assert attrs(listed)["remaining_quantity"] == "0.5"
    balance = t.data("<get_account_balance/>")
    assert attrs(balance.children[0])["used"] == "3003"

    other = t.call(f"<cancel_order><symbol>BTC/USDT</symbol><order_id>{order_id}</order_id>"
                   "</cancel_order>", agent="a2")
    assert other.error_code.value == "ACCESS_DENIED"
    unknown = t.call("<cancel_order><symbol>BTC/USDT</symbol><order_id>P404</order_id>"
                     "</cancel_order>")
    assert unknown.error_code.value == "NOT_FOUND"
    neither = t.call("<cancel_order><symbol>BTC/USDT</symbol></cancel_order>")
    assert neither.error_code.value == "MISSING_PARAMETER"
    done = t.data(f"<cancel_order><symbol>BTC/USDT</symbol><order_id>{order_id}</order_id>"
                  "</cancel_order>")
    assert attrs(done) == {"order_id": order_id, "status": "CANCELLED"}
    assert t.data("<get_open_orders/>").children == ()
    missing = t.call("<get_order_status><symbol>BTC/USDT</symbol><order_id>nope</order_id>"
                     "</get_order_status>")
    assert missing.error_code.value == "NOT_FOUND"


def test_tp_sl_places_reduce_only_exits_and_one_cancels_the_other():
    t = make_tool_rig(limit="5000")
    t.data(buy())
    t.rig.step()  # holds 0.5 at 7202.22; last price 6965.71
    data = t.data("<set_position_tp_sl_orders><symbol>BTC/USDT</symbol>"
                  "<take_profit_price>7390</take_profit_price>"
                  "<stop_loss_price>6000</stop_loss_price></set_position_tp_sl_orders>")
    tp_id, sl_id = attrs(data)["take_profit_order_id"], attrs(data)["stop_loss_order_id"]
    assert all(i.reduces_position for i in t.guard.seen[1:])
    assert [i.exit_kind for i in t.guard.seen[1:]] == [ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS]
    orders = {attrs(o)["order_id"]: attrs(o) for o in t.data("<get_open_orders/>").children}
    assert orders[tp_id]["order_type"] == "LIMIT" and orders[tp_id]["price"] == "7390"
    assert orders[sl_id]["order_type"] == "STOP" and orders[sl_id]["stop_price"] == "6000"
    assert orders[tp_id]["reduce_only"] == "true" and orders[tp_id]["quantity"] == "0.5"
    (fill,) = t.rig.step()  # bar 2 high 7405 reaches the take-profit
    assert (fill.order_id, fill.price) == (tp_id, D("7390"))
    sl = attrs(t.data(f"<get_order_status><symbol>BTC/USDT</symbol><order_id>{sl_id}"
                      "</order_id></get_order_status>"))
    assert sl["status"] == "CANCELLED"


def test_tp_sl_replaces_previous_exits():
    t = make_tool_rig()
    t.data(buy())
    t.rig.step()
    first = attrs(t.data("<set_position_tp_sl_orders><symbol>BTC/USDT</symbol>"
                         "<stop_loss_price>6000</stop_loss_price></set_position_tp_sl_orders>"))
    second = attrs(t.data("<set_position_tp_sl_orders><symbol>BTC/USDT</symbol>"
                          "<stop_loss_price>6500</stop_loss_price></set_position_tp_sl_orders>"))
    (only,) = t.data("<get_open_orders/>").children
    assert attrs(only)["order_id"] == second["stop_loss_order_id"]
    assert first["stop_loss_order_id"] != second["stop_loss_order_id"]
    assert "take_profit_order_id" not in second


@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        ("", "MISSING_PARAMETER", "take_profit_price"),
        ("<take_profit_price>6000</take_profit_price>", "INVALID_ORDER", "above the last price"),
        ("<stop_loss_price>7000</stop_loss_price>", "INVALID_ORDER", "below the last price"),
        ("<stop_loss_price>6000.001</stop_loss_price>", "INVALID_ORDER", "precision"),
    ],
)
def test_tp_sl_errors(body, code, fragment):
    t = make_tool_rig()
    t.data(buy())
    t.rig.step()
    result = t.call(f"<set_position_tp_sl_orders><symbol>BTC/USDT</symbol>{body}"
                    "</set_position_tp_sl_orders>")
    assert (result.error_code.value, fragment in result.message) == (code, True), result.message


def test_tp_sl_and_close_without_a_position_are_invalid_order():
    t = make_tool_rig()
    for xml in ("<close_position><symbol>BTC/USDT</symbol></close_position>",
                "<set_position_tp_sl_orders><symbol>BTC/USDT</symbol><stop_loss_price>1"
                "</stop_loss_price></set_position_tp_sl_orders>"):
        result = t.call(xml)
        assert result.error_code.value == "INVALID_ORDER"
        assert "no open BTC/USDT position" in result.message


def test_close_position_sells_everything_at_next_open_even_past_entry_limits():
    t = make_tool_rig(limit="5000")
    t.data(buy())
    t.rig.step()
    t.guard.limit = D("1")  # entries would now be refused; the exit must still pass
    created = attrs(t.data("<close_position><symbol>BTC/USDT</symbol></close_position>"))
    assert created["quantity"] == "0.5"
    assert t.guard.seen[-1].reduces_position
    (fill,) = t.rig.step()
    assert fill.price == D("6964.09")  # bar 2 open 6965.49 x 0.9998
    assert t.data("<get_open_positions/>").children == ()


def test_sell_that_only_shrinks_the_long_is_marked_as_reducing():
    t = make_tool_rig()
    t.data(buy())
    t.rig.step()
    t.data("<create_order><symbol>BTC/USDT</symbol><side>SELL</side><quantity>0.2</quantity>"
           "</create_order>")
    assert t.guard.seen[-1].reduces_position


def test_trade_history_limit_and_symbol_filter():
    t = make_tool_rig()
    for _ in range(3):
        t.data(buy("0.1"))
        t.rig.step()
    trades = t.data("<get_trade_history><symbol>BTC/USDT</symbol><limit>2</limit>"
                    "</get_trade_history>").children
    assert [attrs(x)["order_id"] for x in trades] == ["P00000003", "P00000002"]
    bad = t.call("<get_trade_history><limit>0</limit></get_trade_history>")
    assert bad.error_code.value == "INVALID_PARAMETER"


@pytest.mark.parametrize("amount", ["٥٠٠", "1_000", "۵۰۰", "１２", "5e2"])
def test_an_amount_in_another_number_syntax_places_no_order_and_names_the_syntax(amount):
    t = make_tool_rig()
    result = t.call("<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
                    f"<quote_amount>{amount}</quote_amount></create_order>")
    assert result.status == "error" and result.error_code.value == "INVALID_PARAMETER"
    assert "written plainly" in result.message and "<quote_amount>" in result.message
    assert t.rig.ledger.load().orders == [] and t.guard.seen == []
    plain = t.call("<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
                   "<quote_amount>500</quote_amount></create_order>")
    assert plain.status == "success"
