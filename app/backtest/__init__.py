"""The backtest's pure pieces: the strategy seam and SMA cross, metrics, trades and reports.

Running a backtest is the runtime's job (``app.runtime.strategy_backtest.run_backtest`` over the
one replay loop); ``kestrel backtest`` is ``app.cli.backtest``.
"""
