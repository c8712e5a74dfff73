"""Backtest metrics: known curves give known numbers; undefined metrics are None, never a crash."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.backtest.metrics import RoundTrip, compute_metrics, drawdown_pct, periods_per_year

HOUR = 3_600_000
YEAR = 365 * 86_400_000


def _trip(pnl: float, still_open: bool = False) -> RoundTrip:
    return RoundTrip("BTC/USDT", 0, HOUR, 1.0, 100.0, 100.0 + pnl, pnl, pnl, 0.2, 1, still_open)


def test_total_return_drawdown_and_exposure_of_a_known_curve() -> None:
    equity = np.array([100.0, 120.0, 90.0, 110.0, 130.0])
    times = np.arange(5) * HOUR
    exposed = np.array([False, True, True, True, False])
    m = compute_metrics(times, equity, HOUR, [], exposed, fees_paid=1.5)
    assert m.total_return_pct == pytest.approx(30.0)
    assert m.max_drawdown_pct == pytest.approx(25.0)  # 120 -> 90
    assert m.exposure_pct == pytest.approx(60.0)
    assert m.fees_paid == 1.5
    assert m.final_equity == 130.0


def test_cagr_of_doubling_in_exactly_one_year_is_100_percent() -> None:
    times = np.array([0, YEAR // 2, YEAR])
    m = compute_metrics(times, np.array([1000.0, 1500.0, 2000.0]), 86_400_000, [],
                        np.zeros(3, dtype=bool), 0.0)
    assert m.cagr_pct == pytest.approx(100.0)


def test_sharpe_and_sortino_are_annualised_by_the_bar_interval() -> None:
    returns = np.array([0.01, -0.005, 0.02, -0.01, 0.015, 0.0])
    equity = 1000.0 * np.concatenate([[1.0], np.cumprod(1 + returns)])
    times = np.arange(equity.size) * HOUR
    m = compute_metrics(times, equity, HOUR, [], np.zeros(equity.size, dtype=bool), 0.0)
    scale = math.sqrt(365 * 24)
    assert m.sharpe == pytest.approx(returns.mean() / returns.std(ddof=1) * scale)
    downside = math.sqrt(np.mean(np.minimum(returns, 0) ** 2))
    assert m.sortino == pytest.approx(returns.mean() / downside * scale)
    assert periods_per_year(86_400_000) == 365


def test_a_flat_run_without_trades_has_no_undefined_ratio_and_does_not_divide_by_zero() -> None:
    equity = np.full(10, 5000.0)
    m = compute_metrics(np.arange(10) * HOUR, equity, HOUR, [], np.zeros(10, dtype=bool), 0.0)
    assert m.total_return_pct == 0.0
    assert m.sharpe is None and m.sortino is None
    assert m.win_rate_pct is None and m.profit_factor is None
    assert m.trades == 0 and m.max_drawdown_pct == 0.0


def test_a_single_point_curve_is_accepted() -> None:
    m = compute_metrics(np.array([0]), np.array([100.0]), HOUR, [], np.zeros(1, dtype=bool), 0.0)
    assert m.cagr_pct is None and m.sharpe is None and m.total_return_pct == 0.0


def test_win_rate_and_profit_factor_count_closed_trades_only() -> None:
    trips = [_trip(30.0), _trip(-10.0), _trip(-5.0), _trip(100.0, still_open=True)]
    m = compute_metrics(np.arange(3) * HOUR, np.array([1.0, 1.0, 1.0]), HOUR, trips,
                        np.zeros(3, dtype=bool), 0.0)
    assert m.trades == 3
    assert m.win_rate_pct == pytest.approx(100 / 3)
    assert m.profit_factor == pytest.approx(2.0)


def test_profit_factor_without_losing_trades_is_undefined_not_infinite() -> None:
    m = compute_metrics(np.arange(2) * HOUR, np.array([1.0, 2.0]), HOUR, [_trip(5.0)],
                        np.zeros(2, dtype=bool), 0.0)
    assert m.win_rate_pct == 100.0 and m.profit_factor is None


def test_initial_capital_overrides_the_first_point_for_returns() -> None:
    m = compute_metrics(np.arange(2) * HOUR, np.array([99.9, 110.0]), HOUR, [],
                        np.ones(2, dtype=bool), 0.1, initial=100.0)
    assert m.total_return_pct == pytest.approx(10.0)


def test_a_wiped_out_account_reports_minus_100_percent_cagr() -> None:
    m = compute_metrics(np.array([0, YEAR]), np.array([100.0, 0.0]), 86_400_000, [],
                        np.zeros(2, dtype=bool), 0.0)
    assert m.cagr_pct == -100.0 and m.max_drawdown_pct == 100.0


def test_drawdown_series_is_zero_at_new_highs() -> None:
    assert drawdown_pct(np.array([1.0, 2.0, 1.0, 3.0])).tolist() == [0.0, 0.0, 50.0, 0.0]


def test_a_zero_bar_length_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        periods_per_year(0)


def test_cagr_of_a_big_gain_over_one_hour_is_undefined_rather_than_an_overflow() -> None:
    m = compute_metrics(np.array([0, HOUR]), np.array([100.0, 200.0]), HOUR, [],
                        np.zeros(2, dtype=bool), 0.0)
    assert m.cagr_pct is None and m.total_return_pct == pytest.approx(100.0)
