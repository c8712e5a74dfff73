"""with_retries: only temporary errors are retried, with capped backoff, jitter and Retry-After."""

from __future__ import annotations

import asyncio

import pytest

from app.agents.llm.port import PermanentLLMError, TemporaryLLMError
from app.agents.llm.retry import (
    ThrottledLLMError,
    backoff_delay,
    parse_retry_after,
    with_retries,
)


class Script:
    """A call that fails with the given errors, then returns "ok"; counts its calls."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class Sleeps:
    def __init__(self) -> None:
        self.pauses: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)


def run(call: Script, sleeps: Sleeps, **kwargs: object) -> str:
    options = {"attempts": 4, "base_delay_s": 1.0, "max_delay_s": 8.0, "sleep": sleeps,
               "jitter": lambda: 1.0, **kwargs}
    return asyncio.run(with_retries(call, **options))  # type: ignore[arg-type]


def test_temporary_errors_are_retried_until_success_with_doubling_pauses() -> None:
    call, sleeps = Script(TemporaryLLMError("p", "503"), TemporaryLLMError("p", "503")), Sleeps()
    assert run(call, sleeps) == "ok"
    assert call.calls == 3
    assert sleeps.pauses == [1.0, 2.0]


def test_pauses_are_capped_at_the_maximum_delay() -> None:
    assert backoff_delay(10, base_delay_s=1.0, max_delay_s=8.0, jitter=lambda: 1.0) == 8.0


def test_jitter_keeps_at_least_half_of_each_step() -> None:
    assert backoff_delay(3, base_delay_s=1.0, max_delay_s=60.0, jitter=lambda: 0.0) == 2.0
    assert backoff_delay(3, base_delay_s=1.0, max_delay_s=60.0, jitter=lambda: 0.5) == 3.0


def test_permanent_error_is_raised_at_once_without_retry() -> None:
    call, sleeps = Script(PermanentLLMError("p", "bad key")), Sleeps()
    with pytest.raises(PermanentLLMError, match="bad key"):
        run(call, sleeps)
    assert call.calls == 1
    assert sleeps.pauses == []


def test_last_temporary_error_is_raised_after_all_attempts_and_says_how_many() -> None:
    call, sleeps = Script(*[TemporaryLLMError("p", "overloaded") for _ in range(4)]), Sleeps()
    with pytest.raises(TemporaryLLMError, match=r"overloaded \(gave up after 4 attempts\)") as info:
        run(call, sleeps)
    assert call.calls == 4
    assert info.value.provider == "p"
    assert len(sleeps.pauses) == 3


def test_a_single_attempt_raises_the_original_error_unchanged() -> None:
    error = TemporaryLLMError("p", "timeout")
    with pytest.raises(TemporaryLLMError) as info:
        run(Script(error), Sleeps(), attempts=1)
    assert info.value is error


def test_retry_after_hint_is_waited_when_longer_than_the_backoff() -> None:
    call, sleeps = Script(ThrottledLLMError("p", "429", retry_after_s=5.0)), Sleeps()
    assert run(call, sleeps) == "ok"
    assert sleeps.pauses == [5.0]


def test_retry_after_beyond_the_limit_is_not_waited_for() -> None:
    call, sleeps = Script(ThrottledLLMError("p", "quota", retry_after_s=3600)), Sleeps()
    with pytest.raises(ThrottledLLMError, match="asked to wait 3600 s") as info:
        run(call, sleeps, max_retry_after_s=60)
    assert info.value.retry_after_s == 3600
    assert call.calls == 1
    assert sleeps.pauses == []


def test_cancellation_is_never_swallowed_or_retried() -> None:
    call, sleeps = Script(asyncio.CancelledError()), Sleeps()
    with pytest.raises(asyncio.CancelledError):
        run(call, sleeps)
    assert call.calls == 1


def test_cancelling_during_the_pause_stops_the_retries() -> None:
    async def scenario() -> int:
        call = Script(*[TemporaryLLMError("p", "503") for _ in range(3)])
        task = asyncio.create_task(with_retries(
            call, attempts=4, base_delay_s=10.0, max_delay_s=10.0, jitter=lambda: 0.0))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return call.calls

    assert asyncio.run(scenario()) == 1


def test_on_retry_is_told_each_attempt_and_pause() -> None:
    seen: list[tuple[int, float]] = []
    call = Script(TemporaryLLMError("p", "a"), TemporaryLLMError("p", "b"))
    run(call, Sleeps(), on_retry=lambda n, _e, pause: seen.append((n, pause)))
    assert seen == [(1, 1.0), (2, 2.0)]


def test_other_exceptions_propagate_unchanged() -> None:
    call = Script(ValueError("a bug"))
    with pytest.raises(ValueError, match="a bug"):
        run(call, Sleeps())
    assert call.calls == 1


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_retry_after_header_is_read_in_seconds(headers: dict[str, str] | None,
                                               expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        run(Script(), Sleeps(), attempts=0)
