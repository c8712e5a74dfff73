"""An exchange's gate: how long a 418 or a 429 holds requests, what a held request is told,
and who hears that the gate closed. Time is injected; no exchange is involved."""

from __future__ import annotations

import pytest

from app.ccxt.errors import RequestsPausedError
from app.ccxt.gate import Gates, RequestGate
from app.domain.errors import ErrorCode, TemporaryError
from app.events import ExchangeBanned

NOON = 1_770_552_000_000  # 2026-02-08 12:00:00 UTC


class SteppedClock:
    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now


def gate(now_ms: int = NOON) -> tuple[RequestGate, SteppedClock]:
    clock = SteppedClock(now_ms)
    return RequestGate("binance", clock), clock


def test_a_ban_holds_requests_for_its_retry_after_and_says_until_when():
    banned, clock = gate()
    banned.close(418, {"Retry-After": "300"}, '{"msg": "IP banned"}')
    with pytest.raises(RequestsPausedError) as caught:
        banned.check()
    error = caught.value
    assert error.message == ("binance has banned requests until 12:05:00 UTC (HTTP 418, "
                             "Retry-After 300 s); nothing is sent before then.")
    assert isinstance(error, TemporaryError) and error.code is ErrorCode.RATE_LIMITED
    assert error.retry_after_s == 300 and error.details["kind"] == "temporary"
    assert not error.answered
    assert banned.held() == "binance: requests paused until 12:05:00 UTC (ban, HTTP 418)"
    clock.now += 299_500
    with pytest.raises(RequestsPausedError, match="Retry-After 1 s"):  # whole seconds, up
        banned.check()
    clock.now += 500
    banned.check()  # over: requests go
    assert banned.held() is None


@pytest.mark.parametrize(("status", "default_s", "words"), [
    (418, 120, "banned"), (429, 5, "rate-limited")])
def test_without_retry_after_a_default_pause_is_taken_and_said(status, default_s, words):
    paused, clock = gate()
    paused.close(status, {}, "")
    error = paused.refusal()
    assert error is not None and error.retry_after_s == default_s
    assert error.message.startswith(f"binance has {words} requests until ")
    assert f"(HTTP {status}, no Retry-After: Kestrel's default pause, {default_s} s left)" in (
        error.message)
    clock.now += default_s * 1000
    assert paused.refusal() is None


def test_retry_after_as_an_http_date_is_honoured():
    paused, _ = gate()
    paused.close(429, {"retry-after": "Sun, 08 Feb 2026 12:00:30 GMT"})
    assert paused.held() == "binance: requests paused until 12:00:30 UTC (rate limit, HTTP 429)"


def test_a_later_shorter_answer_never_shortens_the_pause():
    paused, _ = gate()
    paused.close(418, {"Retry-After": "600"})
    paused.close(429, {"Retry-After": "5"})  # a request already in flight when it closed
    assert paused.held() == "binance: requests paused until 12:10:00 UTC (ban, HTTP 418)"
    paused.close(418, {"Retry-After": "900"})
    assert paused.held() == "binance: requests paused until 12:15:00 UTC (ban, HTTP 418)"


def test_a_retry_after_of_zero_holds_nothing():
    paused, _ = gate()
    paused.close(429, {"Retry-After": "0"})
    assert not paused.closed and paused.refusal() is None


def test_a_ban_that_ends_another_day_gives_the_date():
    paused, _ = gate()
    paused.close(418, {"Retry-After": str(3 * 86_400)})
    assert paused.held() == (
        "binance: requests paused until 2026-02-11 12:00:00 UTC (ban, HTTP 418)")


def test_the_refusal_of_the_answer_that_closed_the_gate_quotes_the_exchange():
    paused, _ = gate()
    paused.close(418, {"Retry-After": "60"})
    error = paused.refusal(RuntimeError("binance 418 I'm a Teapot  {\"msg\": \"banned\"}"))
    assert error is not None and error.answered and error.details["sent"]
    assert error.message.endswith(
        "nothing is sent before then. The exchange answered: binance 418 I'm a Teapot "
        "{\"msg\": \"banned\"}")
    assert error.details["exchange_message"] == "binance 418 I'm a Teapot {\"msg\": \"banned\"}"


def test_watchers_hear_each_closing_and_lengthening_and_nothing_after_unwatch():
    paused, clock = gate()
    heard: list[ExchangeBanned] = []
    paused.watch(heard.append)
    paused.close(418, {"Retry-After": "120"}, "  banned\n until later ")
    paused.close(418, {"Retry-After": "60"})  # shorter: nothing new to say
    paused.close(418, {"Retry-After": "240"})
    assert [(e.venue, e.until_ms, e.status) for e in heard] == [
        ("binance", NOON + 120_000, 418), ("binance", NOON + 240_000, 418)]
    assert heard[0].reason == "banned until later"
    paused.unwatch(heard.append)
    clock.now += 240_000
    paused.close(429, {"Retry-After": "9"})
    assert len(heard) == 2


def test_one_gate_per_exchange_id_and_a_reset_forgets_every_pause():
    clock = SteppedClock(NOON)
    gates = Gates(clock)
    assert gates.of("binance") is gates.of("binance")
    gates.of("binance").close(418, {"Retry-After": "60"})
    assert gates.of("binance").closed and not gates.of("okx").closed
    gates.reset(clock)
    assert not gates.of("binance").closed
