"""Every ccxt exception becomes the right Kestrel error after the right number of read retries."""

import asyncio
import inspect

import pytest
from ccxt.base import errors as ccxt_errors

from app.ccxt import errors
from app.ccxt.errors import (
    RequestsPausedError,
    RetryPolicy,
    retry_after_s,
    retry_read,
    translate,
)
from app.domain.errors import (
    ErrorCode,
    InsufficientFundsError,
    InvalidOrderError,
    NotFoundError,
    OperationalError,
    TemporaryError,
    ToolError,
)

CCXT_CLASSES = sorted(
    (name for name, klass in inspect.getmembers(ccxt_errors, inspect.isclass)
     if issubclass(klass, ccxt_errors.BaseError)),
)
R = RetryPolicy().retries
TEMP, OPER, PERM = "temporary", "operational", "permanent"

# Written out independently of the table under test: (code, kind, retries).
EXPECTED = {
    "BaseError": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "ExchangeError": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "AuthenticationError": (ErrorCode.EXCHANGE_ERROR, OPER, 0),
    "PermissionDenied": (ErrorCode.EXCHANGE_ERROR, OPER, 0),
    "AccountNotEnabled": (ErrorCode.EXCHANGE_ERROR, OPER, 0),
    "AccountSuspended": (ErrorCode.EXCHANGE_ERROR, OPER, 0),
    "ArgumentsRequired": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "BadRequest": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "BadSymbol": (ErrorCode.NOT_FOUND, PERM, 0),
    "OperationRejected": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "NoChange": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "MarginModeAlreadySet": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "MarketClosed": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "ManualInteractionNeeded": (ErrorCode.EXCHANGE_ERROR, OPER, 0),
    "RestrictedLocation": (ErrorCode.EXCHANGE_ERROR, OPER, 0),
    "InsufficientFunds": (ErrorCode.INSUFFICIENT_FUNDS, PERM, 0),
    "InvalidAddress": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "AddressPending": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "InvalidOrder": (ErrorCode.INVALID_ORDER, PERM, 0),
    "OrderNotFound": (ErrorCode.NOT_FOUND, PERM, 0),
    "OrderNotCached": (ErrorCode.NOT_FOUND, PERM, 0),
    "OrderImmediatelyFillable": (ErrorCode.INVALID_ORDER, PERM, 0),
    "OrderNotFillable": (ErrorCode.INVALID_ORDER, PERM, 0),
    "DuplicateOrderId": (ErrorCode.INVALID_ORDER, PERM, 0),
    "ContractUnavailable": (ErrorCode.INVALID_ORDER, PERM, 0),
    "NotSupported": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "InvalidProxySettings": (ErrorCode.EXCHANGE_ERROR, OPER, 0),
    "ExchangeClosedByUser": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
    "OperationFailed": (ErrorCode.NETWORK_ERROR, TEMP, R),
    "NetworkError": (ErrorCode.NETWORK_ERROR, TEMP, R),
    "DDoSProtection": (ErrorCode.RATE_LIMITED, TEMP, R),
    "RateLimitExceeded": (ErrorCode.RATE_LIMITED, TEMP, R),
    "ExchangeNotAvailable": (ErrorCode.NETWORK_ERROR, TEMP, R),
    "OnMaintenance": (ErrorCode.NETWORK_ERROR, TEMP, R),
    "InvalidNonce": (ErrorCode.NETWORK_ERROR, TEMP, R),
    "ChecksumError": (ErrorCode.NETWORK_ERROR, TEMP, R),
    "RequestTimeout": (ErrorCode.TIMEOUT, TEMP, R),
    "BadResponse": (ErrorCode.EXCHANGE_ERROR, TEMP, R),
    "NullResponse": (ErrorCode.EXCHANGE_ERROR, TEMP, R),
    "CancelPending": (ErrorCode.EXCHANGE_ERROR, TEMP, R),
    "UnsubscribeError": (ErrorCode.EXCHANGE_ERROR, PERM, 0),
}


def test_every_ccxt_exception_class_has_its_own_row_and_an_expectation():
    assert len(CCXT_CLASSES) >= 40
    assert set(CCXT_CLASSES) == set(errors.TRANSLATIONS)
    assert set(CCXT_CLASSES) == set(EXPECTED)


def test_each_rows_kind_agrees_with_the_kestrel_class_it_raises():
    for name, row in errors.TRANSLATIONS.items():
        assert issubclass(row.error, TemporaryError) is (row.kind is errors.Kind.TEMPORARY), name
        assert issubclass(row.error, OperationalError) is (
            row.kind is errors.Kind.OPERATIONAL), name


def test_rate_limit_exceeded_is_not_a_ddos_protection_in_this_ccxt():
    """Why both have a row: mapping DDoSProtection alone would miss RateLimitExceeded."""
    assert not issubclass(ccxt_errors.RateLimitExceeded, ccxt_errors.DDoSProtection)


@pytest.mark.parametrize("name", CCXT_CLASSES)
def test_a_read_failing_with_each_ccxt_error_is_retried_and_translated(name):
    code, kind, retries = EXPECTED[name]
    klass = getattr(ccxt_errors, name)
    calls, waits = [], []

    async def failing():
        calls.append(1)
        raise klass(f"binance GET /api/v3/klines {name} happened")

    async def sleep(seconds):
        waits.append(seconds)

    async def scenario():
        with pytest.raises(ToolError) as caught:
            await retry_read(failing, "binance", what="fetching BTC/USDT 1h candles", sleep=sleep)
        return caught.value

    error = asyncio.run(scenario())
    assert len(calls) == 1 + retries
    assert waits == [RetryPolicy().backoff_s(i) for i in range(1, retries + 1)]
    assert error.code is code
    assert isinstance(error, TemporaryError) is (kind == TEMP)
    assert isinstance(error, OperationalError) is (kind == OPER)
    assert error.details["exchange"] == "binance"
    assert error.details["error_class"] == name
    assert error.details["retries"] == retries
    assert error.message.startswith("binance: fetching BTC/USDT 1h candles failed")
    assert error.__cause__ is not None  # the ccxt exception stays attached for the log


def test_mapped_kestrel_types_for_orders_and_symbols():
    assert isinstance(translate(ccxt_errors.BadSymbol("x"), "okx"), NotFoundError)
    assert isinstance(translate(ccxt_errors.InsufficientFunds("x"), "okx"),
                      InsufficientFundsError)
    assert isinstance(translate(ccxt_errors.InvalidOrder("x"), "okx"), InvalidOrderError)


def test_a_class_ccxt_adds_later_falls_back_to_its_parents_row():
    class BrandNewThrottle(ccxt_errors.RateLimitExceeded):
        pass

    error = translate(BrandNewThrottle("slow down"), "kraken")
    assert error.code is ErrorCode.RATE_LIMITED and isinstance(error, TemporaryError)


def test_a_retry_after_the_exchange_sends_is_honoured_when_longer_than_the_backoff():
    waits = []
    attempts = iter([ccxt_errors.RateLimitExceeded("429"), None])

    async def call():
        exc = next(attempts)
        if exc is not None:
            raise exc
        return "ok"

    async def sleep(seconds):
        waits.append(seconds)

    result = asyncio.run(retry_read(call, "okx", what="x", sleep=sleep,
                                    response_headers=lambda: {"Retry-After": "7"}))
    assert result == "ok" and waits == [7.0]


def test_a_retry_after_longer_than_the_cap_gives_up_at_once_and_says_how_long():
    calls = []

    async def call():
        calls.append(1)
        raise ccxt_errors.DDoSProtection("418 banned")

    async def sleep(seconds):
        raise AssertionError("must not wait")

    async def scenario():
        with pytest.raises(ToolError) as caught:
            await retry_read(call, "binance", what="x", sleep=sleep,
                             response_headers=lambda: {"retry-after": "120"})
        return caught.value

    error = asyncio.run(scenario())
    assert calls == [1]
    assert error.code is ErrorCode.RATE_LIMITED
    assert error.details["retry_after_s"] == 120.0 and error.retry_after_s == 120.0
    assert "asked to wait 120 s" in error.message


def test_retry_after_accepts_seconds_and_http_dates():
    assert retry_after_s({"Retry-After": "3"}) == 3.0
    assert retry_after_s({"Retry-After": "Wed, 21 Oct 2015 07:28:05 GMT"},
                         now_s=1445412480.0) == 5.0
    assert retry_after_s({"Retry-After": "soon"}) is None
    assert retry_after_s(None) is None


def test_a_reply_ccxt_could_not_parse_is_a_retried_bad_response():
    calls = []

    async def call():
        calls.append(1)
        raise TypeError("'NoneType' object is not subscriptable")

    async def sleep(seconds):
        pass

    async def scenario():
        with pytest.raises(ToolError) as caught:
            await retry_read(call, "okx", what="x", sleep=sleep)
        return caught.value

    error = asyncio.run(scenario())
    assert len(calls) == 1 + R
    assert error.details["error_class"] == "BadResponse"


def test_errors_that_are_not_from_ccxt_pass_through_untouched_and_unretried():
    calls = []

    async def call():
        calls.append(1)
        raise RuntimeError("a bug of ours")

    with pytest.raises(RuntimeError, match="a bug of ours"):
        asyncio.run(retry_read(call, "okx", what="x"))
    assert calls == [1]


def test_cancellation_is_never_retried_or_swallowed():
    async def call():
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(retry_read(call, "okx", what="x"))


def test_a_refusal_quoting_the_api_key_is_redacted_where_it_enters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gateway that quotes the key it refused: the message goes to the order journal, the
    agent and the logs, so the key is gone from it (and from its details) from the start."""
    from app.redaction import MARKER, Redactor

    redactor = Redactor()
    key = "QwErTyUiOpAsDfGhJkLzXcVbNm"
    redactor.add_secret(key)
    monkeypatch.setattr("app.redaction.REDACTOR", redactor)
    refused = ccxt_errors.AuthenticationError(
        f'binance {{"code": -2015, "msg": "Invalid API-key {key}, IP, or permissions"}}')
    error = translate(refused, "binance", what="placing the order")
    assert key not in error.message and key[:8] not in error.message
    assert MARKER in error.message and "Invalid API-key" in error.message
    assert key not in error.details["exchange_message"]


def paused(retry_after_s: float) -> RequestsPausedError:
    error = RequestsPausedError("binance has banned requests until ...", details={"status": 418})
    error.retry_after_s = retry_after_s
    return error


def test_a_read_held_by_a_long_pause_gives_up_at_once_with_the_gates_error():
    calls = []

    async def call():
        calls.append(1)
        raise paused(120.0)

    async def sleep(seconds):
        raise AssertionError("a retry inside the pause would only be refused")

    with pytest.raises(RequestsPausedError, match="banned requests until"):
        asyncio.run(retry_read(call, "binance", what="x", sleep=sleep))
    assert calls == [1]


def test_a_read_held_by_a_short_pause_waits_it_out_then_retries():
    waits = []
    attempts = iter([paused(4.0), None])

    async def call():
        exc = next(attempts)
        if exc is not None:
            raise exc
        return "ok"

    async def sleep(seconds):
        waits.append(seconds)

    assert asyncio.run(retry_read(call, "binance", what="x", sleep=sleep)) == "ok"
    assert waits == [4.0]
