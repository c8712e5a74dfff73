"""An exchange that cannot be reached, without the waits between the reads' retries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.ccxt.errors import RetryPolicy


@pytest.fixture
def no_retry_waits(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every read is still retried as often as it would be, one retry right after the other:
    what a test of an unreachable exchange checks is what the person is told, and the waits
    (half a second, doubling) would only add seconds to it."""
    monkeypatch.setattr(RetryPolicy, "backoff_s", lambda _self, _attempt: 0.0)
    yield
