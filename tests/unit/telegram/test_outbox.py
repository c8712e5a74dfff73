"""The outbox: messages go out in order, temporary failures (a dropped connection, a 5xx,
"retry after") are retried until the message is too old, permanent ones are given up at once."""

from __future__ import annotations

import asyncio
import datetime as dtm

import pytest
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TimedOut

from app.telegram.format import Outgoing
from app.telegram.outbox import Outbox, OutboxFull
from app.telegram.request import AnswerTooLarge


class FlakyChat:
    """A send that fails with the given errors first, then records what it sends."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.attempts = 0
        self.delivered: list[tuple[int, str, bool]] = []

    async def send(self, chat_id: int, message: Outgoing, silent: bool) -> int:
        self.attempts += 1
        if self.errors:
            raise self.errors.pop(0)
        self.delivered.append((chat_id, message.text, silent))
        return 1000 + len(self.delivered)


def run(coro) -> None:  # noqa: ANN001 - a test coroutine
    asyncio.run(coro)


# RetryAfter's own constructor warns about its attribute's coming type change
@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
def test_temporary_failures_are_retried_and_order_is_kept() -> None:
    chat = FlakyChat(NetworkError("connection reset"), TimedOut(), RetryAfter(dtm.timedelta(
        seconds=0.01)))

    async def scenario() -> None:
        box = Outbox(chat.send, first_delay_s=0.01, max_delay_s=0.02)
        box.start()
        first = box.put(1, Outgoing("first"), silent=True)
        second = box.put(1, Outgoing("second"))
        assert await first == 1001 and await second == 1002
        assert chat.delivered == [(1, "first", True), (1, "second", False)]
        assert box.failures == 3 and box.dropped == 0
        await box.aclose()

    run(scenario())


@pytest.mark.parametrize("error", [BadRequest("Bad Request: chat not found"),
                                   Forbidden("Forbidden: bot was blocked by the user"),
                                   # the message may have been sent: not sent twice
                                   AnswerTooLarge("Telegram's answer to sendMessage passed 1 MiB"),
                                   ValueError("a bug of ours")])
def test_a_permanent_failure_is_given_up_at_once_and_the_next_goes_out(error: Exception) -> None:
    chat = FlakyChat(error)

    async def scenario() -> None:
        box = Outbox(chat.send, first_delay_s=0.01)
        box.start()
        failed = box.put(1, Outgoing("lost"))
        sent = box.put(2, Outgoing("next"))
        with pytest.raises(type(error)):
            await failed
        assert await sent == 1001 and chat.attempts == 2 and box.dropped == 1
        await box.aclose()

    run(scenario())


def test_a_message_still_unsent_after_max_age_is_dropped() -> None:
    chat = FlakyChat(*[NetworkError("down")] * 50)

    async def scenario() -> None:
        box = Outbox(chat.send, max_age_s=0.1, first_delay_s=0.02, max_delay_s=0.02)
        box.start()
        with pytest.raises(NetworkError):
            await box.put(1, Outgoing("too late"))
        assert 2 <= chat.attempts <= 8 and chat.delivered == []
        await box.aclose()

    run(scenario())


def test_closing_flushes_briefly_then_drops_what_is_left() -> None:
    chat = FlakyChat(*[NetworkError("down")] * 50)

    async def scenario() -> None:
        box = Outbox(chat.send, first_delay_s=10)
        box.start()
        waiting = [box.put(1, Outgoing(str(n))) for n in range(3)]
        await asyncio.sleep(0.05)
        await box.aclose(flush_s=0.05)
        for future in waiting:
            assert future.done()
        assert chat.delivered == []

    run(scenario())


def test_a_full_outbox_refuses_more_instead_of_growing() -> None:
    async def scenario() -> None:
        box = Outbox(FlakyChat().send, maxsize=2)  # not started: nothing drains it
        box.put(1, Outgoing("a"))
        box.put(1, Outgoing("b"))
        with pytest.raises(OutboxFull, match="2 Telegram messages are waiting"):
            box.put(1, Outgoing("c"))

    run(scenario())
