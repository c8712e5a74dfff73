"""The Settings dialog's Telegram page as a person uses it: the token goes to the keyring only,
the allowed users and the notification modes to settings.toml, and "Send test message" sends a
real message through python-telegram-bot to a local fake Bot API."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from keyring.backends import fail
from PySide6.QtCore import QSettings, Qt

from app.config import load_settings
from app.config.telegram import BOT_TOKEN_KEY
from app.secrets import SecretStore
from app.ui.settings import SettingsDialog
from app.ui.settings.keys import TELEGRAM_BOT_TOKEN
from app.ui.settings.prefs import UiPrefs
from app.workspace import Workspace
from tests.helpers.eventually import eventually_on
from tests.helpers.fake_telegram import FakeTelegram
from tests.helpers.memory_keyring import MemoryKeyring

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints")
OWNER = 4242


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws").ensure()


@pytest.fixture
def make_dialog(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, workspace: Workspace, tmp_path: Path
) -> Iterator[Callable[[SecretStore], SettingsDialog]]:
    made: list[SettingsDialog] = []
    prefs = UiPrefs(QSettings(str(tmp_path / "ui.ini"), QSettings.Format.IniFormat))

    def make(secrets: SecretStore) -> SettingsDialog:
        dialog = SettingsDialog(workspace, secrets, prefs)
        qtbot.addWidget(dialog)
        dialog.show()
        dialog.nav.setCurrentRow(dialog.pages.index(dialog.telegram_page))
        made.append(dialog)
        return dialog

    yield make
    for dialog in made:
        dialog.close()
        dialog.deleteLater()
    gc.collect()


def _fill(dialog: SettingsDialog, qtbot: Any, base_url: str = "") -> None:
    form = dialog.telegram_page.forms["telegram"]
    form.widget("enabled").setChecked(True)  # type: ignore[attr-defined]
    qtbot.keyClicks(form.widget("allowed_user_ids"), str(OWNER))
    form.widget("notify.fills").setCurrentText("silent")  # type: ignore[attr-defined]
    form.widget("notify.risk_rejections").setCurrentText("off")  # type: ignore[attr-defined]
    if base_url:
        qtbot.keyClicks(form.widget("api_base_url"), base_url)


def test_the_page_stores_the_token_in_the_keyring_and_the_rest_in_settings(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any, workspace: Workspace,
) -> None:
    backend = MemoryKeyring()
    token = "123456:AAE-a-token-typed-into-the-page"
    dialog = make_dialog(SecretStore(backend=backend, environ={}))
    page = dialog.telegram_page
    assert "not connected" not in " ".join(
        label.text() for label in page.findChildren(type(page.result)))
    _fill(dialog, qtbot)
    qtbot.keyClicks(page.token.edit, token)
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert dialog.banner.text().startswith("Saved"), dialog.banner.text()
    loaded = load_settings(workspace.settings_path).telegram
    assert loaded.enabled and loaded.allowed_user_ids == (OWNER,)
    assert loaded.notify.fills == "silent" and loaded.notify.risk_rejections == "off"
    assert loaded.notify.approvals == "on"
    assert backend.entries == {("kestrel", BOT_TOKEN_KEY): token}
    assert not [p for p in workspace.root.rglob("*") if p.is_file()
                and token.encode() in p.read_bytes()]
    assert page.token.edit.text() == ""


def test_a_bad_time_is_refused_beside_its_field(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any, workspace: Workspace,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    form = dialog.telegram_page.forms["telegram"]
    form.widget("daily_summary_time").clear()  # type: ignore[attr-defined]
    qtbot.keyClicks(form.widget("daily_summary_time"), "25:00")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert dialog.banner.text().startswith("Nothing was saved")
    assert form.error_label("daily_summary_time").text()
    assert not workspace.settings_path.exists()


def test_send_test_message_reaches_the_allowed_users_chat(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any,
    qloop: asyncio.AbstractEventLoop,
) -> None:
    with FakeTelegram() as server:
        dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
        page = dialog.telegram_page
        _fill(dialog, qtbot, server.base_url)
        page.token.edit.setEnabled(True)  # no keyring here: type it for the test anyway
        qtbot.keyClicks(page.token.edit, server.token)
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        eventually_on(qloop, lambda: page.result.text().startswith(("✓", "✗")))
        assert page.result.text() == f"✓ Sent as @{server.username} to {OWNER}."
        (sent,) = server.sent
        assert sent.chat_id == OWNER and "test message from Kestrel" in sent.text
        assert "getUpdates" not in server.methods()  # never competes with a running bot

        page.token.edit.clear()
        qtbot.keyClicks(page.token.edit, "999:a-token-telegram-does-not-know")
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        eventually_on(qloop, lambda: page.result.text().startswith(("✓", "✗"))
                 and "refused" in page.result.text(), 15)
        assert page.result.text().startswith("✗ Telegram refused the bot token")
        assert page.test_button.isEnabled()


def test_the_page_and_the_bot_read_the_same_keyring_entry() -> None:
    assert TELEGRAM_BOT_TOKEN == BOT_TOKEN_KEY
