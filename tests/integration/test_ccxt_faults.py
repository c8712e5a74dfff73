"""Injected exchange faults: what is retried, what is waited for, what reaches the agent."""

import asyncio
import resource

import pytest

from app.domain.errors import ErrorCode, TemporaryError, ToolError
from tests.helpers.fake_exchange import Fault
from tests.helpers.fake_exchange.broker import AdvancingSleep
from tests.helpers.fake_exchange.client import open_market
from tests.helpers.fake_exchange.server import ENDLESS_CAP_BYTES
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    VENUES,
    fake_exchange_fixture,
    server_fixture,
)


def read_ticker(server, venue, *, timeout_s=5.0, **settings):
    """Open the adapter, read one ticker; return (ticker or error, waits, ticker requests).

    Each retry wait moves the fake time instead of passing (an exchange's pause runs on it).
    ``settings``: other settings of the exchange (``max_response_mib``...)."""
    sleep = AdvancingSleep(server.now)

    async def scenario():
        market = await open_market(server, venue, sleep=sleep, timeout_s=timeout_s,
                                   settings=settings)
        try:
            return await market.ticker("BTC/USDT")
        except ToolError as exc:
            return exc
        finally:
            await market.close()

    outcome = asyncio.run(scenario())
    return outcome, sleep.waits, server.count(venue, "ticker")


@pytest.mark.parametrize("venue", VENUES)
def test_a_429_with_retry_after_is_waited_out_then_the_read_succeeds(server, venue):
    server.fail(venue, "ticker", Fault.status(429, retry_after=4))
    ticker, waits, asked = read_ticker(server, venue)
    assert not isinstance(ticker, ToolError), ticker
    assert asked == 2 and waits == [4.0]


@pytest.mark.parametrize("venue", VENUES)
def test_a_429_that_persists_is_rate_limited_after_the_retries(server, venue):
    """Without Retry-After, each 429 pauses the exchange for the default 5 s: every retry
    waits the pause out (none is sent inside it), and the last refusal says until when."""
    server.fail(venue, "ticker", Fault.status(429), times=None)
    error, waits, asked = read_ticker(server, venue)
    assert isinstance(error, ToolError) and isinstance(error, TemporaryError)
    assert error.code is ErrorCode.RATE_LIMITED
    assert asked == 4 and waits == [5.0, 5.0, 5.0]
    assert error.message.startswith(f"{venue} has rate-limited requests until ")
    assert "(HTTP 429, no Retry-After: Kestrel's default pause, 5 s left)" in error.message


@pytest.mark.parametrize("venue", VENUES)
def test_a_ban_with_a_long_retry_after_gives_up_at_once(server, venue):
    server.fail(venue, "ticker", Fault.status(418, retry_after=300))
    error, waits, asked = read_ticker(server, venue)
    assert error.code is ErrorCode.RATE_LIMITED and error.details["retry_after_s"] == 300
    assert asked == 1 and waits == []


@pytest.mark.parametrize("venue", VENUES)
@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_errors_are_retried_with_backoff_and_then_succeed(server, venue, status):
    server.fail(venue, "ticker", Fault.status(status), times=2)
    ticker, waits, asked = read_ticker(server, venue)
    assert not isinstance(ticker, ToolError), ticker
    assert asked == 3 and waits == [0.5, 1.0]


@pytest.mark.parametrize("venue", VENUES)
def test_malformed_json_is_a_retried_bad_response_never_empty_data(server, venue):
    server.fail(venue, "ticker", Fault.malformed())
    ticker, _, asked = read_ticker(server, venue)
    assert not isinstance(ticker, ToolError), ticker
    assert asked == 2


@pytest.mark.parametrize("venue", VENUES)
def test_malformed_candles_that_persist_are_an_exchange_error_not_an_empty_series(server, venue):
    async def scenario():
        market = await open_market(server, venue, history=10)
        try:
            server.fail(venue, "klines", Fault.malformed(), times=None)
            with pytest.raises(ToolError) as caught:
                await market.series("BTC/USDT", "1h")
            return caught.value
        finally:
            await market.close()

    error = asyncio.run(scenario())
    assert error.code is ErrorCode.EXCHANGE_ERROR and error.details["error_class"] == "BadResponse"
    assert "malformed JSON" in error.message


@pytest.mark.parametrize("venue", VENUES)
def test_latency_within_the_timeout_only_slows_the_read(server, venue):
    server.fail(venue, "ticker", Fault.latency(0.3))
    ticker, waits, asked = read_ticker(server, venue, timeout_s=3)
    assert not isinstance(ticker, ToolError), ticker
    assert asked == 1 and waits == []


@pytest.mark.parametrize("venue", VENUES)
def test_an_exchange_that_hangs_times_out_on_each_try_and_reports_a_timeout(server, venue):
    server.fail(venue, "ticker", Fault.hang(), times=None)
    error, waits, asked = read_ticker(server, venue, timeout_s=0.3)
    assert isinstance(error, ToolError) and error.code is ErrorCode.TIMEOUT
    assert asked == 4 and len(waits) == 3
    assert "raise timeout_s" in error.message


@pytest.mark.parametrize("venue", VENUES)
def test_a_hang_once_then_an_answer_recovers(server, venue):
    server.fail(venue, "ticker", Fault.hang())
    ticker, waits, asked = read_ticker(server, venue, timeout_s=0.3)
    assert not isinstance(ticker, ToolError), ticker
    assert asked == 2 and waits == [0.5]


@pytest.mark.parametrize("venue", VENUES)
def test_failing_to_load_the_markets_at_open_closes_the_exchange_and_says_so(server, venue):
    server.fail(venue, "markets", Fault.status(503), times=None)

    async def scenario():
        with pytest.raises(ToolError) as caught:
            await open_market(server, venue)
        return caught.value

    error = asyncio.run(scenario())
    assert error.message.startswith(f"{venue}: loading the list of markets failed after 3 ")


MIB = 1024 * 1024


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


@pytest.mark.parametrize("venue", VENUES)
def test_an_answer_that_never_ends_is_cut_at_the_size_bound_and_retried_like_a_bad_one(
        server, venue):
    server.fail(venue, "ticker", Fault.endless(), times=None)
    peak_before = _peak_rss_mib()
    error, waits, asked = read_ticker(server, venue, timeout_s=5.0, max_response_mib=1)
    assert isinstance(error, ToolError) and isinstance(error, TemporaryError), error
    assert error.code is ErrorCode.EXCHANGE_ERROR and error.details["error_class"] == "BadResponse"
    assert ("answered with more than 1,048,576 bytes (the limit of one answer: max_response_mib "
            "= 1 in the exchange's settings); the connection was closed") in error.message
    assert asked == 4 and len(waits) == 3
    written = server.endless_written[-asked:]
    assert all(size < ENDLESS_CAP_BYTES for size in written), written  # each read was cut short
    assert _peak_rss_mib() - peak_before < 200, "memory stayed bounded"


@pytest.mark.parametrize("venue", VENUES)
def test_an_answer_declared_longer_than_the_bound_is_refused_before_it_is_read(server, venue):
    server.fail(venue, "ticker", Fault.huge(2 * MIB), times=None)
    error, _, asked = read_ticker(server, venue, max_response_mib=1)
    assert isinstance(error, ToolError) and error.details["error_class"] == "BadResponse", error
    assert "answered with more than 1,048,576 bytes" in error.message
    assert asked == 4


@pytest.mark.parametrize("venue", VENUES)
def test_an_answer_within_the_bound_is_read_as_always(server, venue):
    server.fail(venue, "ticker", Fault.huge(MIB - 1))
    _, _, asked = read_ticker(server, venue, max_response_mib=1)
    assert asked == 1, "read whole, not refused and retried"
