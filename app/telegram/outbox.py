"""The bot's outgoing messages, sent one at a time, in order, and retried through network drops.

Why a queue: an alert raised while Telegram is unreachable (a dropped Wi-Fi, Telegram's 5xx) must
still arrive once the connection is back, and in the order it happened. Temporary failures
(network errors, timeouts, Telegram's "retry after") are retried with a growing pause, up to
``max_age_s`` after the message was queued; a permanent one (a bad request, a chat the bot may not
write to) is given up at once and logged. Nobody waits on the queue: each message has a future
the sender may await (the Notifier port does, briefly, to report a delivery status).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from telegram.error import BadRequest, NetworkError, RetryAfter
from telegram.warnings import PTBDeprecationWarning

from app.telegram.format import Outgoing

logger = logging.getLogger(__name__)

Send = Callable[[int, Outgoing, bool], Awaitable[int]]
OnSent = Callable[[int, int], None]


@dataclass(slots=True)
class _Item:
    chat_id: int
    call: Callable[[], Awaitable[int]]
    what: str
    queued_s: float
    sent: asyncio.Future[int]
    on_sent: OnSent | None


class OutboxFull(Exception):
    """More messages are waiting than the outbox keeps; this one was not queued."""


class Outbox:
    """Sends queued messages through ``send(chat_id, message, silent) -> message id``.

    Args:
        max_age_s: a message still unsent this long after it was queued is dropped (logged).
        first_delay_s / max_delay_s: the pause after the first failure, doubling up to the max.
    """

    def __init__(
        self,
        send: Send,
        *,
        max_age_s: float = 3600.0,
        first_delay_s: float = 1.0,
        max_delay_s: float = 30.0,
        maxsize: int = 1000,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self.max_age_s = max_age_s
        self.first_delay_s = first_delay_s
        self.max_delay_s = max_delay_s
        self._now = now
        self._queue: asyncio.Queue[_Item] = asyncio.Queue(maxsize)
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.failures = 0  # temporary failures seen (a dropped connection, a 5xx)
        self.dropped = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="telegram-outbox")

    def put(
        self, chat_id: int, message: Outgoing, *, silent: bool = False,
        on_sent: OnSent | None = None,
    ) -> asyncio.Future[int]:
        """Queue ``message``; the future holds its message id once sent (or the error).

        Raises:
            OutboxFull: too many messages wait already (Telegram has been down for long).
        """
        async def call() -> int:
            return await self._send(chat_id, message, silent)

        return self.put_call(chat_id, call, "a message", on_sent=on_sent)

    def put_call(
        self, chat_id: int, call: Callable[[], Awaitable[int]], what: str, *,
        on_sent: OnSent | None = None,
    ) -> asyncio.Future[int]:
        """Queue any other request about a chat (an edit), retried like a message.

        Raises:
            OutboxFull: too many messages wait already.
        """
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        item = _Item(chat_id, call, what, self._now(), future, on_sent)
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1
            raise OutboxFull(f"{self._queue.qsize()} Telegram messages are waiting to be sent; "
                             "this one was dropped") from None
        return future

    def waiting(self) -> int:
        return self._queue.qsize()

    async def aclose(self, flush_s: float = 2.0) -> None:
        """Give queued messages ``flush_s`` to go out, then stop; what is left is dropped."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(flush_s):
                await self._queue.join()
        self._stopping.set()
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        while not self._queue.empty():
            item = self._queue.get_nowait()
            self._give_up(item, ConnectionError("Kestrel closed before it could be sent"))

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self._deliver(item)
            except asyncio.CancelledError:
                self._give_up(item, ConnectionError("Kestrel closed before it could be sent"))
                raise
            finally:
                self._queue.task_done()

    async def _deliver(self, item: _Item) -> None:
        delay = self.first_delay_s
        while True:
            try:
                message_id = await item.call()
            except Exception as exc:  # noqa: BLE001 - classified below; nothing is lost silently
                wait = self._retry_in(exc, delay)
                if wait is None or self._now() + wait - item.queued_s > self.max_age_s:
                    self._give_up(item, exc)
                    return
                self.failures += 1
                logger.info("Telegram: sending %s failed (%s); retrying in %.1f s", item.what, exc,
                            wait)
                if await self._stopped_within(wait):
                    self._give_up(item, exc)
                    return
                delay = min(self.max_delay_s, delay * 2)
                continue
            if item.on_sent is not None:
                try:
                    item.on_sent(item.chat_id, message_id)
                except Exception:  # a bookkeeping bug must not stop the outbox
                    logger.exception("Telegram: after sending a message")
            if not item.sent.done():
                item.sent.set_result(message_id)
            return

    def _retry_in(self, exc: Exception, delay: float) -> float | None:
        if isinstance(exc, RetryAfter):
            with warnings.catch_warnings():  # its type changes in the next major version
                warnings.simplefilter("ignore", PTBDeprecationWarning)
                after = exc.retry_after
            return after if isinstance(after, int | float) else after.total_seconds()
        if isinstance(exc, BadRequest):  # a subclass of NetworkError, but permanent
            return None
        if isinstance(exc, NetworkError | OSError):  # TimedOut, 5xx, a dropped connection
            return delay
        return None

    async def _stopped_within(self, seconds: float) -> bool:
        try:
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        except TimeoutError:
            return False
        return True

    def _give_up(self, item: _Item, exc: BaseException) -> None:
        self.dropped += 1
        logger.warning("Telegram: %s to chat %s was not sent: %s: %s",
                       item.what, item.chat_id, type(exc).__name__, exc)
        if not item.sent.done():
            item.sent.set_exception(exc)
            item.sent.exception()  # retrieved here: nobody may be awaiting it
