"""Parameter sweeps: many full backtests (a strategy or agent templates) over a grid or a random
sample of their settings, run on local processes or a Dask cluster, resumable, with one table.

``space`` turns ``--grid`` into cells, ``cells`` runs one cell (anywhere: it carries its data and
returns its report), ``store`` keeps each finished cell durably, ``executors`` runs cells in
parallel, ``table`` reads the results back (sorted, heatmap, isolated-peak check) and ``sweep``
drives a whole sweep.
"""
