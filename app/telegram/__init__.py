"""The Telegram bot: notifications by kind and commands from the person's own Telegram account.

Qt-free and started inside the app's running event loop (the window's qasync loop or ``kestrel
run``'s asyncio loop), never in a loop of its own. Import ``app.telegram.start.start_telegram``;
this package's ``__init__`` imports nothing, so the settings model can be read by ``app.config``
without loading python-telegram-bot.
"""
