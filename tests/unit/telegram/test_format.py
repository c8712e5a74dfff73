"""Telegram's wording of the app's data: alerts by kind, questions with their buttons and a
reference a reply can be matched by, and messages that always fit Telegram's limits."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from app.domain.agents import Notification, Question, QuestionKind, Urgency
from app.domain.trading import AccountState, AssetBalance, Mode, Position
from app.telegram import format as fmt

FILL = {"fill_id": "f1", "order_id": "o1", "symbol": "BTC/USDT", "side": "SELL",
        "quantity": "0.01", "price": "8300.5", "fee": "0.083", "fee_currency": "USDT",
        "time": "2019-10-11T14:00:00Z", "realized_pnl": "12.345", "exit_kind": "NONE"}


def _question(kind: QuestionKind, replies: tuple[str, ...] = ()) -> Question:
    return Question(question_id=str(uuid.uuid4()), agent_id="a1", task_id="t1", kind=kind,
                    text="Which symbol?", suggested_replies=replies, format_hint="TEXT",
                    asked_ms=0)


@pytest.mark.parametrize(("exit_kind", "title"), [
    ("NONE", "✅ Order filled · T"), ("TAKE_PROFIT", "🎯 Take-profit hit · T"),
    ("STOP_LOSS", "🛑 Stop-loss hit · T"), ("CLOSE", "✅ Order filled · T"),
])
def test_a_fill_says_what_happened_in_its_first_line(exit_kind: str, title: str) -> None:
    text = fmt.fill_alert({**FILL, "exit_kind": exit_kind}, "T").text
    assert text.splitlines() == [
        title, "SELL 0.01 BTC/USDT at 8300.5 (fee 0.083 USDT)", "Realized P&L +12.35",
        "at 2019-10-11 14:00 UTC"]


def test_an_entry_fill_has_no_profit_line() -> None:
    text = fmt.fill_alert({**FILL, "realized_pnl": "0"}, "T").text
    assert "P&L" not in text


def test_a_clarification_offers_its_replies_as_buttons_and_a_reference() -> None:
    question = _question(QuestionKind.CLARIFICATION, ("BTC/USDT", "ETH/USDT", "x" * 100))
    message = fmt.question_message(question, "Orchestrator")
    assert message.text.startswith("❓ Orchestrator asks\nWhich symbol?")
    assert fmt.ref_in(message.text) == fmt.ref(question.question_id)
    labels = [row[0].label for row in message.buttons]
    assert labels[:2] == ["BTC/USDT", "ETH/USDT"] and labels[2] == "x" * 39 + "…"
    assert [row[0].data for row in message.buttons] == [
        f"q|{question.question_id}|{i}" for i in range(3)]


def test_button_data_fits_telegrams_64_bytes_for_any_question_id() -> None:
    question = _question(QuestionKind.APPROVAL, ("Approve", "Refuse"))
    message = fmt.question_message(question, "T", order="BUY BTC/USDT MARKET", expiry_s=900)
    (row,) = message.buttons
    assert [b.label for b in row] == ["Approve", "Refuse"]
    assert all(len(b.data.encode()) <= 64 for b in row)
    assert "Order: BUY BTC/USDT MARKET" in message.text
    assert "The buttons work for 15 min; /approve sends fresh ones." in message.text


def test_a_reference_is_found_only_where_one_was_printed() -> None:
    assert fmt.ref_in("some text\nref 0a1b2c3d") == "0a1b2c3d"
    assert fmt.ref_in("no reference here") is None
    assert fmt.ref_in("") is None


def test_order_words_name_the_order_in_one_line() -> None:
    assert fmt.order_words({"symbol": "BTC/USDT", "side": "BUY", "order_type": "LIMIT",
                            "quantity": "0.5", "price": "8000"}) == (
        "BUY BTC/USDT LIMIT, quantity 0.5, price 8000")
    assert fmt.order_words({}) == "? ?"


def test_long_text_is_clipped_under_telegrams_limit() -> None:
    n = Notification("n1", "a1", (), "y" * 10_000, "Long", Urgency.HIGH, 0)
    text = fmt.notification_alert(n, "T").text
    assert len(text) == fmt.MAX_TEXT and text.endswith("…")


def test_long_lists_say_how_many_more_there_are() -> None:
    positions = [Position(f"S{i}/USDT", Decimal(1), Decimal(2), Decimal(3), Decimal(1),
                          Decimal("0.5")) for i in range(fmt.MAX_ROWS + 7)]
    text = fmt.positions_text(positions)
    assert text.endswith("… and 7 more") and "S24/USDT" in text and "S25/USDT" not in text
    assert fmt.positions_text([]) == "Open positions\n  none"


def test_balance_lists_every_asset_with_free_and_reserved() -> None:
    account = AccountState(
        Mode.PAPER, "USDT", Decimal("5000"), Decimal("10234.567"), Decimal("-12.3"),
        Decimal("234.567"), Decimal("1.25"),
        assets=(AssetBalance("USDT", Decimal("4000"), Decimal("1000")),
                AssetBalance("BTC", Decimal("0.5"), Decimal(0))))
    assert fmt.balance_text(account).splitlines() == [
        "Balance · PAPER", "Equity 10,234.57 USDT, cash 5,000.00 USDT",
        "P&L today -12.30, total +234.57; max drawdown 1.25%",
        "  USDT: 5000 (free 4000, in orders 1000)", "  BTC: 0.5 (free 0.5, in orders 0)"]
