"""Cell functions for a sweep's local pool that misbehave, to test what the pool does then.

They live in a module of their own because the pool's workers are spawned: a worker imports the
function by name, so it cannot be a test's local function.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from app.sweep.cells import CellOutcome, CellTask, run_cell

DYING_CELL = "c0002"


def dies_in_one_cell(task: CellTask, blobs: Mapping[str, bytes]) -> CellOutcome:
    """``run_cell``, except that the worker running ``DYING_CELL`` dies on the spot (as one
    killed by the system for its memory would)."""
    if task.cell_id == DYING_CELL:
        os._exit(9)
    return run_cell(task, blobs)
