"""The look-ahead-safe backtest engine: replay, strategies on the tool seam, metrics and reports.

``run_backtest(data, strategy, RunOptions(...))`` runs one backtest; ``add_backtest_arguments`` and
``backtest_command`` are the ``kestrel backtest`` sub-command for ``app/cli.py`` to mount.
"""
