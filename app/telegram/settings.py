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
_MODE_NOTE = "on: with sound; silent: delivered without a sound; off: not sent."


class NotifyModes(BaseModel):
    """What the bot sends by itself, kind by kind (on, silent or off)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fills: Mode = Field(default="on", description=f"An order (part-)filled. {_MODE_NOTE}")
    tp_sl: Mode = Field(
        default="on", description=f"A take-profit or stop-loss order filled. {_MODE_NOTE}"
    )
    risk_rejections: Mode = Field(
        default="on", description=f"The Risk Guard refused an agent's order. {_MODE_NOTE}"
    )
    approvals: Mode = Field(
        default="on",
        description=f"An order waits for your approval (with Approve/Refuse buttons). {_MODE_NOTE}",
    )
    questions: Mode = Field(
        default="on",
        description=f"An agent asks you something (its suggested replies as buttons). {_MODE_NOTE}",
    )
    agent_errors: Mode = Field(
        default="on", description=f"An agent stopped on an error (faulted). {_MODE_NOTE}"
    )
    agent_messages: Mode = Field(
        default="on",
        description=f"An agent's own notification sent to the TELEGRAM channel. {_MODE_NOTE}",
    )
    daily_summary: Mode = Field(
        default="silent", description=f"The account and agents once a day. {_MODE_NOTE}"
    )


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
