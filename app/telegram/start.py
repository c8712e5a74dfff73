"""``start_telegram``: the one call the window and ``kestrel run`` make to bring the bot up.

It decides from the settings and the keyring whether there is a bot to start, and only then
imports python-telegram-bot (a second of imports nobody with Telegram off should pay for). When
Telegram is on but cannot start (no token, an unreadable keyring), the TELEGRAM channel keeps
reporting why, so an agent's ``send_notification`` says it too, and the reason is logged.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from app.config.telegram import BOT_TOKEN_KEY, TelegramSettings
from app.domain.agents import Channel
from app.domain.errors import OperationalError
from app.orchestration.notify import UnconfiguredNotifier
from app.secrets import SecretStore

if TYPE_CHECKING:
    from app.runtime.world import World
    from app.telegram.bot import TelegramBot
    from app.telegram.commands import KillSwitch

logger = logging.getLogger(__name__)


async def start_telegram(
    runtime: World,
    settings: TelegramSettings | None = None,
    secrets: SecretStore | None = None,
    *,
    kill_switch: KillSwitch | None = None,
    **options: Any,
) -> TelegramBot | None:
    """Start the bot inside the running event loop; None when Telegram is off or cannot start.

    Returns at once: connecting to Telegram continues in the background (and is retried while
    the network is down). Close the bot with ``await bot.aclose()`` before the runtime.

    Args:
        settings: the ``[telegram]`` section; default: the runtime's workspace settings.
        kill_switch: what ``/kill`` trips (the runtime's ``kill_switch``; without one ``/kill``
            says it is not available).
        options: passed to ``TelegramBot`` (``poll_timeout_s``, ``now_s``, ``outbox``,
            ``request_bounds``).
    """
    if settings is None:
        try:
            settings = runtime.workspace.settings().telegram
        except OperationalError as exc:  # edited since the runtime read it: say so, go on
            return _not_started(runtime, f"the settings cannot be read: {exc}")
    if not settings.enabled:
        return None
    secrets = secrets or SecretStore()
    try:
        token = secrets.get(BOT_TOKEN_KEY)
    except OperationalError as exc:
        return _not_started(runtime, f"the bot token cannot be read: {exc}")
    if not token:
        return _not_started(runtime, "Telegram is on but has no bot token: "
                            + secrets.how_to_set(BOT_TOKEN_KEY, "Settings > Telegram"))
    if not settings.allowed_user_ids:
        logger.warning("Telegram: no user is allowed to command the bot and no chat gets "
                       "notifications; add your user id in Settings > Telegram")
    from app.telegram.bot import TelegramBot  # only now: python-telegram-bot is heavy

    bot = TelegramBot(runtime, settings, token, kill_switch=kill_switch, **options)
    await bot.start()
    return bot


def _not_started(runtime: World, why: str) -> None:
    logger.warning("Telegram: not started: %s", why)
    runtime.agents.notifications.use(UnconfiguredNotifier(Channel.TELEGRAM, why))
    return None
