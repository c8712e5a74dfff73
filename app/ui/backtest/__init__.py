"""The Backtest view: run sma_cross or agent templates over chosen data and read the report."""

from app.ui.backtest.view import BacktestView

__all__ = ["BacktestView"]
