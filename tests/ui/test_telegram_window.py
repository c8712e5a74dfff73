"""The Telegram bot inside the window: started on the window's own qasync loop when the
workspace's settings turn it on, answering while the window runs, stopped when it closes."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings

from app.config.telegram import BOT_TOKEN_KEY
from app.secrets import SecretStore, env_var_name
from app.telegram.bot import BotState
from app.ui.main_window import MainWindow
from app.ui.settings.prefs import UiPrefs
from app.workspace import Workspace
from tests.helpers.eventually import PATIENCE_S, eventually
from tests.helpers.fake_telegram import FakeTelegram

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")
OWNER = 4242


def test_the_window_runs_the_bot_on_its_own_loop_when_telegram_is_on(
    tmp_path: Path, qtbot, qloop
) -> None:
    server = FakeTelegram().start()
    workspace = Workspace.at(tmp_path / "ws").ensure()
    workspace.settings_path.write_text(
        f'[telegram]\nenabled = true\nallowed_user_ids = [{OWNER}]\n'
        f'api_base_url = "{server.base_url}"\n', encoding="utf-8")
    prefs = UiPrefs(QSettings(str(tmp_path / "ui.ini"), QSettings.Format.IniFormat))
    secrets = SecretStore(environ={env_var_name(BOT_TOKEN_KEY): server.token})
    window = MainWindow(prefs, secrets, interactive_errors=False)
    qtbot.addWidget(window)

    async def scenario() -> None:
        await window.open_workspace(workspace, paced=False)
        bot = window.telegram
        assert bot is not None and await bot.wait_connected(PATIENCE_S)
        server.push_text(OWNER, OWNER, "/agents")
        await eventually(lambda: server.in_chat(OWNER))
        assert server.in_chat(OWNER)[0].startswith("Agents: ")
        window.close()
        await window.aclose()
        assert bot.state is BotState.STOPPED

    try:
        qloop.run_until_complete(scenario())
    finally:
        server.close()


def test_the_window_starts_no_bot_while_telegram_is_off(tmp_path: Path, qtbot, qloop) -> None:
    workspace = Workspace.at(tmp_path / "ws").ensure()
    prefs = UiPrefs(QSettings(str(tmp_path / "ui.ini"), QSettings.Format.IniFormat))
    window = MainWindow(prefs, SecretStore(environ={}), interactive_errors=False)
    qtbot.addWidget(window)

    async def scenario() -> None:
        await window.open_workspace(workspace, paced=False)
        assert window.telegram is None
        window.close()
        await window.aclose()

    qloop.run_until_complete(scenario())

