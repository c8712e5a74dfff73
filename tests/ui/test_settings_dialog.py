"""The Settings dialog as a person uses it: keys go to the keyring only (or the dialog says which
environment variable to set), bad values are refused next to their field with nothing written,
good values round-trip through ``load_settings``, and "Test connection" talks to real local
servers (an OpenAI-compatible fake, an SMTP server). Every key field is checked without a keyring
and with one that refuses, and a typed key that a test's server quotes back is never shown."""

from __future__ import annotations

import asyncio
import gc
import socket
import sys
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import keyring
import keyring.backend
import keyring.errors
import pytest
from aiosmtpd.controller import Controller
from keyring.backends import fail
from PySide6.QtCore import QPoint, QSettings, Qt
from PySide6.QtWidgets import QLabel

from app.ccxt.credentials import ApiKeys, load_keys
from app.config import load_settings
from app.redaction import MARKER
from app.secrets import SecretStore
from app.ui.settings import SettingsDialog
from app.ui.settings.keys import SecretField
from app.ui.settings.prefs import UiPrefs
from app.workspace import Workspace
from tests.helpers.eventually import eventually_on
from tests.helpers.fake_llm_servers import FakeOpenAIServer
from tests.helpers.fake_smtp import QuotingSmtp
from tests.helpers.leaks import leaks
from tests.helpers.memory_keyring import MemoryKeyring

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints")
MakeDialog = Callable[[SecretStore], "SettingsDialog"]
API_KEY = "sk-test-9f8e7d6c5b4a3210a1b2"
ORIGINAL = (
    "# written by hand; this comment must survive\n"
    "[market]\n"
    'default_interval = "4h"  # my interval\n'
    "\n"
    "[llm]\n"
    'provider = "openai-compatible"\n'
    'model = "gpt-4o-mini"\n'
    'api_key_name = "openai"\n'
)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws").ensure()
    ws.settings_path.write_text(ORIGINAL, encoding="utf-8")
    return ws


@pytest.fixture
def prefs(tmp_path: Path) -> UiPrefs:
    return UiPrefs(QSettings(str(tmp_path / "ws" / "ui.ini"), QSettings.Format.IniFormat))


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


@pytest.fixture
def make_dialog(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, workspace: Workspace, prefs: UiPrefs
) -> Iterator[Callable[[SecretStore], SettingsDialog]]:
    made: list[SettingsDialog] = []

    def make(secrets: SecretStore) -> SettingsDialog:
        dialog = SettingsDialog(workspace, secrets, prefs)
        qtbot.addWidget(dialog)
        dialog.show()
        made.append(dialog)
        return dialog

    yield make
    for dialog in made:
        dialog.close()
        dialog.deleteLater()
    made.clear()
    # collect the widgets' Python cycles now, on this thread: a collection that happens later in
    # a worker thread (smtplib's) would destroy Qt objects from the wrong thread
    gc.collect()


def files_containing(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_key_without_a_keyring_names_the_environment_variable_and_writes_nothing(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any, workspace: Workspace,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    field = dialog.llm_page.key
    assert not field.edit.isEnabled()
    assert field.warning.isVisible()
    assert "Set the environment variable KESTREL_OPENAI before starting" in field.warning.text()
    assert "no OS keyring" in field.warning.text()
    assert field.status.text() == "Not set."
    field.edit.setText(API_KEY)  # even if a value got into the box, it must not reach a file
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert field.error.isVisible() and "KESTREL_OPENAI" in field.error.text()
    assert files_containing(workspace.root, API_KEY) == []
    assert files_containing(workspace.root, API_KEY[-8:]) == []


def test_key_is_stored_in_the_keyring_and_shown_masked(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any, workspace: Workspace,
    memory_keyring: MemoryKeyring,
) -> None:
    dialog = make_dialog(SecretStore(environ={}))
    field = dialog.llm_page.key
    assert field.edit.isEnabled()
    qtbot.keyClicks(field.edit, API_KEY)
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert memory_keyring.entries[("kestrel", "openai")] == API_KEY
    assert field.edit.text() == ""
    assert "sk-…a1b2" in field.status.text()
    assert API_KEY not in field.status.text()
    assert files_containing(workspace.root, API_KEY) == []
    assert workspace.settings_path.read_text(encoding="utf-8") == ORIGINAL


def test_key_name_change_rebinds_the_field_to_the_new_variable(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    name = dialog.llm_page.forms["llm"].widget("api_key_name")
    name.clear()  # type: ignore[attr-defined]
    qtbot.keyClicks(name, "deepseek")
    assert "KESTREL_DEEPSEEK" in dialog.llm_page.key.warning.text()


def test_invalid_risk_value_is_shown_beside_the_field_and_nothing_is_written(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any, workspace: Workspace,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    form = dialog.risk_page.forms["risk"]
    limit = form.widget("max_position_weight.limit_pct")
    limit.clear()  # type: ignore[attr-defined]
    qtbot.keyClicks(limit, "150")
    orders = form.widget("max_open_orders.limit")
    orders.clear()  # type: ignore[attr-defined]
    qtbot.keyClicks(orders, "lots")
    before = workspace.settings_path.read_bytes()
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    error = form.error_label("max_position_weight.limit_pct")
    assert error.isVisible() and "less than or equal to 100" in error.text()
    assert "valid integer" in form.error_label("max_open_orders.limit").text()
    assert dialog.stack.currentWidget() is dialog.risk_page
    assert "Nothing was saved: 2 values" in dialog.banner.text()
    assert workspace.settings_path.read_bytes() == before


def test_valid_changes_round_trip_through_load_settings_and_keep_other_sections(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any, workspace: Workspace,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    saved: list[Any] = []
    dialog.saved.connect(saved.append)
    risk = dialog.risk_page.forms["risk"]
    for path, text in (("max_position_weight.limit_pct", "12.5"),
                       ("allowed_symbols.symbols", "BTC/USD, ETH/USD")):
        risk.widget(path).clear()  # type: ignore[attr-defined]
        qtbot.keyClicks(risk.widget(path), text)
    approval = dialog.approval_page.forms["approval"]
    qtbot.keyClicks(approval.widget("above_quote"), "2500")
    dialog.email_page.enabled.setChecked(True)
    email = dialog.email_page.forms["email"]
    for path, text in (("host", "smtp.example.org"), ("sender", "desk@example.org"),
                       ("recipients", "me@example.org, you@example.org")):
        qtbot.keyClicks(email.widget(path), text)
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert dialog.banner.text().startswith("Saved")
    loaded = load_settings(workspace.settings_path)
    assert loaded.risk.max_position_weight.limit_pct == Decimal("12.5")
    assert loaded.risk.allowed_symbols.symbols == ("BTC/USD", "ETH/USD")
    assert loaded.approval.above_quote == Decimal(2500)
    assert loaded.email is not None
    assert loaded.email.recipients == ("me@example.org", "you@example.org")
    assert loaded.market.default_interval == "4h"
    assert loaded == saved[0]
    text = workspace.settings_path.read_text(encoding="utf-8")
    assert "# written by hand; this comment must survive" in text
    assert 'default_interval = "4h"  # my interval' in text
    assert not list(workspace.root.glob(".settings.toml.*"))  # no temp file left behind


def test_the_llm_page_sets_the_servers_context_the_answers_tokens_and_the_tool_transport(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any, workspace: Workspace,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    form = dialog.llm_page.forms["llm"]
    assert form.widget("context_tokens").text() == "32768"  # type: ignore[attr-defined]
    assert form.widget("max_output_tokens").text() == "2048"  # type: ignore[attr-defined]
    transport = form.widget("tool_transport")
    assert [transport.itemText(i) for i in range(transport.count())] == [  # type: ignore[attr-defined]
        "xml", "native", "auto"]
    before = workspace.settings_path.read_bytes()
    for path, value in (("context_tokens", "1000"), ("max_output_tokens", "512")):
        form.widget(path).clear()  # type: ignore[attr-defined]
        qtbot.keyClicks(form.widget(path), value)
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert "greater than or equal to 2048" in form.error_label("context_tokens").text()
    assert workspace.settings_path.read_bytes() == before
    form.widget("context_tokens").clear()  # type: ignore[attr-defined]
    qtbot.keyClicks(form.widget("context_tokens"), "8192")
    form.widget("max_output_tokens").clear()  # type: ignore[attr-defined]
    qtbot.keyClicks(form.widget("max_output_tokens"), "7680")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert "at least 1,024 of the 8,192 context tokens for the prompt" in form.error_label(
        "max_output_tokens").text()
    assert workspace.settings_path.read_bytes() == before
    form.widget("max_output_tokens").clear()  # type: ignore[attr-defined]
    qtbot.keyClicks(form.widget("max_output_tokens"), "1024")
    transport.setCurrentText("native")  # type: ignore[attr-defined]
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert dialog.banner.text().startswith("Saved"), dialog.banner.text()
    llm = load_settings(workspace.settings_path).llm
    assert (llm.context_tokens, llm.max_output_tokens, llm.tool_transport) == (
        8192, 1024, "native")


def test_appearance_change_emits_the_theme_and_is_remembered(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any, prefs: UiPrefs,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    themes: list[str] = []
    trays: list[bool] = []
    dialog.theme_changed.connect(themes.append)
    dialog.close_to_tray_changed.connect(trays.append)
    dialog.nav.setCurrentRow(dialog.pages.index(dialog.appearance_page))
    for box in (dialog.appearance_page.buttons["light"], dialog.appearance_page.close_to_tray):
        # on its indicator: a stretched check box only reacts on its box and text
        qtbot.mouseClick(box, Qt.MouseButton.LeftButton, pos=QPoint(8, box.height() // 2))
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert themes == ["light"] and trays == [True]
    assert prefs.theme == "light" and prefs.close_to_tray


def _point_llm_at(dialog: SettingsDialog, base_url: str, qtbot: Any) -> None:
    form = dialog.llm_page.forms["llm"]
    form.widget("base_url").clear()  # type: ignore[attr-defined]
    qtbot.keyClicks(form.widget("base_url"), base_url)


def test_test_connection_reports_success_with_latency(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any,
    qloop: asyncio.AbstractEventLoop,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    page = dialog.llm_page
    with FakeOpenAIServer(default="OK") as server:
        _point_llm_at(dialog, server.base_url, qtbot)
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        assert not page.test_button.isEnabled()  # the window is not frozen: it says it is busy
        eventually_on(qloop, lambda: page.result.text().startswith(("✓", "✗")))
        assert server.bodies[0]["model"] == "gpt-4o-mini"
    assert page.result.text().startswith("✓ Connected"), page.result.text()
    assert " ms" in page.result.text() and "'OK'" in page.result.text()
    assert page.test_button.isEnabled()


def test_test_connection_reports_the_exact_error_for_a_closed_port(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any,
    qloop: asyncio.AbstractEventLoop,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    page = dialog.llm_page
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    _point_llm_at(dialog, f"http://127.0.0.1:{port}/v1", qtbot)
    qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
    eventually_on(qloop, lambda: page.result.text().startswith(("✓", "✗")))
    assert page.result.text().startswith("✗"), page.result.text()
    assert f"127.0.0.1:{port}" in page.result.text()
    assert "cannot reach" in page.result.text()


class _Inbox:
    def __init__(self) -> None:
        self.received: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.received.append(envelope)
        return "250 Message accepted for delivery"


def test_send_test_email_delivers_to_a_real_smtp_server(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any,
    qloop: asyncio.AbstractEventLoop,
) -> None:
    inbox = _Inbox()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # a plain asyncio loop for the server's thread, not one of Qt's
    controller = Controller(inbox, hostname="127.0.0.1", port=port,
                            loop=asyncio.SelectorEventLoop())
    controller.start()
    try:
        dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
        page = dialog.email_page
        page.enabled.setChecked(True)
        form = page.forms["email"]
        for path, text in (("host", "127.0.0.1"), ("sender", "desk@example.org"),
                           ("recipients", "me@example.org")):
            qtbot.keyClicks(form.widget(path), text)
        form.widget("port").clear()  # type: ignore[attr-defined]
        qtbot.keyClicks(form.widget("port"), str(port))
        form.widget("security").setCurrentText("none")  # type: ignore[attr-defined]
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        eventually_on(qloop, lambda: page.result.text().startswith(("✓", "✗")))
    finally:
        controller.stop()
    assert page.result.text().startswith("✓ Sent to me@example.org"), page.result.text()
    assert inbox.received and inbox.received[0].rcpt_tos == ["me@example.org"]
    assert b"Test message" in inbox.received[0].content


def test_settings_writer_round_trips_awkward_values(tmp_path: Path) -> None:
    from app.config import settings_from_mapping
    from app.ui.settings_io import save_settings

    wanted = settings_from_mapping({
        "market": {"data_files": ['C:\\data\\BTC "main".csv', "ünïcode/ETH-USD_1h.csv"],
                   "default_interval": "15m"},
        "tools": {"default_timeout_s": 12.5},
        "paper": {"initial_cash": "1234.5678", "fee_rate": "0.00075"},
        "llm": {"provider": "anthropic", "model": "claude\nsonnet", "stream": False},
        "agents": {"run_budget_usd": "3.20", "replay_speed": 600},
        "risk": {"agent_budget": {"allotments": {"agent 1": "100", "b-2": "0.5"}},
                 "max_drawdown_halt": {"enabled": False}},
    })
    path = tmp_path / "settings.toml"
    assert save_settings(path, wanted) == {"market", "tools", "paper", "llm", "agents", "risk"}
    assert load_settings(path) == wanted
    before = path.read_bytes()
    assert save_settings(path, wanted) == set()  # nothing changed: nothing rewritten
    assert path.read_bytes() == before


def test_settings_writer_regenerates_a_layout_it_cannot_edit_in_place(tmp_path: Path) -> None:
    from app.config import settings_from_mapping
    from app.ui.settings_io import save_settings

    path = tmp_path / "settings.toml"
    path.write_text('risk.max_open_orders.limit = 7\n\n[market]\ndefault_interval = "4h"\n',
                    encoding="utf-8")
    wanted = settings_from_mapping({"market": {"default_interval": "4h"},
                                    "risk": {"max_open_orders": {"limit": 9}}})
    save_settings(path, wanted)
    assert load_settings(path) == wanted


def test_unreadable_settings_file_is_reported_and_never_overwritten(
    make_dialog: Callable[[SecretStore], SettingsDialog], workspace: Workspace,
) -> None:
    workspace.settings_path.write_text("[risk]\nmax_open_orders = [\n", encoding="utf-8")
    before = workspace.settings_path.read_bytes()
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    assert not dialog.save_button.isEnabled()
    assert "settings.toml cannot be read" in dialog.banner.text()
    assert "not valid TOML" in dialog.banner.text()
    assert workspace.settings_path.read_bytes() == before


def test_a_key_from_the_environment_is_shown_masked_with_its_variable(
    make_dialog: Callable[[SecretStore], SettingsDialog],
) -> None:
    token = "123456:ABCdefGHIjklMNOpqr"
    dialog = make_dialog(SecretStore(backend=fail.Keyring(),
                                     environ={"KESTREL_TELEGRAM_BOT_TOKEN": token}))
    status = dialog.telegram_page.token.status.text()
    assert status == "Set by the environment variable KESTREL_TELEGRAM_BOT_TOKEN: 123…Opqr"
    assert token not in status


def test_the_exchanges_page_explains_in_words_when_ccxt_is_missing(
    make_dialog: Callable[[SecretStore], SettingsDialog], qloop: asyncio.AbstractEventLoop,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ccxt", None)  # ``import ccxt`` fails, as when not installed
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    page = dialog.exchange_page
    eventually_on(qloop, lambda: page.availability.isVisibleTo(page))
    assert "ccxt" in page.availability.text() and "not installed" in page.availability.text()
    assert "Error" not in page.availability.text()
    assert not dialog.banner.isVisibleTo(dialog), dialog.banner.text()
    # the page still works: the common exchanges are offered and keys can be typed
    assert page.exchange.findText("binance") >= 0 and page.exchange.isEnabled()
    assert page.known is None


def test_the_exchanges_page_lists_every_ccxt_exchange_when_ccxt_is_installed(
    make_dialog: Callable[[SecretStore], SettingsDialog], qloop: asyncio.AbstractEventLoop,
) -> None:
    ccxt = pytest.importorskip("ccxt")
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    page = dialog.exchange_page
    eventually_on(qloop, lambda: page.known is not None)
    assert page.exchange.count() == len(ccxt.exchanges)
    assert not page.availability.isVisibleTo(page) and not dialog.banner.isVisibleTo(dialog)


def test_an_unexpected_failure_is_said_in_words_without_an_exception_name(
    make_dialog: Callable[[SecretStore], SettingsDialog],
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    dialog._task_failed(RuntimeError("the keyring daemon went away"))
    text = dialog.banner.text()
    assert "the keyring daemon went away" in text and "RuntimeError" not in text


def test_saving_only_the_theme_says_what_was_saved(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    dialog.appearance_page.buttons["light"].setChecked(True)
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    text = dialog.banner.text()
    assert "nothing had changed" not in text
    assert "light theme" in text


# -- every key field, with and without a keyring ---------------------------------------------


def key_fields(dialog: SettingsDialog) -> dict[str, SecretField]:
    """Every key field, by the variable that replaces it (OKX chosen: it has a passphrase)."""
    dialog.exchange_page.exchange.setCurrentText("okx")
    return {
        "KESTREL_OPENAI": dialog.llm_page.key,
        "KESTREL_EXCHANGE_OKX_API_KEY": dialog.exchange_page.api_key,
        "KESTREL_EXCHANGE_OKX_SECRET": dialog.exchange_page.api_secret,
        "KESTREL_EXCHANGE_OKX_PASSWORD": dialog.exchange_page.passphrase,
        "KESTREL_TELEGRAM_BOT_TOKEN": dialog.telegram_page.token,
        "KESTREL_EMAIL_PASSWORD": dialog.email_page.password,
    }


def test_without_a_keyring_every_key_field_says_so_and_names_its_variable(
    make_dialog: MakeDialog, qtbot: Any, workspace: Workspace,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    fields = key_fields(dialog)
    for variable, field in fields.items():
        assert not field.edit.isEnabled(), variable
        warning = field.warning.text()
        assert not field.warning.isHidden() and "no OS keyring" in warning, warning
        assert f"Set the environment variable {variable} before starting Kestrel" in warning
        assert "never writes keys to a file" in warning
    typed = {variable: f"typed-{variable.lower()}-Zq8Wm3Xv" for variable in fields}
    for variable, field in fields.items():
        field.edit.setText(typed[variable])  # as if a value got into the box anyway
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)  # explains, never raises
    for variable, field in fields.items():
        error = field.error.text()
        assert not field.error.isHidden() and variable in error and "no OS keyring" in error
        assert files_containing(workspace.root, typed[variable]) == []
    assert "not stored" in dialog.banner.text()


def test_a_keyring_that_refuses_to_store_names_the_variable_to_set_instead(
    make_dialog: MakeDialog, qtbot: Any,
) -> None:
    class LockedKeyring(MemoryKeyring):
        def set_password(self, service: str, username: str, password: str) -> None:
            raise keyring.errors.KeyringLocked("the keyring is locked")

    dialog = make_dialog(SecretStore(backend=LockedKeyring(), environ={}))
    field = dialog.telegram_page.token
    assert field.edit.isEnabled()
    qtbot.keyClicks(field.edit, "123456:ABCdefGHIjklMNOpqrSTU")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert "the keyring is locked" in field.error.text()
    assert "KESTREL_TELEGRAM_BOT_TOKEN" in field.error.text()


def test_exchange_keys_are_stored_under_the_names_the_live_broker_reads(
    make_dialog: MakeDialog, qtbot: Any, memory_keyring: MemoryKeyring,
) -> None:
    dialog = make_dialog(SecretStore(environ={}))
    page = dialog.exchange_page
    page.exchange.setCurrentText("binance")
    assert page.passphrase.isHidden(), "Binance's API has no passphrase"
    qtbot.keyClicks(page.api_key.edit, "binance-key-0123456789")
    qtbot.keyClicks(page.api_secret.edit, "binance-secret-0123456789")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    store = SecretStore(environ={})
    assert load_keys("binance", store) == ApiKeys("binance-key-0123456789",
                                                  "binance-secret-0123456789")
    page.exchange.setCurrentText("okx")
    assert not page.passphrase.isHidden()
    for field, value in ((page.api_key, "okx-key-0123456789"),
                         (page.api_secret, "okx-secret-0123456789"),
                         (page.passphrase, "okx-passphrase-0123")):
        qtbot.keyClicks(field.edit, value)
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert load_keys("okx", store) == ApiKeys("okx-key-0123456789", "okx-secret-0123456789",
                                              "okx-passphrase-0123")


def test_a_typed_key_quoted_back_by_the_connection_test_is_not_shown(
    make_dialog: MakeDialog, qtbot: Any, qloop: asyncio.AbstractEventLoop,
    memory_keyring: MemoryKeyring,
) -> None:
    key = "sk-typed-QnVwXrTsYuZaBcDeFgHi"
    dialog = make_dialog(SecretStore(environ={}))
    page = dialog.llm_page
    with FakeOpenAIServer(api_key="sk-what-the-server-wants-0000", echo_key="both") as server:
        _point_llm_at(dialog, server.base_url, qtbot)
        qtbot.keyClicks(page.key.edit, key)
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        eventually_on(qloop, lambda: page.result.text().startswith(("✓", "✗")))
        assert server.requests[0].headers["authorization"] == f"Bearer {key}"
    shown = page.result.text()
    assert shown.startswith("✗") and "Incorrect API key" in shown and MARKER in shown, shown
    assert leaks(shown.encode(), key) == [], shown


def test_a_typed_smtp_password_quoted_back_by_the_test_e_mail_is_not_shown(
    make_dialog: MakeDialog, qtbot: Any, qloop: asyncio.AbstractEventLoop,
    memory_keyring: MemoryKeyring,
) -> None:
    password = "TypedSmtpPwQnVwXrTsYu"  # noqa: S105 - a test value
    dialog = make_dialog(SecretStore(environ={}))
    page = dialog.email_page
    page.enabled.setChecked(True)
    form = page.forms["email"]
    with QuotingSmtp(refusing=True) as server:
        for path, text in (("host", "127.0.0.1"), ("sender", "desk@example.org"),
                           ("recipients", "me@example.org"), ("username", "desk")):
            qtbot.keyClicks(form.widget(path), text)
        form.widget("port").clear()  # type: ignore[attr-defined]
        qtbot.keyClicks(form.widget("port"), str(server.port))
        form.widget("security").setCurrentText("none")  # type: ignore[attr-defined]
        qtbot.keyClicks(page.password.edit, password)
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        eventually_on(qloop, lambda: page.result.text().startswith(("✓", "✗")))
    shown = page.result.text()
    assert ("desk", password) in {(login, pw) for _m, login, pw in server.logins}
    assert shown.startswith("✗") and "refused the login of desk" in shown, shown
    assert leaks(shown.encode(), password) == [], shown
    assert "AUTH LOGIN [redacted]" in shown, shown


def test_the_approval_page_says_what_is_never_held_and_protection_can_be_left_to_kestrel(
    make_dialog: Callable[[SecretStore], SettingsDialog], qtbot: Any, workspace: Workspace,
) -> None:
    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    said = " ".join(label.text() for label in dialog.approval_page.findChildren(QLabel))
    assert "closes and sells included" in said
    assert "Never held: your own orders" in said and "its own position" in said
    box = dialog.trading_page.forms["trading"].widget("kestrel_stops")
    assert "only while Kestrel runs" in " ".join(
        label.text() for label in dialog.trading_page.findChildren(QLabel)) + box.toolTip()
    box.setChecked(True)  # type: ignore[attr-defined]
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert dialog.banner.text().startswith("Saved")
    assert load_settings(workspace.settings_path).trading.kestrel_stops is True


def test_the_exchanges_page_the_window_help_and_the_readme_give_one_account_of_live(
    make_dialog: Callable[[SecretStore], SettingsDialog],
) -> None:
    """Settings > Exchanges said live trading was "not built yet" while the README and
    ``kestrel gui --help`` offered ``--venue live``."""
    from app.cli.main import build_gui_parser

    dialog = make_dialog(SecretStore(backend=fail.Keyring(), environ={}))
    page = dialog.exchange_page
    said = " ".join(label.text() for label in page.findChildren(QLabel))
    assert "not built" not in said and "when live trading arrives" not in said
    account = page.findChild(QLabel, "venues_in_words").text()
    assert "LIVE is never a default: it opens only with kestrel --workspace DIR --venue live " \
           "--exchange ID" in account
    assert "May trade live" in account and "OS keyring" in account
    help_text = " ".join(build_gui_parser().format_help().split())
    assert "live: REAL orders on your exchange account" in help_text
    assert "never a default" in help_text
    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    assert "LIVE (real orders, real money), is never a default: `--venue live` opens it" in readme
