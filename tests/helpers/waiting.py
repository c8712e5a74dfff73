"""Waiting on a condition instead of sleeping a fixed time.

A fixed sleep is either too short on a loaded machine (the test fails for no reason) or too long
everywhere else; ``eventually`` polls the condition and returns as soon as it holds, failing with
what it waited for only after a generous bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually[T](condition: Callable[[], T], *, within_s: float = 60.0, what: str = "",
               poll_s: float = 0.05) -> T:
    """Poll ``condition`` until it returns something true and return that.

    Raises:
        AssertionError: it did not hold within ``within_s`` seconds (naming ``what``).
    """
    deadline = time.monotonic() + within_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within_s} s: {what or condition}")
        time.sleep(poll_s)
