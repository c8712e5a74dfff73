"""With Telegram off, nobody pays for python-telegram-bot: the app's start-up paths import the
bot's starter and settings, never the library."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import app.cli.agents, app.runtime.world, app.config, app.telegram.start
loaded = sorted(m for m in sys.modules if m == "telegram" or m.startswith("telegram."))
print(loaded)
"""


def test_starting_up_does_not_import_python_telegram_bot() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]"
