"""The shared limiter of a provider endpoint: one Retry-After holds every caller, in-flight bounds,
one limiter per endpoint and loop, and the default concurrency by server.

The clock is a fake advanced by the fake sleep, so holds are checked by what was waited, not by
how long a test took.
"""

from __future__ import annotations

import asyncio

import pytest

from app.agents.llm.limits import (
    HOSTED_CONCURRENCY,
    LOCAL_CONCURRENCY,
    ProviderLimiter,
    default_concurrency,
    endpoint_key,
    is_local_server,
    shared_limiter,
)
from app.agents.llm.port import PermanentLLMError
from app.agents.llm.retry import ThrottledLLMError, with_retries


class FakeTime:
    """A monotonic clock that moves only when something sleeps; the sleeps are kept."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def test_a_hold_makes_every_later_request_wait_it_out() -> None:
    time = FakeTime()
    limiter = ProviderLimiter(clock=time.clock, sleep=time.sleep)

    async def scenario() -> list[float]:
        limiter.hold_off(2.5)
        sent = []
        for _ in range(3):
            async with limiter.slot():
                sent.append(time.now)
        return sent

    assert asyncio.run(scenario()) == [102.5, 102.5, 102.5]
    assert time.slept == [2.5]  # the first waited the hold out; the others found it passed
    assert limiter.holds == 1 and limiter.waiting_s() == 0.0


def test_a_shorter_hold_does_not_shorten_a_longer_one() -> None:
    time = FakeTime()
    limiter = ProviderLimiter(clock=time.clock, sleep=time.sleep)
    limiter.hold_off(5.0)
    limiter.hold_off(1.0)
    limiter.hold_off(0.0)
    assert limiter.waiting_s() == 5.0 and limiter.holds == 1


def test_a_hold_set_while_a_request_waits_is_waited_out_too() -> None:
    time = FakeTime()
    limiter = ProviderLimiter(clock=time.clock, sleep=time.sleep)

    async def scenario() -> float:
        limiter.hold_off(1.0)

        async def another_caller_learns_more() -> None:
            limiter.hold_off(3.0)  # runs while the slot waits, at 101.0: until 104.0

        task = asyncio.create_task(another_caller_learns_more())
        async with limiter.slot():
            sent = time.now
        await task
        return sent

    assert asyncio.run(scenario()) == 104.0


def test_requests_in_flight_are_bounded() -> None:
    limiter = ProviderLimiter(max_in_flight=2)
    most = 0

    async def call() -> None:
        nonlocal most
        async with limiter.slot():
            most = max(most, limiter.in_flight)
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        await asyncio.gather(*(call() for _ in range(6)))

    asyncio.run(scenario())
    assert most == 2 and limiter.in_flight == 0


def test_a_retry_after_one_caller_gets_holds_the_other_callers() -> None:
    time = FakeTime()
    limiter = ProviderLimiter(clock=time.clock, sleep=time.sleep)
    sent: list[tuple[str, float]] = []
    throttled = [ThrottledLLMError("p", "429", retry_after_s=4.0)]

    async def window(name: str) -> str:
        async def call() -> str:
            sent.append((name, time.now))
            if name == "A" and throttled:
                raise throttled.pop()
            return name

        return await with_retries(call, attempts=3, base_delay_s=0.5, max_delay_s=1.0,
                                  sleep=time.sleep, jitter=lambda: 0.0, limiter=limiter)

    async def scenario() -> None:
        assert await window("A") == "A"  # throttled once: the hold starts at 100.0
        assert await asyncio.gather(window("B"), window("C")) == ["B", "C"]

    asyncio.run(scenario())
    assert sent[0] == ("A", 100.0)
    # B and C, which were never throttled themselves, waited for the hold A was given
    assert all(at >= 104.0 for _name, at in sent[1:]), sent
    assert limiter.holds == 1


def test_without_a_limiter_a_retry_after_holds_only_the_caller_that_got_it() -> None:
    time = FakeTime()
    throttled = [ThrottledLLMError("p", "429", retry_after_s=4.0)]

    async def call() -> str:
        if throttled:
            raise throttled.pop()
        return "ok"

    assert asyncio.run(with_retries(call, attempts=2, base_delay_s=0.5, max_delay_s=1.0,
                                    sleep=time.sleep, jitter=lambda: 0.0)) == "ok"
    assert time.slept == [4.0]


def test_a_retry_after_past_the_longest_wait_holds_nobody() -> None:
    time = FakeTime()
    limiter = ProviderLimiter(clock=time.clock, sleep=time.sleep)

    async def call() -> str:
        raise ThrottledLLMError("p", "429", retry_after_s=3600.0)

    with pytest.raises(ThrottledLLMError):
        asyncio.run(with_retries(call, attempts=3, base_delay_s=0.5, max_delay_s=1.0,
                                 sleep=time.sleep, limiter=limiter, max_retry_after_s=120.0))
    assert limiter.holds == 0 and limiter.waiting_s() == 0.0


def test_a_permanent_error_sets_no_hold() -> None:
    limiter = ProviderLimiter()

    async def call() -> str:
        raise PermanentLLMError("p", "401")

    with pytest.raises(PermanentLLMError):
        asyncio.run(with_retries(call, attempts=3, base_delay_s=0, max_delay_s=0,
                                 limiter=limiter))
    assert limiter.holds == 0 and limiter.in_flight == 0


def test_one_limiter_per_endpoint_and_key_on_a_loop() -> None:
    async def scenario() -> None:
        url = "https://api.example.com/v1"
        one = shared_limiter("openai-compatible", url, "key-1")
        assert shared_limiter("openai-compatible", url + "/", "key-1") is one
        assert shared_limiter("openai-compatible", url, "key-2") is not one
        assert shared_limiter("anthropic", url, "key-1") is not one
        assert shared_limiter("openai-compatible", "http://127.0.0.1:1234/v1", "key-1") is not one

    asyncio.run(scenario())

    async def another_loop() -> ProviderLimiter:
        return shared_limiter("openai-compatible", "https://api.example.com/v1", "key-1")

    # a new event loop gets its own (nothing waits on a loop that is not running it)
    assert asyncio.run(another_loop()) is not asyncio.run(another_loop())


def test_the_endpoint_key_keeps_no_api_key() -> None:
    key = endpoint_key("openai-compatible", "https://api.example.com/v1", "sk-secret-value-123")
    assert "sk-secret" not in key and "secret-value" not in key


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:11434/v1", "http://localhost:1234/v1", "http://[::1]:8080/v1",
    "http://192.168.1.20:8000/v1", "http://10.0.0.5/v1", "http://gpu-box.local:5000/v1",
    "http://models.example.com:11434/v1", "http://host.docker.internal:1234/v1",
])
def test_local_servers_are_recognised(url: str) -> None:
    assert is_local_server(url)
    assert default_concurrency("openai-compatible", url) == LOCAL_CONCURRENCY


@pytest.mark.parametrize("url", [
    "https://api.openai.com/v1", "https://api.anthropic.com", "https://openrouter.ai/api/v1",
    "https://api.deepseek.com/v1",
])
def test_hosted_apis_get_more_at_once(url: str) -> None:
    assert not is_local_server(url)
    assert default_concurrency("openai-compatible", url) == HOSTED_CONCURRENCY


def test_no_server_means_no_limit_and_no_url_means_the_hosted_default() -> None:
    assert default_concurrency("rule-engine", None) is None
    assert default_concurrency("replay", "") is None
    assert default_concurrency("openai-compatible", None) == HOSTED_CONCURRENCY
    assert default_concurrency("anthropic", "") == HOSTED_CONCURRENCY
