"""Who may command the bot: configured user ids, in configured chats; everyone else is refused.

Refused by default: with no allowed user configured nobody may command, whatever the chat. A
sender passes only when both their user id and the chat are allowed (the owner writing in a group
the bot was added to is refused too, as a stranger there could read the answers). A refused
update is never executed and gets no reply: a stranger learns nothing, not even that the bot is
alive. Each refusal is logged as a warning and kept (the latest ``KEEP`` of them) for ``/status``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

KEEP = 100
_SHOWN_TEXT = 80


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sent an update, as far as Telegram says."""

    user_id: int | None
    chat_id: int | None
    username: str = ""
    what: str = ""  # the command, the button's data or the text, for the log


@dataclass(frozen=True, slots=True)
class Refusal:
    sender: Sender
    reason: str
    at_s: float


class Gatekeeper:
    """Decides, for each update, whether its sender may command the bot.

    Args:
        user_ids: the Telegram user ids allowed to command.
        chat_ids: the chats commands are taken from; empty means the allowed users' private
            chats (a private chat's id is its user's id).
        redact: applied to whatever of the update is logged.
    """

    def __init__(
        self,
        user_ids: tuple[int, ...],
        chat_ids: tuple[int, ...] = (),
        redact: Callable[[str], str] = str,
    ) -> None:
        self.user_ids = frozenset(user_ids)
        self.chat_ids = frozenset(chat_ids) if chat_ids else frozenset(user_ids)
        self._redact = redact
        self.refusals: deque[Refusal] = deque(maxlen=KEEP)
        self.refused_count = 0

    def reason_to_refuse(self, sender: Sender) -> str | None:
        """Why ``sender`` may not command, or None when they may."""
        if not self.user_ids:
            return "no Telegram user is allowed to command (telegram.allowed_user_ids is empty)"
        if sender.user_id is None or sender.user_id not in self.user_ids:
            return f"user {sender.user_id} is not in telegram.allowed_user_ids"
        if sender.chat_id is None or sender.chat_id not in self.chat_ids:
            return f"chat {sender.chat_id} is not an allowed chat"
        return None

    def admit(self, sender: Sender, now_s: float) -> bool:
        """True when ``sender`` may command; otherwise the refusal is logged and kept."""
        reason = self.reason_to_refuse(sender)
        if reason is None:
            return True
        self.refused_count += 1
        self.refusals.append(Refusal(sender, reason, now_s))
        what = self._redact(sender.what)
        if len(what) > _SHOWN_TEXT:
            what = what[:_SHOWN_TEXT] + "…"
        logger.warning(
            "Telegram: refused %r from user %s (@%s) in chat %s: %s",
            what, sender.user_id, sender.username or "-", sender.chat_id, reason,
        )
        return False
