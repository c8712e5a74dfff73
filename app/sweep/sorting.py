"""The metrics a sweep's table is sorted by, kept apart so ``kestrel --help`` can list them
without loading the sweep's machinery."""

from __future__ import annotations

# --sort's names: the table column and whether more is better
SORT_KEYS: dict[str, tuple[str, bool]] = {
    "sharpe": ("sharpe", True),
    "sortino": ("sortino", True),
    "return": ("return_pct", True),
    "cagr": ("cagr_pct", True),
    "excess": ("vs_bh_return_pct", True),
    "drawdown": ("max_drawdown_pct", False),
    "win_rate": ("win_rate_pct", True),
    "profit_factor": ("profit_factor", True),
    "final_equity": ("final_equity", True),
}


def sort_key(name: str) -> tuple[str, bool]:
    """``--sort``'s name (or a figure's column name) -> (column, more is better).

    Raises:
        ValueError: an unknown name, listing the known ones.
    """
    if name in SORT_KEYS:
        return SORT_KEYS[name]
    columns = {column: better for column, better in SORT_KEYS.values()}
    if name in columns:
        return name, columns[name]
    raise ValueError(f"cannot sort by {name!r}; sort by one of {', '.join(SORT_KEYS)}")
