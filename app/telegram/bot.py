"""The Telegram bot's lifecycle and its handlers, inside the app's own running event loop.

python-telegram-bot's ``Application`` is driven by hand, never by ``run_polling`` (which would
start and own a loop): ``initialize``, ``updater.start_polling(drop_pending_updates=True)``,
``start``; and on close the reverse. Connecting runs in the background and is retried while
Telegram is unreachable, so the window or ``kestrel run`` never waits on the network. States:
READY -> CONNECTING -> RUNNING -> STOPPED, or FAULTED (the token was refused) with the reason.

Every update passes the gate first (group -1): a sender who is not an allowed user in an allowed
chat is refused, logged and never answered, and a message older than the bot's start is dropped,
not executed. Commands do what ``app.telegram.commands`` says; plain text goes to the
Orchestrator; a button answers a question (an approval's buttons expire). Every outgoing text is
redacted, then queued on the outbox, which retries through network drops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import TYPE_CHECKING

from telegram import (
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    Update,
)
from telegram.constants import ChatAction
from telegram.error import InvalidToken, TelegramError
from telegram.ext import (
    Application,
    ApplicationHandlerStop,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    TypeHandler,
    filters,
)

from app.agents.approval import APPROVE_REPLY, REFUSE_REPLY
from app.domain.agents import QuestionKind, Task
from app.domain.errors import KestrelError
from app.events import ConversationMessageAdded, QuestionAnswered
from app.orchestration.notify import Notifier
from app.telegram import format as fmt
from app.telegram.alerts import Alerts
from app.telegram.auth import Gatekeeper, Sender
from app.telegram.commands import BotCommands, CommandFailed, KillSwitch
from app.telegram.notifier import Poster, TelegramNotifier
from app.telegram.outbox import Outbox
from app.telegram.settings import TelegramSettings
from app.workspace import REDACTOR

if TYPE_CHECKING:
    from app.agents.runtime import AgentRuntime

logger = logging.getLogger(__name__)

POLL_TIMEOUT_S = 30.0
STALE_GRACE_S = 30.0  # a message dated this long before the start is from while Kestrel was closed
KILL_CONFIRM_S = 60
CONVERSATIONS_KEPT = 200
CONNECT_FIRST_DELAY_S = 2.0
CONNECT_MAX_DELAY_S = 60.0
ALLOWED_UPDATES = ("message", "callback_query")

Context = ContextTypes.DEFAULT_TYPE


class BotState(StrEnum):
    READY = "ready"
    CONNECTING = "connecting"
    RUNNING = "running"
    STOPPED = "stopped"
    FAULTED = "faulted"


def redact(text: str) -> str:
    """Every text the bot sends or logs about an update passes here.

    The workspace's redactor masks every secret read through ``SecretStore`` (the bot token
    included) and key-shaped strings. When ``app.secrets`` gains its own redactor, apply it here.
    """
    return REDACTOR.redact(text)


def _sender(update: Update) -> Sender:
    user, chat = update.effective_user, update.effective_chat
    what = ""
    if update.callback_query is not None:
        what = f"button {update.callback_query.data!r}"
    elif update.effective_message is not None:
        what = update.effective_message.text or "(not text)"
    return Sender(
        user.id if user is not None else None, chat.id if chat is not None else None,
        (user.username or "") if user is not None else "", what,
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
    """

    def __init__(
        self,
        runtime: AgentRuntime,
        settings: TelegramSettings,
        token: str,
        *,
        kill_switch: KillSwitch | None = None,
        poll_timeout_s: float = POLL_TIMEOUT_S,
        now_s: Callable[[], float] = time.time,
        outbox: Callable[[Callable[..., Awaitable[int]]], Outbox] = Outbox,
    ) -> None:
        self.rt = runtime
        self.settings = settings
        self.poll_timeout_s = poll_timeout_s
        self._now = now_s
        self.state = BotState.READY
        self.fault_reason: str | None = None
        self.started_s: float | None = None
        self.poll_errors = 0
        self._last_poll_warning = 0.0
        self.gate = Gatekeeper(settings.allowed_user_ids, settings.allowed_chat_ids, redact)
        self.commands = BotCommands(
            runtime, kill_switch=kill_switch, refused=lambda: self.gate.refused_count)
        self.app = self._build(token)
        self.outbox = outbox(self._send)
        self.poster = Poster(self.outbox, settings.notify, settings.notify_chats())
        self.notifier = TelegramNotifier(self.poster, self.commands.name)
        self._conversations: dict[str, int] = {}  # task id -> chat the person wrote from
        self._question_messages: dict[str, list[tuple[int, int, str]]] = {}
        self.alerts = Alerts(
            runtime, self.commands, self.poster, expiry_s=settings.approval_expiry_s,
            question_sent=self._question_sent, conversation_task=self._conversations.__contains__,
        )
        self._previous_notifier: Notifier | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()

    # -- building ----------------------------------------------------------------------------

    def _build(self, token: str) -> Application:
        builder = Application.builder().token(token)
        base = self.settings.api_base_url.rstrip("/")
        if base:
            builder = builder.base_url(f"{base}/bot").base_file_url(f"{base}/file/bot")
        app = builder.build()
        app.add_handler(TypeHandler(Update, self._gate), group=-1)
        once = filters.UpdateType.MESSAGE  # an edited message never runs a command again
        simple: dict[str, Callable[[], Awaitable[str]]] = {
            "status": self.commands.status, "balance": self.commands.balance,
            "positions": self.commands.positions, "orders": self.commands.orders,
            "trades": self.commands.trades, "stop_all": self.commands.stop_all,
        }
        for name, action in simple.items():
            app.add_handler(CommandHandler(name, self._replying(action), filters=once))
        app.add_handler(CommandHandler("agents", self._replying(self._agents), filters=once))
        app.add_handler(CommandHandler(["start", "help"], self._help, filters=once))
        app.add_handler(CommandHandler("pause", self._pause, filters=once))
        app.add_handler(CommandHandler("resume", self._resume, filters=once))
        app.add_handler(CommandHandler("kill", self._kill, filters=once))
        app.add_handler(CommandHandler("approve", self._approve, filters=once))
        app.add_handler(CommandHandler("reject", self._reject, filters=once))
        app.add_handler(CallbackQueryHandler(self._button))
        app.add_handler(MessageHandler(once & filters.TEXT & ~filters.COMMAND, self._text))
        app.add_handler(MessageHandler(once & filters.COMMAND, self._unknown))
        app.add_error_handler(self._error)
        return app

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen to the runtime and begin connecting (in the background; retried)."""
        if self.state is not BotState.READY:
            raise RuntimeError(f"the Telegram bot cannot start when it is {self.state}")
        self.state = BotState.CONNECTING
        bus = self.rt.bus
        self.alerts.attach(bus)
        bus.subscribe(ConversationMessageAdded, self._conversation_message)
        bus.subscribe(QuestionAnswered, self._question_answered)
        self._previous_notifier = self.rt.notifications.use(self.notifier)
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
                    poll_interval=0.0, timeout=self.poll_timeout_s, bootstrap_retries=0,
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
        bus.unsubscribe(ConversationMessageAdded, self._conversation_message)
        bus.unsubscribe(QuestionAnswered, self._question_answered)
        if self._previous_notifier is not None:
            self.rt.notifications.use(self._previous_notifier)
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
                redact(message.text or ""), message.date.isoformat())
            raise ApplicationHandlerStop

    # -- commands ----------------------------------------------------------------------------

    def _replying(
        self, action: Callable[[], Awaitable[str]]
    ) -> Callable[[Update, Context], Awaitable[None]]:
        async def handle(update: Update, _context: Context) -> None:
            await self._answer(update, action)
        return handle

    async def _answer(self, update: Update, action: Callable[[], Awaitable[str]]) -> None:
        chat = update.effective_chat
        assert chat is not None  # the gate admitted it: it has one
        try:
            text = await action()
        except CommandFailed as exc:
            text = str(exc)
        except KestrelError as exc:
            text = f"That did not work: {exc}"
        self.reply(chat.id, text)

    async def _agents(self) -> str:
        return self.commands.agents()

    async def _help(self, update: Update, _context: Context) -> None:
        await self._answer(update, self._help_text)

    async def _help_text(self) -> str:
        return fmt.HELP

    async def _pause(self, update: Update, context: Context) -> None:
        name = " ".join(context.args or ())
        await self._answer(update, lambda: self.commands.pause(name))

    async def _resume(self, update: Update, context: Context) -> None:
        name = " ".join(context.args or ())
        await self._answer(update, lambda: self.commands.resume(name))

    async def _unknown(self, update: Update, _context: Context) -> None:
        command = (update.effective_message.text or "").split()[0] if \
            update.effective_message else ""

        async def text() -> str:
            return f"There is no command {command}. /help lists them."
        await self._answer(update, text)

    async def _kill(self, update: Update, _context: Context) -> None:
        chat = update.effective_chat
        assert chat is not None
        if self.commands.kill_switch is None:
            self.reply(chat.id, await self.commands.kill(by=""))
            return
        self.reply(chat.id, fmt.kill_prompt(KILL_CONFIRM_S))

    async def _approve(self, update: Update, context: Context) -> None:
        await self._decide(update, context, APPROVE_REPLY)

    async def _reject(self, update: Update, context: Context) -> None:
        await self._decide(update, context, REFUSE_REPLY)

    async def _decide(self, update: Update, context: Context, reply: str) -> None:
        chat = update.effective_chat
        assert chat is not None
        reference = " ".join(context.args or ())
        if not reference:
            waiting = self.commands.pending(QuestionKind.APPROVAL)
            if not waiting:
                self.reply(chat.id, "No order waits for your approval.")
            for question in waiting[: fmt.MAX_ROWS]:
                self.alerts.post_question(question, chats=(chat.id,))
            return

        async def decide() -> str:
            question = self.commands.find(reference, QuestionKind.APPROVAL)
            self.commands.answer(question, reply)
            return (f"Approved ({fmt.ref(question.question_id)}): the order goes to the broker."
                    if reply == APPROVE_REPLY else
                    f"Refused ({fmt.ref(question.question_id)}): the order is not placed.")
        await self._answer(update, decide)

    # -- plain text: the Orchestrator, or a reply to a question --------------------------------

    async def _text(self, update: Update, _context: Context) -> None:
        message, chat = update.message, update.effective_chat
        assert message is not None and chat is not None
        text = (message.text or "").strip()
        replied = message.reply_to_message
        reference = fmt.ref_in(replied.text or "") if replied is not None else None
        if replied is not None and reference is not None:
            age_s = self._now() - replied.date.timestamp()

            async def answer() -> str:
                question = self.commands.find(reference)
                if question.kind is QuestionKind.APPROVAL and \
                        age_s > self.settings.approval_expiry_s:
                    return "That approval request has expired: send /approve for a fresh one."
                self.commands.answer(question, text)
                return f"Answer sent to {self.commands.name(question.agent_id)}."
            await self._answer(update, answer)
            return
        try:
            outcome = await self.commands.chat(text)
        except CommandFailed as exc:
            self.reply(chat.id, str(exc))
            return
        task_id = outcome.task_id
        self._conversations[task_id] = chat.id
        while len(self._conversations) > CONVERSATIONS_KEPT:
            del self._conversations[next(iter(self._conversations))]
        if isinstance(outcome, Task):
            try:
                await self.app.bot.send_chat_action(chat.id, ChatAction.TYPING)
            except TelegramError as exc:  # only the "typing…" hint is lost
                logger.info("Telegram: no typing hint: %s", redact(str(exc)))

    def _conversation_message(self, event: ConversationMessageAdded) -> None:
        """The Orchestrator's answer to a message the person wrote from Telegram."""
        chat = self._conversations.get(event.task_id)
        if chat is None or event.kind not in ("final", "notice"):
            return
        self.reply(chat, fmt.clip(event.content.strip() or "(an empty answer)"))

    # -- buttons -----------------------------------------------------------------------------

    async def _button(self, update: Update, _context: Context) -> None:
        query = update.callback_query
        assert query is not None
        kind, _, rest = (query.data or "").partition("|")
        message = query.message
        sent_s = message.date.timestamp() if message is not None else 0.0
        age_s = self._now() - sent_s
        text = message.text if isinstance(message, Message) else ""
        where = (message.chat.id, message.message_id) if message is not None else None
        if kind == fmt.KILL:
            toast = await self._kill_button(rest, age_s, where, update)
        elif kind == fmt.ANSWER:
            toast = self._answer_button(rest, age_s, where, text or "")
        else:
            toast = "This button is not one of Kestrel's."
        try:
            await query.answer(redact(toast)[:200])
        except TelegramError as exc:  # only the little toast is lost
            logger.info("Telegram: could not answer a button: %s", redact(str(exc)))

    async def _kill_button(
        self, choice: str, age_s: float, where: tuple[int, int] | None, update: Update
    ) -> str:
        if where is None:
            return "This message is too old."
        if choice != "yes":
            self._edit(*where, "Kill switch: cancelled.")
            return "Cancelled."
        if age_s > KILL_CONFIRM_S:
            self._edit(*where, "This confirmation expired. Send /kill again.")
            return "Expired: send /kill again."
        user = update.effective_user
        by = f"Telegram user {user.id} (@{user.username or '-'})" if user else "Telegram"
        try:
            outcome = await self.commands.kill(by)
        except KestrelError as exc:
            outcome = f"The kill switch could not be tripped: {exc}"
        self._edit(*where, outcome)
        return outcome

    def _answer_button(
        self, rest: str, age_s: float, where: tuple[int, int] | None, text: str
    ) -> str:
        question_id, _, index = rest.partition("|")
        question = self.rt.questions.get(question_id)
        if question is None:
            return "Kestrel does not know this question (another workspace?)."
        if question.answer is not None:
            if where is not None:
                self._edit(*where, fmt.answered_text(text, question.answer))
            return f"Already answered: {question.answer}"
        if question.kind is QuestionKind.APPROVAL and age_s > self.settings.approval_expiry_s:
            if where is not None:
                self._edit(*where, fmt.expired_text(text))
            return "These buttons expired: send /approve for fresh ones."
        replies = question.suggested_replies
        if not index.isdigit() or int(index) >= len(replies):
            return "That reply is not one the agent offered."
        if where is not None:
            self._question_sent(question_id, where[0], where[1], text)
        try:
            self.commands.answer(question, replies[int(index)])
        except CommandFailed as exc:
            return str(exc)
        if question.kind is QuestionKind.APPROVAL:
            return ("Approved: the order goes to the broker." if replies[int(index)] ==
                    APPROVE_REPLY else "Refused: the order is not placed.")
        return f"Sent: {replies[int(index)]}"

    def _question_sent(self, question_id: str, chat: int, message_id: int, text: str) -> None:
        sent = self._question_messages.setdefault(question_id, [])
        if all(m != message_id or c != chat for c, m, _t in sent):
            sent.append((chat, message_id, text))

    def _question_answered(self, event: QuestionAnswered) -> None:
        """Mark every copy of the question as answered (from Telegram or from the window)."""
        for chat, message_id, text in self._question_messages.pop(event.question_id, []):
            self._edit(chat, message_id, fmt.answered_text(text, event.answer))

    async def _error(self, update: object, context: Context) -> None:
        logger.error("Telegram: a handler failed", exc_info=context.error)
        if isinstance(update, Update) and update.effective_chat is not None:
            error = context.error
            self.reply(update.effective_chat.id, f"That failed inside Kestrel "
                       f"({type(error).__name__}: {error}); it is in the log.")


def describe(bot: TelegramBot | None) -> str:
    """One line for a status bar or log: off, connecting, connected, or why it failed."""
    if bot is None:
        return "Telegram: off"
    if bot.state is BotState.FAULTED:
        return f"Telegram: failed ({bot.fault_reason})"
    return f"Telegram: {bot.state.value}"
