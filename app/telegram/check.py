""""Send test message": one real message through Telegram with the token and chats as typed.

Why real: a settings page that says "saved" proves nothing; the person wants to see the message
arrive on their phone before an approval depends on it. Uses a bare ``telegram.Bot`` (no polling,
so it never competes with a running bot for updates) and reports Telegram's own words on failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.config.telegram import TelegramSettings
from app.redaction import REDACTOR

if TYPE_CHECKING:
    from app.telegram.request import RequestBounds

TEST_TEXT = ("This is a test message from Kestrel's Settings. If you can read it, Telegram "
             "notifications and commands will reach you here.")


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    ok: bool
    message: str


async def send_test_message(
    token: str | None, settings: TelegramSettings, bounds: RequestBounds | None = None
) -> CheckOutcome:
    """Send ``TEST_TEXT`` to every notification chat; the outcome in words.

    Args:
        bounds: the size and time bounds of its requests (the bot's own by default).
    """
    if not token:
        return CheckOutcome(False, "Paste the bot token first (Telegram's @BotFather gives it).")
    chats = settings.notify_chats()
    if not chats:
        return CheckOutcome(False, "Add your Telegram user id to the allowed users first.")
    from telegram import Bot
    from telegram.error import Forbidden, InvalidToken, TelegramError

    from app.telegram.request import BoundedRequest, RequestBounds

    REDACTOR.add_secret(token)
    base = settings.api_base_url.rstrip("/")
    urls = {"base_url": f"{base}/bot", "base_file_url": f"{base}/file/bot"} if base else {}
    bot = Bot(token, request=BoundedRequest(bounds or RequestBounds()), **urls)
    try:
        async with bot:
            for chat in chats:
                await bot.send_message(chat, TEST_TEXT)
    except InvalidToken:
        return CheckOutcome(False, "Telegram refused the bot token; copy it again from "
                                  "@BotFather.")
    except TelegramError as exc:
        hint = ""
        text = str(exc).lower()
        if isinstance(exc, Forbidden) or "chat not found" in text:
            hint = (" Open your bot in Telegram and press Start first: a bot may only write to "
                    "people who wrote to it.")
        return CheckOutcome(False, f"Telegram said: {REDACTOR.redact(str(exc))}.{hint}")
    listed = ", ".join(str(c) for c in chats)
    return CheckOutcome(True, f"Sent as @{bot.username} to {listed}.")
