"""One gate per exchange: a ban (HTTP 418) or a rate limit (429) holds every request until it ends.

Why: Binance answers a client that asks too often with 429, then bans its IP with 418, both with a
Retry-After header saying how long, and lengthens a ban while requests keep coming. Kestrel asks
one exchange from several places at once (the market data the agents read, the broker's account,
the live driver's polls, a stream's REST snapshots), each through its own ccxt exchange object: left
to themselves, each would keep asking through the ban and make it longer.

Where: ``install`` puts the gate on a ccxt exchange object (``client.build_exchange`` does it for
every exchange Kestrel builds). ccxt sends each REST request through the instance's ``fetch`` and
hands every answer to its ``on_rest_response``; both are wrapped, so no caller can go around the
gate. The gates are keyed by exchange id in one registry per process (``GATES``): the market
data's object, the broker's object and a stream's object of one exchange share one gate.

Closing: an answer 418 or 429 closes the gate for its Retry-After (seconds or an HTTP date). When
the header is missing, ``DEFAULT_PAUSE_S`` applies: 120 s after a 418 (Binance's shortest IP ban),
5 s after a 429 (the one- to five-second windows most exchanges count requests in; Binance,
whose windows run to a minute, always says how long). A later answer only ever lengthens the
pause.

While closed: ``fetch`` sends nothing and raises ``RequestsPausedError`` at once (a temporary
RATE_LIMITED error whose ``retry_after_s`` and message say until when). The request whose answer
closed the gate raises the same error (``answered``), with the exchange's own words, so every
caller sees one message. The runtime asks ``held()`` to skip its polls, and ``watch`` publishes
``ExchangeBanned`` when the gate closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.ccxt.errors import Kind, RequestsPausedError, is_ccxt_error, retry_after_s
from app.domain.clock import Clock, WallClock
from app.events import EventSink, ExchangeBanned
from app.redaction import redact

logger = logging.getLogger(__name__)

BANNED, RATE_LIMITED = 418, 429
DEFAULT_PAUSE_S: Mapping[int, float] = {BANNED: 120.0, RATE_LIMITED: 5.0}
REASON_CHARS = 300

# the status of the answer the current task's ``fetch`` received, when it paused the exchange
# (set by the ``on_rest_response`` hook, which ccxt calls inside that same ``fetch``)
_PAUSING_ANSWER: ContextVar[int | None] = ContextVar("kestrel_pausing_answer", default=None)


@dataclass(frozen=True, slots=True)
class Pause:
    """Why and until when an exchange's requests are held.

    Attributes:
        status: the HTTP status that closed the gate (418 or 429).
        until_ms: when requests may go again (the gate's clock, UTC ms).
        stated_s: the pause the exchange asked for (Retry-After), None when it did not say and
            the default was taken.
        reason: the exchange's own words in that answer (redacted, shortened).
    """

    status: int
    until_ms: int
    stated_s: float | None
    reason: str

    @property
    def kind(self) -> str:
        return "ban" if self.status == BANNED else "rate limit"


def _utc(ms: int, now_ms: int) -> str:
    """``HH:MM:SS UTC``, with the date in front when that is not today (a ban can last days)."""
    when = datetime.fromtimestamp(ms / 1000, tz=UTC)
    today = datetime.fromtimestamp(now_ms / 1000, tz=UTC).date()
    return when.strftime("%H:%M:%S UTC" if when.date() == today else "%Y-%m-%d %H:%M:%S UTC")


class RequestGate:
    """The gate of one exchange (see the module docstring).

    Args:
        exchange_id: the ccxt id, named in every message.
        clock: the wall clock the pause is measured on (tests give the fake exchange's).
    """

    def __init__(self, exchange_id: str, clock: Clock) -> None:
        self.exchange_id = exchange_id
        self.clock = clock
        self._pause: Pause | None = None
        self._watchers: list[tuple[EventSink, asyncio.AbstractEventLoop | None]] = []
        self._lock = threading.Lock()  # a settings probe may use the gate from a worker thread

    @property
    def pause(self) -> Pause | None:
        """The pause now in force; None when requests may go."""
        with self._lock:
            pause = self._pause
        if pause is None or self.clock.now_ms() >= pause.until_ms:
            return None
        return pause

    @property
    def closed(self) -> bool:
        return self.pause is not None

    def close(self, status: int, headers: Mapping[str, Any] | None, reason: str = "") -> Pause:
        """Hold requests after an answer ``status`` (418 or 429) for its Retry-After (the
        default when it has none); a pause already longer is kept. Returns the pause in force."""
        now = self.clock.now_ms()
        stated = retry_after_s(headers, now / 1000)
        seconds = stated if stated is not None else DEFAULT_PAUSE_S.get(status, 0.0)
        text = redact(" ".join(str(reason).split())[:REASON_CHARS])
        new = Pause(status, now + math.ceil(seconds * 1000), stated, text)
        with self._lock:
            old = self._pause
            if old is not None and old.until_ms >= new.until_ms and now < old.until_ms:
                return old
            self._pause = new
        if new.until_ms <= now:
            return new  # Retry-After: 0 holds nothing
        logger.warning("%s: requests paused until %s (%s, HTTP %d%s): %s", self.exchange_id,
                       _utc(new.until_ms, now), new.kind, status,
                       "" if stated is None else f", Retry-After {stated:g} s", text)
        self._publish(ExchangeBanned(self.exchange_id, new.until_ms, status, text))
        return new

    def held(self) -> str | None:
        """What the desk shows while requests are held ("binance: requests paused until
        12:34:56 UTC (ban, HTTP 418)"); None when they may go."""
        pause = self.pause
        if pause is None:
            return None
        return (f"{self.exchange_id}: requests paused until "
                f"{_utc(pause.until_ms, self.clock.now_ms())} ({pause.kind}, HTTP {pause.status})")

    def check(self) -> None:
        """Let a request go, or refuse it at once while the gate is closed.

        Raises:
            RequestsPausedError: the gate is closed; nothing is sent.
        """
        error = self.refusal()
        if error is not None:
            raise error

    def refusal(self, answer: BaseException | None = None) -> RequestsPausedError | None:
        """The error of a request held by the gate (``answer``: the exchange's refusal that
        closed it, for the request that received it); None when the gate is open."""
        pause = self.pause
        if pause is None:
            return None
        now = self.clock.now_ms()
        left_s = float(math.ceil((pause.until_ms - now) / 1000))
        verb = "banned" if pause.status == BANNED else "rate-limited"
        stated = (f"Retry-After {left_s:g} s" if pause.stated_s is not None else
                  f"no Retry-After: Kestrel's default pause, {left_s:g} s left")
        message = (f"{self.exchange_id} has {verb} requests until "
                   f"{_utc(pause.until_ms, now)} (HTTP {pause.status}, {stated}); nothing is "
                   "sent before then.")
        details: dict[str, Any] = {
            "exchange": self.exchange_id, "kind": Kind.TEMPORARY.value, "status": pause.status,
            "until_ms": pause.until_ms, "retry_after_s": left_s, "sent": answer is not None,
        }
        if answer is not None:
            said = redact(" ".join(str(answer).split())[:REASON_CHARS])
            message += f" The exchange answered: {said}"
            details.update(error_class=type(answer).__name__, exchange_message=said)
        error = RequestsPausedError(message, details=details)
        error.retry_after_s = left_s
        error.answered = answer is not None
        return error

    # -- who is told ---------------------------------------------------------------------------

    def watch(self, sink: EventSink) -> None:
        """Publish ``ExchangeBanned`` to ``sink`` whenever the gate closes (on the loop that
        was running here, which a worker thread's request is handed over to)."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._lock:
            self._watchers.append((sink, loop))

    def unwatch(self, sink: EventSink) -> None:
        with self._lock:
            self._watchers = [(s, loop) for s, loop in self._watchers if s != sink]

    def _publish(self, event: ExchangeBanned) -> None:
        with self._lock:
            watchers = list(self._watchers)
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for sink, loop in watchers:
            if loop is None or loop is here:
                sink(event)
            elif not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop stopped meanwhile
                    loop.call_soon_threadsafe(sink, event)


class Gates:
    """The process's gates, one per exchange id, on one clock (the wall clock; tests reset
    them on the fake exchange's)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or WallClock()
        self._gates: dict[str, RequestGate] = {}
        self._lock = threading.Lock()

    def of(self, exchange_id: str) -> RequestGate:
        with self._lock:
            gate = self._gates.get(exchange_id)
            if gate is None:
                gate = self._gates[exchange_id] = RequestGate(exchange_id, self.clock)
            return gate

    def reset(self, clock: Clock | None = None) -> None:
        """Forget every pause and watcher; measure new ones on ``clock`` (default: the wall)."""
        with self._lock:
            self._gates.clear()
            self.clock = clock or WallClock()


GATES = Gates()


def gate_for(exchange_id: str) -> RequestGate:
    """The gate of ``exchange_id`` in this process."""
    return GATES.of(exchange_id)


def install(exchange: Any, gates: Gates = GATES) -> None:
    """Put the gate of ``exchange.id`` on a ccxt exchange object (see the module docstring).

    The gate is looked up per request, so an object built before ``gates.reset`` uses the
    gates that are current.
    """
    exchange_id = str(exchange.id)
    plain_fetch = exchange.fetch
    plain_on_rest_response = exchange.on_rest_response

    def on_rest_response(code: Any, reason: Any, url: Any, method: Any, headers: Any,
                         body: Any, *rest: Any) -> Any:
        if code in DEFAULT_PAUSE_S:
            _PAUSING_ANSWER.set(int(code))
            gates.of(exchange_id).close(int(code), headers, body or reason or "")
        return plain_on_rest_response(code, reason, url, method, headers, body, *rest)

    async def fetch(url: str, method: str = "GET", headers: Any = None, body: Any = None) -> Any:
        gates.of(exchange_id).check()
        _PAUSING_ANSWER.set(None)
        try:
            return await plain_fetch(url, method, headers, body)
        except Exception as exc:
            if _PAUSING_ANSWER.get() is not None and is_ccxt_error(exc):
                refusal = gates.of(exchange_id).refusal(exc)
                if refusal is not None:
                    raise refusal from exc
            raise

    exchange.fetch = fetch
    exchange.on_rest_response = on_rest_response
