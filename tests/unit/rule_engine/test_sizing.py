"""Position sizing by risk and the Trader's memory rules."""

from __future__ import annotations

from decimal import Decimal

from app.agents.rule_engine.sizing import (
    CAP_MARGIN,
    losing_streak,
    position_size,
    risk_adjustment,
)
from app.memory.roles import TradeRecord, TradesFile

D = Decimal


def size(**overrides: Decimal) -> Decimal:
    args = {"equity": D(10_000), "cash": D(10_000), "entry": D(100), "stop": D(95),
            "risk_pct": D(1), "max_position_pct": D(100)}
    args.update(overrides)
    return position_size(**args).quantity


def test_the_risk_amount_over_the_stop_distance_is_the_quantity() -> None:
    assert size() == D(20)  # 1% of 10,000 = 100 at risk over a 5 distance


def test_the_position_cap_limits_a_tight_stop() -> None:
    capped = size(stop=D("99.9"), max_position_pct=D(20))
    assert capped == (D(2000) * CAP_MARGIN / D(100)).quantize(D("0.000001"))
    assert capped * 100 < D(2000)


def test_a_position_never_costs_more_than_the_cash() -> None:
    assert size(cash=D(500), stop=D("99.9")) * 100 <= D(500)


def test_quantities_are_rounded_down_to_the_step() -> None:
    quantity = position_size(equity=D(10_000), cash=D(10_000), entry=D(3), stop=D("2.9"),
                             risk_pct=D(1), max_position_pct=D(100), step=D("0.01")).quantity
    assert quantity == D("1000.00") and quantity % D("0.01") == 0


def test_a_size_under_the_minimum_order_is_no_trade_and_says_why() -> None:
    result = position_size(equity=D(100), cash=D(100), entry=D(100), stop=D(50), risk_pct=D(1),
                           max_position_pct=D(100))
    assert result.quantity == 0 and "minimum order" in result.explanation


def test_entry_equal_to_stop_is_no_trade() -> None:
    assert size(stop=D(100)) == 0


def trade(n: int, pnl: str | None) -> TradeRecord:
    return TradeRecord(trade_id=f"t{n}", side="BUY", quantity=D(1), entry_price=D(100),
                       opened_at="2019-10-10T00:00:00Z",
                       realized_pnl=None if pnl is None else D(pnl))


def record(*trades: TradeRecord) -> TradesFile:
    return TradesFile(symbol="BTC/USDT", trades=list(trades))


def test_the_losing_streak_counts_closed_losses_at_the_end() -> None:
    trades = record(trade(1, "-5"), trade(2, "8"), trade(3, "-1"), trade(4, "0"), trade(5, "-2"),
                    trade(6, None))
    assert losing_streak(trades) == 3
    assert losing_streak(record(trade(1, "5"))) == 0


def test_a_losing_streak_goes_on_into_the_archive_when_every_kept_trade_lost() -> None:
    history = record(trade(1, "4"), trade(2, "-1"), trade(3, "-2"), trade(4, "-3"), trade(5, None))
    rolled = history.without(history.oldest_closed(2), "symbols/BTCUSDT/trades_archive/a.yaml")
    assert [t.trade_id for t in rolled.trades] == ["t3", "t4", "t5"]
    assert losing_streak(rolled) == losing_streak(history) == 3


def test_a_poor_record_halves_the_risk_and_a_short_one_does_not() -> None:
    poor = [trade(n, "-1" if n % 4 else "3") for n in range(12)]  # 3 wins of 12 = 25%
    factor, why = risk_adjustment(record(*poor))
    assert factor == D("0.5") and "25%" in why
    assert risk_adjustment(record(*poor[:5])) == (D(1), "")


def test_the_win_rate_counts_the_archived_trades_too() -> None:
    poor = record(*[trade(n, "-1" if n % 4 else "3") for n in range(12)])
    rolled = poor.without(poor.oldest_closed(3), "symbols/BTCUSDT/trades_archive/a.yaml")
    assert len(rolled.trades) == 3
    assert risk_adjustment(rolled) == risk_adjustment(poor)
