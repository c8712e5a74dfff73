"""Retry a provider call on temporary errors, with exponential backoff, jitter and Retry-After.

Why here and not in the SDKs: every SDK client is built with ``max_retries=0`` so that one policy,
tested once, governs every provider, and only errors already translated to ``TemporaryLLMError``
are retried. A ``PermanentLLMError`` (a refused key, an unknown model) fails at once, because
asking again cannot help, and ``CancelledError`` always propagates (it is not an ``Exception``).

A provider that shares its endpoint with other callers passes their ``ProviderLimiter``: every
attempt then waits for its slot, and a Retry-After one attempt is given holds every caller's
next request, not only this caller's retry (``app.agents.llm.limits``).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypedDict

from app.agents.llm.limits import ProviderLimiter
from app.agents.llm.port import TemporaryLLMError

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[object]]


class Backoff(TypedDict):
    """A provider's pacing of its retries, passed on to ``with_retries`` as it is."""

    base_delay_s: float
    max_delay_s: float
    sleep: Sleep
    jitter: Callable[[], float]
    limiter: ProviderLimiter | None


class ThrottledLLMError(TemporaryLLMError):
    """A temporary error that carries the server's Retry-After hint (seconds), when it sent one."""

    def __init__(self, provider: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(provider, message)
        self.retry_after_s = retry_after_s


def retry_after_of(error: BaseException) -> float | None:
    """The Retry-After hint an error carries (any error type with ``retry_after_s``), if any."""
    value = getattr(error, "retry_after_s", None)
    if isinstance(value, int | float) and value >= 0:
        return float(value)
    return None


def parse_retry_after(headers: object) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds; an HTTP date is ignored).

    Args:
        headers: any mapping with a case-insensitive ``get`` (httpx headers), or ``None``.
    """
    get = getattr(headers, "get", None)
    if get is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) * scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None


def backoff_delay(
    attempt: int, *, base_delay_s: float, max_delay_s: float, jitter: Callable[[], float]
) -> float:
    """The pause after failed attempt ``attempt`` (1-based): "equal jitter" backoff.

    Half the exponential step is fixed and half is random, so concurrent agents hitting the same
    rate limit spread out while each still waits at least half the nominal step.
    """
    step = min(max_delay_s, base_delay_s * (2.0 ** (attempt - 1)))
    return step / 2 + step / 2 * min(max(jitter(), 0.0), 1.0)


async def with_retries[T](
    call: Callable[[], Awaitable[T]],
    *,
    attempts: int,
    base_delay_s: float,
    max_delay_s: float,
    sleep: Sleep = asyncio.sleep,
    jitter: Callable[[], float] = random.random,
    max_retry_after_s: float = 120.0,
    on_retry: Callable[[int, TemporaryLLMError, float], None] | None = None,
    limiter: ProviderLimiter | None = None,
) -> T:
    """Run ``call`` up to ``attempts`` times while it raises ``TemporaryLLMError``.

    Args:
        call: makes one fresh attempt each time it is called.
        attempts: total tries (1 = no retry).
        base_delay_s / max_delay_s: the first backoff step and the cap of any step.
        sleep: awaited with each pause (inject a recorder in tests).
        jitter: returns a number in [0, 1]; inject a constant for deterministic tests.
        max_retry_after_s: a server asking to wait longer than this is not waited for: the
            error is raised at once, so an agent does not hang for an hour on a quota reset.
        on_retry: told (attempt, error, pause) before each pause, e.g. to show "retrying".
        limiter: the endpoint's shared limiter: each attempt is made in its ``slot``, and a
            Retry-After hint (one this call would wait for) holds every caller of the endpoint.

    Returns:
        The first successful result.

    Raises:
        TemporaryLLMError: the last one, when every attempt failed (message says how many).
        PermanentLLMError, CancelledError, anything else: at once, unchanged.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    attempt = 0
    while True:
        attempt += 1
        try:
            if limiter is None:
                return await call()
            async with limiter.slot():
                return await call()
        except TemporaryLLMError as exc:
            hint = retry_after_of(exc)
            if limiter is not None and hint is not None and hint <= max_retry_after_s:
                limiter.hold_off(hint)  # the server means its endpoint, not this caller
            if attempt >= attempts:
                if attempt == 1:
                    raise
                raise _exhausted(exc, attempt) from exc
            if hint is not None and hint > max_retry_after_s:
                raise _exhausted(exc, attempt, f"the server asked to wait {hint:g} s") from exc
            pause = backoff_delay(
                attempt, base_delay_s=base_delay_s, max_delay_s=max_delay_s, jitter=jitter
            )
            if hint is not None:
                pause = max(pause, hint)
            logger.warning("attempt %d of %d failed (%s); retrying in %.2f s",
                           attempt, attempts, exc, pause)
            if on_retry is not None:
                on_retry(attempt, exc, pause)
            await sleep(pause)


def _exhausted(exc: TemporaryLLMError, attempt: int, why: str = "") -> TemporaryLLMError:
    """The final error: same type, same provider, the message says how often it was tried."""
    message = str(exc).removeprefix(f"{exc.provider}: ")
    tried = f"gave up after {attempt} attempt{'s' if attempt > 1 else ''}"
    suffix = f" ({tried}; {why})" if why else f" ({tried})"
    if isinstance(exc, ThrottledLLMError):
        return ThrottledLLMError(exc.provider, message + suffix, exc.retry_after_s)
    return TemporaryLLMError(exc.provider, message + suffix)
