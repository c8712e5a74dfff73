"""The Telegram bot's lifecycle and its gate, inside the app's own running event loop.

python-telegram-bot's ``Application`` is driven by hand, never by ``run_polling`` (which would
start and own a loop): ``initialize``, ``updater.start_polling(drop_pending_updates=True)``,
``start``; and on close the reverse. Connecting runs in the background and is retried while
Telegram is unreachable, so the window or ``kestrel run`` never waits on the network. States:
READY -> CONNECTING -> RUNNING -> STOPPED, or FAULTED (the token was refused) with the reason.

Every update passes the gate first (group -1): a sender who is not an allowed user in an allowed
chat is refused, logged and never answered, a message older than the bot's start is dropped,
not executed, and a text longer than Telegram's own limit (which only a server other than
Telegram can send) is not read. Every request to the Bot API is bounded by size and by time
(``app.telegram.request``). What an admitted update does is ``app.telegram.handlers``'; what the
bot says by itself is ``app.telegram.alerts``'. Every outgoing text is redacted, then queued on
the outbox, which retries through network drops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from telegram import (
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Update,
)
from telegram.constants import ChatAction
from telegram.error import InvalidToken, TelegramError
from telegram.ext import (
    Application,
    ApplicationHandlerStop,
    ContextTypes,
    TypeHandler,
)

from app.config.telegram import TelegramSettings
from app.domain.agents import Channel
from app.events import ConversationMessageAdded, QuestionAnswered
from app.orchestration.notify import Notifier, UnconfiguredNotifier
from app.redaction import redact
from app.telegram import format as fmt
from app.telegram.alerts import Alerts
from app.telegram.auth import Gatekeeper, Sender
from app.telegram.commands import BotCommands, KillSwitch
from app.telegram.handlers import UpdateHandlers
from app.telegram.notifier import Poster, TelegramNotifier
from app.telegram.outbox import Outbox
from app.telegram.request import BoundedRequest, RequestBounds

if TYPE_CHECKING:
    from app.runtime.world import World

logger = logging.getLogger(__name__)

POLL_TIMEOUT_S = 30.0
STALE_GRACE_S = 30.0  # a message dated this long before the start is from while Kestrel was closed
CONNECT_FIRST_DELAY_S = 2.0
CONNECT_MAX_DELAY_S = 60.0
ALLOWED_UPDATES = ("message", "callback_query")
MAX_MESSAGE_CHARS = 4096  # Telegram's own limit of a text message
SENDER_TEXT_CHARS = 200  # what a refusal keeps of the text, for the log and /status

Context = ContextTypes.DEFAULT_TYPE


class BotState(StrEnum):
    READY = "ready"
    CONNECTING = "connecting"
    RUNNING = "running"
    STOPPED = "stopped"
    FAULTED = "faulted"


def _sender(update: Update) -> Sender:
    user, chat = update.effective_user, update.effective_chat
    what = ""
    if update.callback_query is not None:
        what = f"button {update.callback_query.data!r}"
    elif update.effective_message is not None:
        what = update.effective_message.text or "(not text)"
    return Sender(
        user.id if user is not None else None, chat.id if chat is not None else None,
        (user.username or "") if user is not None else "", what[:SENDER_TEXT_CHARS],
    )


def _markup(message: fmt.Outgoing) -> InlineKeyboardMarkup | None:
    if not message.buttons:
        return None
    return InlineKeyboardMarkup([
        [InlineKeyboardButton(redact(b.label), callback_data=b.data) for b in row]
        for row in message.buttons
    ])


class TelegramBot:
    """The bot over one runtime; build with ``start_telegram``, close with ``aclose``.

    Args:
        token: the bot token (from the keyring).
        kill_switch: what ``/kill`` trips; without one, ``/kill`` says it is not available.
        poll_timeout_s: how long one getUpdates waits for news (Telegram's long poll).
        now_s: the wall clock (seconds), for expiring buttons and dropping stale messages.
        request_bounds: the size and time bounds of every request to the Bot API.
    """

    def __init__(
        self,
        runtime: World,
        settings: TelegramSettings,
        token: str,
        *,
        kill_switch: KillSwitch | None = None,
        poll_timeout_s: float = POLL_TIMEOUT_S,
        now_s: Callable[[], float] = time.time,
        outbox: Callable[[Callable[..., Awaitable[int]]], Outbox] = Outbox,
        request_bounds: RequestBounds | None = None,
    ) -> None:
        self.rt = runtime
        self.settings = settings
        self.poll_timeout_s = poll_timeout_s
        self.request_bounds = request_bounds or RequestBounds()
        self._now = now_s
        self.state = BotState.READY
        self.fault_reason: str | None = None
        self.started_s: float | None = None
        self.poll_errors = 0
        self._last_poll_warning = 0.0
        self.gate = Gatekeeper(settings.allowed_user_ids, settings.allowed_chat_ids, redact)
        self.commands = BotCommands(
            runtime, kill_switch=kill_switch, refused=lambda: self.gate.refused_count)
        self.outbox = outbox(self._send)
        self.poster = Poster(self.outbox, settings.notify, settings.notify_chats())
        self.notifier = TelegramNotifier(self.poster, self.commands.name)
        self.handlers = UpdateHandlers(
            self.commands, settings, reply=self.reply, edit=self._edit,
            post_question=lambda question, chats: self.alerts.post_question(
                question, chats=chats),
            typing=self._typing, now_s=now_s,
        )
        self.alerts = Alerts(
            runtime, self.commands, self.poster, expiry_s=settings.approval_expiry_s,
            question_sent=self.handlers.question_sent,
            conversation_task=self.handlers.is_conversation,
        )
        self.app = self._build(token)
        self._previous_notifier: Notifier | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()

    # -- building ----------------------------------------------------------------------------

    def _build(self, token: str) -> Application:
        bounds = self.request_bounds
        builder = (Application.builder().token(token)
                   .request(BoundedRequest(bounds))
                   .get_updates_request(BoundedRequest(bounds, connection_pool_size=1)))
        base = self.settings.api_base_url.rstrip("/")
        if base:
            builder = builder.base_url(f"{base}/bot").base_file_url(f"{base}/file/bot")
        app = builder.build()
        app.add_handler(TypeHandler(Update, self._gate), group=-1)
        self.handlers.register(app)
        return app

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen to the runtime and begin connecting (in the background; retried)."""
        if self.state is not BotState.READY:
            raise RuntimeError(f"the Telegram bot cannot start when it is {self.state}")
        self.state = BotState.CONNECTING
        bus = self.rt.bus
        self.alerts.attach(bus)
        bus.subscribe(ConversationMessageAdded, self.handlers.conversation_message)
        bus.subscribe(QuestionAnswered, self.handlers.question_answered)
        self._previous_notifier = self.rt.agents.notifications.use(self.notifier)
        self._connecting = asyncio.get_running_loop().create_task(
            self._connect(), name="telegram-connect")

    async def wait_connected(self, timeout_s: float) -> bool:
        """True once polling runs (False after ``timeout_s``, or when the token was refused)."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._connected.wait()
        except TimeoutError:
            return False
        return self.state is BotState.RUNNING

    async def _connect(self) -> None:
        delay = CONNECT_FIRST_DELAY_S
        while True:
            try:
                await self.app.initialize()
                self.outbox.start()
                await self.app.updater.start_polling(
                    # a timedelta: PTB sends whole seconds as the integer the Bot API documents
                    poll_interval=0.0, timeout=timedelta(seconds=self.poll_timeout_s),
                    bootstrap_retries=0,
                    drop_pending_updates=True, allowed_updates=list(ALLOWED_UPDATES),
                    error_callback=self._poll_error,
                )
                break
            except InvalidToken as exc:
                self._fault(f"Telegram refused the bot token ({redact(str(exc))}); set a new "
                            "one in Settings > Telegram")
                return
            except TelegramError as exc:
                logger.warning("Telegram: cannot connect yet (%s); retrying in %.0f s",
                               redact(str(exc)), delay)
                await asyncio.sleep(delay)
                delay = min(CONNECT_MAX_DELAY_S, delay * 2)
        await self.app.start()
        self.started_s = self._now()
        self.state = BotState.RUNNING
        self._connected.set()
        logger.info("Telegram: connected as @%s", self.app.bot.username)
        self.alerts.start_summary(self.settings.daily_summary_time)
        try:
            await self.app.bot.set_my_commands([BotCommand(n, d) for n, d in fmt.COMMANDS])
        except TelegramError as exc:  # only the clients' command menu is missing
            logger.warning("Telegram: could not set the command menu: %s", redact(str(exc)))

    def _fault(self, reason: str) -> None:
        self.state, self.fault_reason = BotState.FAULTED, reason
        self._connected.set()
        self.rt.agents.notifications.use(UnconfiguredNotifier(Channel.TELEGRAM, reason))
        logger.error("Telegram: %s", reason)

    def _poll_error(self, exc: TelegramError) -> None:
        """A failed getUpdates (python-telegram-bot retries it): warn at most once a minute."""
        self.poll_errors += 1
        now = self._now()
        if now - self._last_poll_warning >= 60:
            self._last_poll_warning = now
            logger.warning("Telegram: polling failed (%s); retrying", redact(str(exc)))

    async def aclose(self) -> None:
        """Stop polling, let queued messages go out briefly, and release everything."""
        if self.state in (BotState.STOPPED, BotState.READY):
            self.state = BotState.STOPPED
            return
        bus = self.rt.bus
        self.alerts.detach(bus)
        bus.unsubscribe(ConversationMessageAdded, self.handlers.conversation_message)
        bus.unsubscribe(QuestionAnswered, self.handlers.question_answered)
        if self._previous_notifier is not None:
            self.rt.agents.notifications.use(self._previous_notifier)
        await self.alerts.stop_summary()
        if self._connecting is not None:
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
        try:
            if self.app.updater is not None and self.app.updater.running:
                await self.app.updater.stop()
            if self.app.running:
                await self.app.stop()
            await self.outbox.aclose()
            await self.app.shutdown()
        except TelegramError as exc:
            logger.warning("Telegram: while closing: %s", redact(str(exc)))
        self.state = BotState.STOPPED

    # -- sending -----------------------------------------------------------------------------

    async def _send(self, chat_id: int, message: fmt.Outgoing, silent: bool) -> int:
        sent = await self.app.bot.send_message(
            chat_id, redact(message.text), reply_markup=_markup(message),
            disable_notification=silent,
        )
        return sent.message_id

    def reply(self, chat_id: int, message: fmt.Outgoing | str) -> asyncio.Future[int]:
        """Answer in the chat the person wrote from (whatever the notification modes)."""
        if isinstance(message, str):
            message = fmt.Outgoing(message)
        return self.outbox.put(chat_id, message)

    async def _typing(self, chat_id: int) -> None:
        try:
            await self.app.bot.send_chat_action(chat_id, ChatAction.TYPING)
        except TelegramError as exc:  # only the "typing…" hint is lost
            logger.info("Telegram: no typing hint: %s", redact(str(exc)))

    def _edit(self, chat_id: int, message_id: int, text: str) -> None:
        async def call() -> int:
            await self.app.bot.edit_message_text(
                redact(text), chat_id=chat_id, message_id=message_id, reply_markup=None)
            return message_id

        self.outbox.put_call(chat_id, call, "an edit")

    # -- the gate ----------------------------------------------------------------------------

    async def _gate(self, update: Update, _context: Context) -> None:
        if not self.gate.admit(_sender(update), self._now()):
            raise ApplicationHandlerStop
        message = update.message
        started = self.started_s
        if message is not None and started is not None and \
                message.date.timestamp() < started - STALE_GRACE_S:
            logger.warning(
                "Telegram: dropped %r sent at %s, before Kestrel started (if this computer's "
                "clock is wrong, messages may be dropped by mistake)",
                redact((message.text or "")[:SENDER_TEXT_CHARS]), message.date.isoformat())
            raise ApplicationHandlerStop
        if message is not None and len(message.text or "") > MAX_MESSAGE_CHARS:
            size = len(message.text or "")
            logger.warning("Telegram: a message of %d characters was not read (the limit is %d)",
                           size, MAX_MESSAGE_CHARS)
            self.reply(message.chat.id, f"That message is {size:,} characters long; Kestrel "
                       f"reads at most {MAX_MESSAGE_CHARS:,} (Telegram's own limit), so it was "
                       "not read. Send a shorter one.")
            raise ApplicationHandlerStop


