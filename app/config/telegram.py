"""The ``[telegram]`` settings section: who may command the bot and what it sends.

Kept apart from the bot so ``app.config`` can validate settings without importing
python-telegram-bot. The bot token is not a setting: it lives in the OS keyring (or the
``KESTREL_TELEGRAM_BOT_TOKEN`` variable) under ``BOT_TOKEN_KEY``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

BOT_TOKEN_KEY = "telegram.bot_token"  # noqa: S105 - the keyring entry's name, not a secret

Mode = Literal["on", "silent", "off"]


class NotifyModes(BaseModel):
    """What the bot sends by itself, kind by kind: on (with a sound), silent (delivered without a
    sound) or off (not sent)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fills: Mode = Field(default="on", description="An order (part-)filled.")
    take_profit_stop_loss: Mode = Field(
        default="on", description="A take-profit or stop-loss order filled.")
    risk_rejections: Mode = Field(
        default="on", description="The Risk Guard refused an agent's order.")
    approvals: Mode = Field(
        default="on",
        description="An order waits for your approval (with Approve/Refuse buttons).",
    )
    questions: Mode = Field(
        default="on",
        description="An agent asks you something (its suggested replies as buttons).",
    )
    agent_errors: Mode = Field(default="on", description="An agent stopped on an error.")
    agent_messages: Mode = Field(
        default="on",
        description="An agent's own notification sent to the TELEGRAM channel.",
    )
    daily_summary: Mode = Field(
        default="silent", description="The account and the agents, once a day.")


class TelegramSettings(BaseModel):
    """The Telegram bot: on or off, who may command it, what it sends."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(
        default=False,
        description="Connect the bot when Kestrel starts (needs the bot token in the keyring).",
    )
    allowed_user_ids: tuple[int, ...] = Field(
        default=(),
        description="Telegram user ids that may command the bot; empty: nobody may. Every other "
        "sender is refused and logged.",
    )
    allowed_chat_ids: tuple[int, ...] = Field(
        default=(),
        description="Chats the bot listens in and sends notifications to; empty: the allowed "
        "users' private chats with the bot.",
    )
    notify: NotifyModes = NotifyModes()
    daily_summary_time: str = Field(
        default="20:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$",
        description="When the daily summary is sent (HH:MM, this computer's local time).",
    )
    approval_expiry_s: int = Field(
        default=900, ge=30, le=86_400,
        description="Approve/Refuse buttons stop working this many seconds after they were sent "
        "(send /approve for fresh ones).",
    )
    api_base_url: str = Field(
        default="",
        description="A self-hosted Bot API server, e.g. http://127.0.0.1:8081; empty: Telegram's.",
    )

    def notify_chats(self) -> tuple[int, ...]:
        """Where notifications go: the allowed chats, else each allowed user's private chat."""
        return self.allowed_chat_ids or self.allowed_user_ids
