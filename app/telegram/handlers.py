"""What the bot does with each admitted update: commands, plain text, replies and buttons.

Everything here runs after the gate (``app.telegram.bot``) admitted the sender. Commands are
answered in the chat they came from, whatever the notification modes; plain text goes to the
Orchestrator (the chat panel's path) and the Orchestrator's answer to it comes back to that chat;
a typed reply to a question message answers that question; a button answers a question, or
confirms the kill switch. An approval's buttons, and a typed reply to it, stop working
``approval_expiry_s`` after the message was sent (Telegram's own date of the message). The
answer is stored by the question store before the agent resumes, so it survives a restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from telegram import Message, Update
from telegram.error import TelegramError
from telegram.ext import (
    Application,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from app.agents.approval_log import APPROVE_REPLY, REFUSE_REPLY
from app.config.telegram import TelegramSettings
from app.domain.agents import Question, QuestionKind, Task
from app.domain.errors import KestrelError
from app.events import ConversationMessageAdded, QuestionAnswered
from app.redaction import redact
from app.telegram import format as fmt
from app.telegram.commands import BotCommands, CommandFailed

logger = logging.getLogger(__name__)

KILL_CONFIRM_S = 60
CONVERSATIONS_KEPT = 200

Context = ContextTypes.DEFAULT_TYPE
Reply = Callable[[int, fmt.Outgoing | str], asyncio.Future[int]]


class UpdateHandlers:
    """The handlers of admitted updates, over the bot's commands and its way of sending.

    Args:
        reply: queue a message to a chat (whatever the notification modes).
        edit: queue an edit of a message the bot sent (its buttons go).
        post_question: send a question with fresh buttons to the given chats.
        typing: show "typing…" in a chat while the Orchestrator works.
        now_s: the wall clock, for expiring buttons.
    """

    def __init__(
        self,
        commands: BotCommands,
        settings: TelegramSettings,
        *,
        reply: Reply,
        edit: Callable[[int, int, str], None],
        post_question: Callable[[Question, tuple[int, ...]], None],
        typing: Callable[[int], Awaitable[None]],
        now_s: Callable[[], float],
    ) -> None:
        self.commands = commands
        self.settings = settings
        self.reply = reply
        self.edit = edit
        self._post_question = post_question
        self._typing = typing
        self._now = now_s
        self.conversations: dict[str, int] = {}  # task id -> the chat the person wrote from
        self.question_messages: dict[str, list[tuple[int, int, str]]] = {}

    def register(self, app: Application) -> None:
        once = filters.UpdateType.MESSAGE  # an edited message never runs a command again
        simple: dict[str, Callable[[], Awaitable[str]]] = {
            "status": self.commands.status, "balance": self.commands.balance,
            "positions": self.commands.positions, "orders": self.commands.orders,
            "trades": self.commands.trades, "stop_all": self.commands.stop_all,
            "agents": self._agents, "help": self._help_text, "start": self._help_text,
        }
        for name, action in simple.items():
            app.add_handler(CommandHandler(name, self._replying(action), filters=once))
        app.add_handler(CommandHandler("pause", self._pause, filters=once))
        app.add_handler(CommandHandler("resume", self._resume, filters=once))
        app.add_handler(CommandHandler("kill", self._kill, filters=once))
        app.add_handler(CommandHandler("approve", self._approve, filters=once))
        app.add_handler(CommandHandler("reject", self._reject, filters=once))
        app.add_handler(CallbackQueryHandler(self._button))
        app.add_handler(MessageHandler(once & filters.TEXT & ~filters.COMMAND, self._text))
        app.add_handler(MessageHandler(once & filters.COMMAND, self._unknown))
        app.add_error_handler(self.error)

    def is_conversation(self, task_id: str) -> bool:
        return task_id in self.conversations

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
        switch = self.commands.kill_switch
        if switch is None or switch.is_tripped():  # nothing to confirm: say why not at once
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
                self._post_question(question, (chat.id,))
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
        self.conversations[task_id] = chat.id
        while len(self.conversations) > CONVERSATIONS_KEPT:
            del self.conversations[next(iter(self.conversations))]
        if isinstance(outcome, Task):
            await self._typing(chat.id)

    def conversation_message(self, event: ConversationMessageAdded) -> None:
        """The Orchestrator's answer to a message the person wrote from Telegram."""
        chat = self.conversations.get(event.task_id)
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
            self.edit(*where, "Kill switch: cancelled.")
            return "Cancelled."
        if age_s > KILL_CONFIRM_S:
            self.edit(*where, "This confirmation expired. Send /kill again.")
            return "Expired: send /kill again."
        user = update.effective_user
        by = f"Telegram user {user.id} (@{user.username or '-'})" if user else "Telegram"
        try:
            outcome = await self.commands.kill(by)
        except KestrelError as exc:
            outcome = f"The kill switch could not be tripped: {exc}"
        self.edit(*where, outcome)
        return outcome

    def _answer_button(
        self, rest: str, age_s: float, where: tuple[int, int] | None, text: str
    ) -> str:
        question_id, _, index = rest.partition("|")
        question = self.commands.rt.agents.questions.get(question_id)
        if question is None:
            return "Kestrel does not know this question (another workspace?)."
        if question.answer is not None:
            if where is not None:
                self.edit(*where, fmt.answered_text(text, question.answer))
            return f"Already answered: {question.answer}"
        if question.kind is QuestionKind.APPROVAL and age_s > self.settings.approval_expiry_s:
            if where is not None:
                self.edit(*where, fmt.expired_text(text))
            return "These buttons expired: send /approve for fresh ones."
        replies = question.suggested_replies
        if not index.isdigit() or int(index) >= len(replies):
            return "That reply is not one the agent offered."
        if where is not None:
            self.question_sent(question_id, where[0], where[1], text)
        try:
            self.commands.answer(question, replies[int(index)])
        except CommandFailed as exc:
            return str(exc)
        if question.kind is QuestionKind.APPROVAL:
            return ("Approved: the order goes to the broker." if replies[int(index)] ==
                    APPROVE_REPLY else "Refused: the order is not placed.")
        return f"Sent: {replies[int(index)]}"

    def question_sent(self, question_id: str, chat: int, message_id: int, text: str) -> None:
        sent = self.question_messages.setdefault(question_id, [])
        if all(m != message_id or c != chat for c, m, _t in sent):
            sent.append((chat, message_id, text))

    def question_answered(self, event: QuestionAnswered) -> None:
        """Mark every copy of the question as answered (from Telegram or from the window)."""
        for chat, message_id, text in self.question_messages.pop(event.question_id, []):
            self.edit(chat, message_id, fmt.answered_text(text, event.answer))

    async def error(self, update: object, context: Context) -> None:
        logger.error("Telegram: a handler failed", exc_info=context.error)
        if isinstance(update, Update) and update.effective_chat is not None:
            error = context.error
            self.reply(update.effective_chat.id, f"That failed inside Kestrel "
                       f"({type(error).__name__}: {error}); it is in the log.")
