"""The Settings dialog: every page, one Save that validates everything before writing anything.

Saving follows one order so a mistake never half-applies: (1) every page's values are validated
together through the ``Settings`` model (errors go next to their fields and nothing is written);
(2) typed keys go to the OS keyring through ``SecretStore`` (never to a file); (3) the changed
sections are written to the workspace's ``settings.toml`` atomically, other sections kept as they
were; (4) this desktop's preferences (theme, close to tray) are stored and announced by signal so
the main window applies them; (5) the new settings are handed to the running world
(``World.apply_settings``), and the banner says what took effect at once and what applies at the
next start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QMessageBox,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.config import AgentSettings, LoggingSettings, PaperSettings, Settings
from app.config.approval import ApprovalSettings
from app.config.risk import RiskConfig
from app.config.trading import TradingSettings
from app.domain.errors import OperationalError
from app.secrets import SecretStore
from app.trading.approval import EXEMPTIONS
from app.ui.panels.style import set_banner
from app.ui.panels.tasks import TaskSet
from app.ui.settings.mcp_page import McpPage
from app.ui.settings.pages import (
    AppearancePage,
    EmailPage,
    ExchangePage,
    LlmPage,
    Page,
    SectionPage,
    TelegramPage,
    risk_docs,
)
from app.ui.settings.prefs import UiPrefs
from app.ui.settings_io import save_settings
from app.workspace import Workspace

if TYPE_CHECKING:
    from app.runtime.live_settings import SettingsOutcome

logger = logging.getLogger(__name__)


class SettingsDialog(QDialog):
    """Edit the workspace's settings, keys and this desktop's preferences.

    Signals:
        saved(Settings): the new settings after a successful save.
        theme_changed(str): "dark" or "light"; the main window calls ``apply_theme``.
        close_to_tray_changed(bool): the tray controller's close-to-tray switch.
    """

    saved = Signal(object)
    theme_changed = Signal(str)
    close_to_tray_changed = Signal(bool)

    def __init__(
        self,
        workspace: Workspace,
        secrets: SecretStore,
        prefs: UiPrefs | None = None,
        parent: QWidget | None = None,
        apply: Callable[[Settings], SettingsOutcome] | None = None,
    ) -> None:
        """``apply``: the running world's ``apply_settings`` (None: nothing runs, say nothing)."""
        super().__init__(parent)
        self.setWindowTitle("Kestrel settings")
        self.setObjectName("settings_dialog")
        self.resize(920, 640)
        self.workspace = workspace
        self.secrets = secrets
        self._apply = apply
        self.prefs = prefs or UiPrefs()
        self.tasks = TaskSet(self._task_failed)
        self.unsaved_box: QMessageBox | None = None  # the question about unsaved edits, if open
        load_error: str | None = None
        try:
            self.current = workspace.settings()
        except OperationalError as exc:
            load_error = str(exc)
            self.current = Settings()
        s = self.current
        self.llm_page = LlmPage(s, secrets, self.tasks.spawn)
        self.exchange_page = ExchangePage(secrets, self.tasks.spawn, s)
        self.telegram_page = TelegramPage(s, secrets, self.tasks.spawn)
        self.email_page = EmailPage(s, secrets, self.tasks.spawn)
        self.risk_page = SectionPage(
            "Risk limits", "risk", RiskConfig, s.risk,
            "The Risk Guard checks every order an agent places against these limits before it "
            "reaches the broker; a rejected order is reported to the agent with the rule.",
            docs=risk_docs())
        self.approval_page = SectionPage(
            "Approval", "approval", ApprovalSettings, s.approval,
            "Agents' orders that wait for your approval before they reach the broker, closes "
            f"and sells included. {EXEMPTIONS}")
        self.trading_page = SectionPage(
            "Protection", "trading", TradingSettings, s.trading,
            "How a position is protected where the exchange cannot hold a stop-loss order.")
        self.paper_page = SectionPage(
            "Paper account", "paper", PaperSettings, s.paper,
            "The simulated account agents trade on: starting cash, fees and slippage.")
        self.agents_page = SectionPage(
            "Agents", "agents", AgentSettings, s.agents, "Budgets and replay speed.")
        self.logging_page = SectionPage(
            "Logging", "logging", LoggingSettings, s.logging,
            f"What Kestrel writes to {workspace.root / 'logs' / 'kestrel.log'}: from which "
            "level, and how large the file grows before it is rotated. Keys and passwords are "
            "redacted from every line. A change applies at once.")
        self.appearance_page = AppearancePage(self.prefs)
        team = getattr(getattr(parent, "world", None), "agents", None)
        self.mcp_page = McpPage(workspace, self.tasks.spawn, getattr(team, "mcp", None))
        self.pages: list[Page] = [
            self.llm_page, self.exchange_page, self.telegram_page, self.email_page,
            self.risk_page, self.approval_page, self.trading_page, self.paper_page,
            self.agents_page, self.logging_page,
            self.appearance_page, self.mcp_page,
        ]
        self.nav = QListWidget()
        self.nav.setObjectName("settings_nav")
        self.nav.setFixedWidth(170)
        self.stack = QStackedWidget()
        for page in self.pages:
            self.nav.addItem(page.title)
            self.stack.addWidget(page)
        self.nav.currentRowChanged.connect(self.stack.setCurrentIndex)
        self.nav.setCurrentRow(0)
        self.banner = QLabel()
        self.banner.setObjectName("settings_banner")
        self.banner.setWordWrap(True)
        self.banner.hide()
        buttons = QDialogButtonBox()
        self.save_button = QPushButton("Save")
        self.save_button.setObjectName("save_settings")
        self.save_button.setDefault(True)
        buttons.addButton(self.save_button, QDialogButtonBox.ButtonRole.ApplyRole)
        close = buttons.addButton(QDialogButtonBox.StandardButton.Close)
        close.clicked.connect(self.reject)
        self.save_button.clicked.connect(self.save)
        body = QHBoxLayout()
        body.addWidget(self.nav)
        body.addWidget(self.stack, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(body, 1)
        layout.addWidget(self.banner)
        layout.addWidget(buttons)
        if load_error is not None:
            self._say(f"settings.toml cannot be read, so nothing can be saved until it is "
                      f"fixed by hand: {load_error}", "error")
            self.save_button.setEnabled(False)

    # -- saving ---------------------------------------------------------------------------------
    def page_for(self, section: str) -> Page | None:
        return next((p for p in self.pages if section in p.sections), None)

    def collect(self) -> dict[str, Any]:
        """The whole settings mapping: unedited sections as loaded, edited ones as typed."""
        data: dict[str, Any] = self.current.model_dump(mode="python")
        for page in self.pages:
            data.update(page.raw())
        return data

    def save(self) -> bool:
        """Validate, store keys, write settings.toml, apply preferences; True when all done."""
        for page in self.pages:
            page.clear_errors()
        try:
            new = Settings.model_validate(self.collect())
        except ValidationError as exc:
            self._show_validation(exc)
            return False
        failed = [label for page in self.pages for label in page.commit_secrets()]
        try:
            written = save_settings(self.workspace.settings_path, new, self.current)
        except (OSError, OperationalError) as exc:
            self._say(f"settings.toml was not written: {exc}", "error")
            return False
        self.current = new
        prefs = self._apply_prefs()
        outcome = self._apply(new) if self._apply is not None and written else None
        self.saved.emit(new)
        running = f" {outcome.describe()}" if outcome is not None and outcome.describe() else ""
        if failed:
            self._say(f"Settings saved, but not stored: {', '.join(failed)} (see the message "
                      f"under each).{running}", "warning")
            return False
        done = ([f"settings to {self.workspace.settings_path}"] if written else []) + prefs
        self._say(f"Saved {' and '.join(done)}.{running}" if done else "Nothing to save: no "
                  "value differs from what was stored.", "ok")
        logger.info("settings saved; sections changed: %s", ", ".join(sorted(written)) or "none")
        return True

    def _show_validation(self, exc: ValidationError) -> None:
        first: Page | None = None
        unplaced: list[str] = []
        errors = exc.errors()
        for error in errors:
            loc = tuple(error["loc"])
            section = str(loc[0]) if loc else ""
            page = self.page_for(section)
            if page is not None and page.show_error(section, loc[1:], error["msg"]):
                first = first or page
            else:
                unplaced.append(f"{'.'.join(map(str, loc))}: {error['msg']}")
        if first is not None:
            self.nav.setCurrentRow(self.pages.index(first))
        count = len(errors)
        text = (f"Nothing was saved: {count} value{'s need' if count != 1 else ' needs'} "
                "fixing (marked in red).")
        if unplaced:
            text += " " + "; ".join(unplaced)
        self._say(text, "error")

    def _apply_prefs(self) -> list[str]:
        """Store and announce the changed preferences; what changed, in words."""
        changed = []
        theme = self.appearance_page.theme()
        tray = self.appearance_page.close_to_tray.isChecked()
        if theme != self.prefs.theme:
            self.prefs.theme = theme
            self.theme_changed.emit(theme)
            changed.append(f"the {theme} theme")
        if tray != self.prefs.close_to_tray:
            self.prefs.close_to_tray = tray
            self.close_to_tray_changed.emit(tray)
            changed.append("closing to the tray" if tray else "quitting on close")
        self.prefs.sync()
        return changed

    def _say(self, text: str, kind: str) -> None:
        self.banner.setText(text)
        set_banner(self.banner, kind)
        self.banner.show()

    def _task_failed(self, exc: BaseException) -> None:
        # the exception's class is for the log (TaskSet logs it with its traceback), not the
        # person: the banner says what happened in its message's words
        self._say(f"Something went wrong here: {str(exc) or 'no details were given'}. The log has "
                  "the details.", "error")

    # -- closing with edits not saved ------------------------------------------------------------

    def unsaved(self) -> list[str]:
        """The pages whose edits are not saved (values, typed keys, preferences), by title."""
        pages: list[str] = []
        try:
            edited: Settings | None = Settings.model_validate(self.collect())
        except ValidationError:
            edited = None  # a value that does not validate was typed: that page is edited
        for page in self.pages:
            typed_key = any(f.edit.text().strip() for f in page.secret_fields)
            if edited is None:
                differs = any(form.raw() != _section_raw(self.current, name)
                              for name, form in page.forms.items())
            else:
                differs = any(getattr(edited, name, None) != getattr(self.current, name, None)
                              for name in page.forms)
            if differs or typed_key:
                pages.append(page.title)
        appearance = self.appearance_page
        if (appearance.theme() != self.prefs.theme
                or appearance.close_to_tray.isChecked() != self.prefs.close_to_tray):
            pages.append(appearance.title)
        return list(dict.fromkeys(pages))

    def reject(self) -> None:
        """Close, Esc or the window's X: with edits not saved, ask first (Save, Discard or
        Cancel), naming the pages they are on; they were lost without a word."""
        changed = self.unsaved()
        if not changed:
            super().reject()
            return
        if self.unsaved_box is not None:
            self.unsaved_box.raise_()
            return
        box = QMessageBox(self)
        box.setObjectName("unsavedSettings")
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Unsaved settings")
        box.setText("Save your changes before closing?")
        box.setInformativeText(f"Changed and not saved: {', '.join(changed)}.")
        save = box.addButton("Save", QMessageBox.ButtonRole.AcceptRole)
        discard = box.addButton("Discard", QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(save)

        def chosen(button: object) -> None:
            if button is save and self.save():
                super(SettingsDialog, self).reject()
            elif button is discard:
                super(SettingsDialog, self).reject()

        box.buttonClicked.connect(chosen)
        box.finished.connect(lambda _result: setattr(self, "unsaved_box", None))
        self.unsaved_box = box
        box.open()

    def done(self, result: int) -> None:
        self.tasks.cancel_all()
        super().done(result)


def _section_raw(settings: Settings, name: str) -> Any:
    value = getattr(settings, name, None)
    return value.model_dump(mode="python") if isinstance(value, BaseModel) else value
