"""ccxt's exceptions translated once, at the border, into Kestrel's error tree; retries for reads.

The whole mapping is one table, ``TRANSLATIONS``, keyed by ccxt class name (so this module never
imports ccxt): a ccxt exception is translated by the first class of its MRO found in the table,
so a class ccxt adds later still lands on its parent's row. Each row says which Kestrel error it
becomes (and so which protocol error code an agent sees), whether it is *temporary* (worth retrying
with backoff), *operational* (a person must act: keys, region, proxy settings) or *permanent* (the
request itself is wrong), and what to do about it.

Note: ``RateLimitExceeded`` is not a subclass of ``DDoSProtection`` in current ccxt (both are
``NetworkError`` subclasses), so each has its own row.

Only reads are retried (``retry_read``): a write that timed out may have reached the exchange, and
retrying it blindly could place an order twice. A read is never retried while its exchange's gate
is closed (``gate.py``: a 418 ban or a 429 with its Retry-After): it waits a short pause out, and
gives up at once with the gate's ``RequestsPausedError`` when the pause is longer than the policy's
``max_wait_s``.

The exchange's own words are kept in the message (they say what is wrong), redacted here, where
they enter: a gateway or proxy that refuses a signed request may quote the API key or the
passphrase it received, and the message goes on to the order journal, the agent and the logs.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.domain.errors import (
    ExchangeError,
    InsufficientFundsError,
    InvalidOrderError,
    NetworkError,
    NotFoundError,
    OperationalError,
    RateLimitedError,
    TemporaryError,
    ToolError,
    ToolTimeoutError,
)
from app.redaction import redact

logger = logging.getLogger(__name__)


# -- the Kestrel side: protocol errors that also say whether a retry can help ------------------


class ExchangeNetworkError(NetworkError, TemporaryError):
    """The exchange could not be reached or answered with a server error; retrying may help."""


class ExchangeTimeoutError(ToolTimeoutError, TemporaryError):
    """A request to the exchange took longer than the configured timeout."""


class ExchangeRateLimitedError(RateLimitedError, TemporaryError):
    """The exchange refused for too many requests; ``retry_after_s`` when it said how long."""

    retry_after_s: float | None = None


class RequestsPausedError(ExchangeRateLimitedError):
    """The exchange banned (HTTP 418) or rate-limited (429) this client, and its gate
    (``app.ccxt.gate``) holds every request until ``retry_after_s`` from now.

    Attributes:
        answered: False when nothing was sent (the gate refused the request): an order refused
            so was certainly not booked. True for the request whose answer closed the gate: it
            was sent, and the exchange refused it before booking anything.
    """

    answered: bool = False


class ExchangeBadResponseError(ExchangeError, TemporaryError):
    """The exchange answered with something unreadable (empty, truncated, not JSON)."""


class ExchangePendingError(ExchangeError, TemporaryError):
    """The exchange is still processing an earlier request (a cancel); ask again shortly."""


class ExchangeAccessError(ExchangeError, OperationalError):
    """The exchange refuses this client (keys, permissions, region, proxy): a person must act."""


class Kind(StrEnum):
    TEMPORARY = "temporary"
    OPERATIONAL = "operational"
    PERMANENT = "permanent"


@dataclass(frozen=True, slots=True)
class Translation:
    """One row of the table: what a ccxt exception becomes.

    Attributes:
        error: the Kestrel error class raised in its place.
        kind: temporary (retried for reads), operational or permanent (never retried).
        advice: what the caller, or the person, should do; ends the error message.
    """

    error: type[ToolError]
    kind: Kind
    advice: str


_NETWORK = Translation(
    ExchangeNetworkError, Kind.TEMPORARY,
    "Check the network connection (or the proxy in settings) and try again in a minute.",
)
_UNAVAILABLE = Translation(
    ExchangeNetworkError, Kind.TEMPORARY,
    "The exchange is down or overloaded; try again in a few minutes.",
)
_RATE_LIMITED = Translation(
    ExchangeRateLimitedError, Kind.TEMPORARY,
    "Wait before asking again, and ask for fewer symbols or less often.",
)
_BAD_RESPONSE = Translation(
    ExchangeBadResponseError, Kind.TEMPORARY,
    "The answer was unreadable; try again. If it keeps happening, a proxy or mirror in the "
    "exchange's settings may be answering instead of the exchange.",
)
_ACCESS = Translation(
    ExchangeAccessError, Kind.OPERATIONAL,
    "A person must act: check the exchange's API key and its permissions in Settings > Exchanges.",
)
_REQUEST = Translation(
    ExchangeError, Kind.PERMANENT,
    "The exchange refused the request as it was made; change it rather than retrying it.",
)
_INVALID_ORDER = Translation(
    InvalidOrderError, Kind.PERMANENT,
    "Change the order (price, quantity, type) to meet the exchange's rules and send it again.",
)
_ORDER_NOT_FOUND = Translation(
    NotFoundError, Kind.PERMANENT,
    "Check the order id, and list the open orders to see which exist.",
)

TRANSLATIONS: Mapping[str, Translation] = {
    # OperationFailed branch: ccxt's "retriable" errors
    "OperationFailed": Translation(
        ExchangeNetworkError, Kind.TEMPORARY,
        "The exchange failed to handle the request; try again in a minute.",
    ),
    "NetworkError": _NETWORK,
    "RequestTimeout": Translation(
        ExchangeTimeoutError, Kind.TEMPORARY,
        "Try again; if it keeps happening, raise timeout_s in the exchange's settings.",
    ),
    "ExchangeNotAvailable": _UNAVAILABLE,
    "OnMaintenance": Translation(
        ExchangeNetworkError, Kind.TEMPORARY,
        "The exchange is under maintenance; try again after it ends (see its status page).",
    ),
    "DDoSProtection": _RATE_LIMITED,
    "RateLimitExceeded": _RATE_LIMITED,  # not a DDoSProtection subclass in ccxt 4
    "InvalidNonce": Translation(
        ExchangeNetworkError, Kind.TEMPORARY,
        "The request's nonce or timestamp was refused; check the computer's clock and try again.",
    ),
    "ChecksumError": Translation(
        ExchangeNetworkError, Kind.TEMPORARY,
        "A streamed order book lost sync; it is fetched afresh on the next try.",
    ),
    "BadResponse": _BAD_RESPONSE,
    "NullResponse": _BAD_RESPONSE,
    "CancelPending": Translation(
        ExchangePendingError, Kind.TEMPORARY,
        "The cancel is still being processed; check the order's status in a moment.",
    ),
    # ExchangeError branch: the request or the account is wrong; retrying cannot help
    "BaseError": _REQUEST,
    "ExchangeError": _REQUEST,
    "BadRequest": _REQUEST,
    "ArgumentsRequired": _REQUEST,
    "NotSupported": Translation(
        ExchangeError, Kind.PERMANENT,
        "This exchange does not offer that through ccxt; use another exchange or another tool.",
    ),
    "BadSymbol": Translation(
        NotFoundError, Kind.PERMANENT,
        "Use a symbol the exchange lists, written BASE/QUOTE (e.g. BTC/USDT).",
    ),
    "MarketClosed": Translation(
        ExchangeError, Kind.PERMANENT,
        "The market is closed for trading now; try another symbol or wait until it reopens.",
    ),
    "OperationRejected": _REQUEST,
    "NoChange": _REQUEST,
    "MarginModeAlreadySet": _REQUEST,
    "ManualInteractionNeeded": Translation(
        ExchangeAccessError, Kind.OPERATIONAL,
        "A person must act on the exchange's website (a confirmation or agreement is pending).",
    ),
    "RestrictedLocation": Translation(
        ExchangeAccessError, Kind.OPERATIONAL,
        "The exchange refuses this region; a person must choose another exchange or set a proxy "
        "in the exchange's settings.",
    ),
    "AuthenticationError": _ACCESS,
    "PermissionDenied": _ACCESS,
    "AccountNotEnabled": _ACCESS,
    "AccountSuspended": Translation(
        ExchangeAccessError, Kind.OPERATIONAL,
        "The exchange account is suspended; a person must contact the exchange.",
    ),
    "InvalidProxySettings": Translation(
        ExchangeAccessError, Kind.OPERATIONAL,
        "Fix the proxy options in the exchange's settings (set only one kind of proxy).",
    ),
    "ExchangeClosedByUser": Translation(
        ExchangeError, Kind.PERMANENT,
        "The exchange connection was closed because Kestrel is stopping or switching venue.",
    ),
    "InsufficientFunds": Translation(
        InsufficientFundsError, Kind.PERMANENT,
        "Check the balance and reduce the quantity.",
    ),
    "InvalidAddress": _REQUEST,
    "AddressPending": _REQUEST,
    "InvalidOrder": _INVALID_ORDER,
    "OrderNotFound": _ORDER_NOT_FOUND,
    "OrderNotCached": _ORDER_NOT_FOUND,
    "OrderImmediatelyFillable": _INVALID_ORDER,
    "OrderNotFillable": _INVALID_ORDER,
    "DuplicateOrderId": Translation(
        InvalidOrderError, Kind.PERMANENT,
        "An order with this client_order_id exists already; look it up instead of resending.",
    ),
    "ContractUnavailable": _INVALID_ORDER,
    "UnsubscribeError": _REQUEST,
}

# What a non-ccxt exception raised *inside* a ccxt call means: ccxt choked on a reply it could
# not parse (a proxy's HTML page, a truncated body), which is a bad response, not a Kestrel bug.
_PARSE_FAILURES = (TypeError, KeyError, IndexError, ValueError, AttributeError)


def is_ccxt_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of ccxt's own exceptions (without importing ccxt)."""
    return any(
        klass.__name__ == "BaseError" and klass.__module__.startswith("ccxt")
        for klass in type(exc).__mro__
    )


def translation_for(exc: BaseException) -> Translation:
    """The table row for a ccxt exception: its own class's, else its nearest ancestor's."""
    for klass in type(exc).__mro__:
        if klass.__module__.startswith("ccxt"):
            found = TRANSLATIONS.get(klass.__name__)
            if found is not None:
                return found
    return _REQUEST


def translate(
    exc: BaseException,
    exchange_id: str,
    *,
    what: str = "request",
    retries: int = 0,
    retry_after_s: float | None = None,
) -> ToolError:
    """The Kestrel error for a ccxt exception (or a parse failure inside a ccxt call).

    Args:
        exc: what ccxt raised.
        exchange_id: named in the message, so an agent and a person know which venue failed.
        what: the operation in words ("fetching BTC/USDT 1h candles").
        retries: how many retries were made before giving up (stated in the message).
        retry_after_s: the wait the exchange asked for, when it said.
    """
    if is_ccxt_error(exc):
        row = translation_for(exc)
        ccxt_class = type(exc).__name__
    elif isinstance(exc, _PARSE_FAILURES):
        row = _BAD_RESPONSE
        ccxt_class = "BadResponse"
    else:
        raise TypeError(f"not a ccxt error: {type(exc).__name__}") from exc
    text = redact(" ".join(str(exc).split())[:300])
    tried = f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""
    wait = f" The exchange asked to wait {retry_after_s:g} s." if retry_after_s else ""
    message = (
        f"{exchange_id}: {what} failed{tried} ({ccxt_class}: {text or 'no detail'}).{wait} "
        f"{row.advice}"
    )
    details: dict[str, Any] = {
        "exchange": exchange_id,
        "error_class": ccxt_class,
        "exchange_message": text,
        "kind": row.kind.value,
        "retries": retries,
    }
    if retry_after_s is not None:
        details["retry_after_s"] = retry_after_s
    error = row.error(message, details=details)
    if isinstance(error, ExchangeRateLimitedError):
        error.retry_after_s = retry_after_s
    return error


# -- retrying reads ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How reads are retried: ``retries`` more attempts, waits doubling from ``base_s``.

    A wait the exchange asks for (Retry-After) replaces the computed one when longer; when it is
    longer than ``max_wait_s`` the read gives up at once instead of stalling the tool call past
    its deadline.
    """

    retries: int = 3
    base_s: float = 0.5
    max_wait_s: float = 10.0

    def backoff_s(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (1-based): base, 2x base, 4x base..."""
        return min(self.base_s * 2.0 ** (attempt - 1), self.max_wait_s)


def retries_for(exc: BaseException, policy: RetryPolicy) -> int:
    """How many retries a read that keeps failing with ``exc`` gets."""
    if is_ccxt_error(exc):
        return policy.retries if translation_for(exc).kind is Kind.TEMPORARY else 0
    return policy.retries if isinstance(exc, _PARSE_FAILURES) else 0


def retry_after_s(headers: Mapping[str, Any] | None, now_s: float | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), if one was sent."""
    if not headers:
        return None
    value = next((v for k, v in headers.items() if str(k).lower() == "retry-after"), None)
    if value is None:
        return None
    text = str(value).strip()
    try:
        return max(float(text), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    now = time.time() if now_s is None else now_s
    return max(when.timestamp() - now, 0.0)


Sleep = Callable[[float], Awaitable[Any]]


async def retry_read[T](
    call: Callable[[], Awaitable[T]],
    exchange_id: str,
    *,
    what: str,
    policy: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen, so one shared default is safe
    response_headers: Callable[[], Mapping[str, Any] | None] = lambda: None,
    sleep: Sleep = asyncio.sleep,
) -> T:
    """Run a read, retrying temporary ccxt failures with backoff; translate what finally fails.

    Args:
        call: makes one attempt (a fresh coroutine each time).
        response_headers: the headers of the response that just failed (ccxt keeps the last
            ones on the exchange); read for Retry-After right after the failure, before
            anything else can run on the loop.
        sleep: injected so tests need not wait.

    Raises:
        ToolError: the translation of the last failure (a ``TemporaryError`` when retries
            ran out, an ``OperationalError`` or a ``ToolError`` otherwise).
    """
    attempt = 0
    while True:
        try:
            return await call()
        except asyncio.CancelledError:
            raise
        except RequestsPausedError as paused:
            # the exchange's gate is closed: a retry before it opens would be refused unsent, so
            # the read waits it out when that is short, and otherwise gives up with its error
            wait_s = paused.retry_after_s or 0.0
            if attempt >= policy.retries or wait_s > policy.max_wait_s:
                raise
            attempt += 1
            wait = max(policy.backoff_s(attempt), wait_s)
            logger.info("%s: %s paused (HTTP %s), retry %d of %d in %.2f s", exchange_id, what,
                        paused.details.get("status"), attempt, policy.retries, wait)
            await sleep(wait)
        except Exception as exc:
            if not (is_ccxt_error(exc) or isinstance(exc, _PARSE_FAILURES)):
                raise
            asked = retry_after_s(response_headers()) if _is_throttle(exc) else None
            allowed = retries_for(exc, policy)
            if attempt >= allowed or (asked is not None and asked > policy.max_wait_s):
                raise translate(
                    exc, exchange_id, what=what, retries=attempt, retry_after_s=asked
                ) from exc
            attempt += 1
            wait = max(policy.backoff_s(attempt), asked or 0.0)
            logger.info(
                "%s: %s failed (%s), retry %d of %d in %.2f s",
                exchange_id, what, type(exc).__name__, attempt, allowed, wait,
            )
            await sleep(wait)


def _is_throttle(exc: BaseException) -> bool:
    """Errors whose response may carry Retry-After (429, 418, 503)."""
    return is_ccxt_error(exc) and translation_for(exc).error in (
        ExchangeRateLimitedError, ExchangeNetworkError,
    )

