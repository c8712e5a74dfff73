"""One rate limiter per provider endpoint, shared by everything that calls it.

Why: the windows of an eval (and the cells of a sweep, or the agents of a desk) each call the same
API through their own provider object, and each retries on its own (``with_retries``). A server
that answers one of them HTTP 429 with Retry-After means its endpoint and key, not that one
caller: if the others keep sending, each earns its own 429 and its own backoff, and the quota
refills later for all. So the wait is shared: the first caller that learns it tells the
endpoint's ``ProviderLimiter`` (``hold_off``), and every caller's next request to that endpoint
(``slot``) waits until it has passed. Requests already under way are not touched. A limiter can
also bound the requests in flight at one endpoint (a local server that answers one at a time).

An endpoint is the provider kind, its base URL and its key (kept only as a hash): two keys on the
same API have separate quotas; one key used by many callers has one. ``shared_limiter`` hands out
one limiter per endpoint and event loop, so nothing waits on a loop that is not running it.

The concurrency a run of many model calls should use by default is here too
(``default_concurrency``): a local server (Ollama, LM Studio, llama.cpp, anything on this machine
or the local network) computes one answer at a time or two, so more callers only queue there and
risk their answer's time limit; a hosted API serves many at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[object]]

LOCAL_CONCURRENCY = 2
HOSTED_CONCURRENCY = 4
# the default ports of local model servers: LM Studio, Ollama, llama.cpp's server
LOCAL_PORTS = frozenset({1234, 11434, 8080})
_LOCAL_NAMES = ("localhost", "host.docker.internal")
_LOCAL_SUFFIXES = (".local", ".localhost", ".lan", ".internal")


class ProviderLimiter:
    """The shared pacing of one endpoint: a hold every request waits out, and optionally a
    bound on the requests in flight.

    Args:
        max_in_flight: at most this many requests under way at once (``None``: no bound).
        clock: seconds, monotonic (a test's fake clock).
        sleep: awaited while a hold lasts (a test's recorder).
    """

    def __init__(
        self,
        max_in_flight: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self._clock = clock
        self._sleep = sleep
        self._resume_at = float("-inf")
        self._gate = asyncio.Semaphore(max_in_flight) if max_in_flight else None
        self.in_flight = 0
        self.holds = 0  # how often a server's Retry-After held every caller (tests, logs)

    def waiting_s(self) -> float:
        """How long a request asked now would wait for the hold (0 when there is none)."""
        return max(0.0, self._resume_at - self._clock())

    def hold_off(self, seconds: float) -> None:
        """Hold every request not yet under way for ``seconds`` from now (a server's
        Retry-After); a longer hold already set is kept."""
        if seconds <= 0:
            return
        resume_at = self._clock() + seconds
        if resume_at > self._resume_at:
            self._resume_at = resume_at
            self.holds += 1
            logger.info("the server asked to wait %.2f s: every request to it waits", seconds)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait for a place (when bounded) and for any hold to pass, then send inside."""
        if self._gate is not None:
            await self._gate.acquire()
        try:
            while (wait := self._resume_at - self._clock()) > 0:
                await self._sleep(wait)  # a hold set meanwhile is waited out too
            self.in_flight += 1
            try:
                yield
            finally:
                self.in_flight -= 1
        finally:
            if self._gate is not None:
                self._gate.release()


def endpoint_key(kind: str, base_url: str, api_key: str | None) -> str:
    """What identifies an endpoint's quota: the kind, the base URL and a hash of the key (the key
    itself is never kept)."""
    digest = hashlib.sha256((api_key or "").encode("utf-8")).hexdigest()[:16]
    return f"{kind} {base_url.rstrip('/')} {digest}"


_LIMITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, ProviderLimiter]] = (
    weakref.WeakKeyDictionary()
)


def shared_limiter(
    kind: str, base_url: str, api_key: str | None, *, max_in_flight: int | None = None
) -> ProviderLimiter:
    """The running event loop's limiter for this endpoint, made on first use.

    ``max_in_flight`` is taken from the first caller that makes it; later callers share it as
    it is. Must be called with an event loop running (limiters wait on it).
    """
    loop = asyncio.get_running_loop()
    limiters = _LIMITERS.setdefault(loop, {})
    key = endpoint_key(kind, base_url, api_key)
    limiter = limiters.get(key)
    if limiter is None:
        limiter = limiters[key] = ProviderLimiter(max_in_flight)
    return limiter


def is_local_server(base_url: str) -> bool:
    """Whether ``base_url`` is a model server on this machine or its network (by host: loopback,
    a private or link-local address, a local name; or by a local server's default port)."""
    parts = urlsplit(base_url if "//" in base_url else f"//{base_url}")
    host = (parts.hostname or "").lower()
    if host in _LOCAL_NAMES or host.endswith(_LOCAL_SUFFIXES):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None and (address.is_loopback or address.is_private
                                or address.is_link_local or address.is_unspecified):
        return True
    try:
        return parts.port in LOCAL_PORTS
    except ValueError:  # a port that is not a number
        return False


def default_concurrency(kind: str, base_url: str | None) -> int | None:
    """How many runs that call a model may go at once by default: ``LOCAL_CONCURRENCY`` for a
    local server, ``HOSTED_CONCURRENCY`` for a hosted API, and ``None`` (as many as there are)
    for what calls no server (the rule engine, a replayed recording)."""
    if kind in ("rule-engine", "replay", "template", ""):
        return None
    if base_url and is_local_server(base_url):
        return LOCAL_CONCURRENCY
    return HOSTED_CONCURRENCY
