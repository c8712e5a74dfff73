"""The pages of the Settings dialog: what each shows, which settings section and keys it edits.

Each page reports its sections' raw values (``raw()``), puts the model's errors next to its fields
(``show_error``) and lists its ``SecretField``s; the dialog does the validating and saving, so every
page follows the same rule: nothing is written unless everything validates. Forms come from the
pydantic models (``ModelForm``); only what a model cannot say (the keys, the explanations, the
connection tests) is written by hand here.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.config import Settings
from app.config.email import EmailSettings
from app.config.telegram import TelegramSettings
from app.domain.errors import OperationalError
from app.risk import rules as risk_rules
from app.runtime.exchange_info import key_names
from app.secrets import SecretStore
from app.ui.settings.connection import CheckResult
from app.ui.settings.keys import (
    EMAIL_PASSWORD,
    TELEGRAM_BOT_TOKEN,
    SecretField,
)
from app.ui.settings.model_form import ModelForm, attribute_docs
from app.ui.settings.prefs import THEMES, UiPrefs
from app.ui.theme import set_look

COMMON_EXCHANGES = ("binance", "coinbase", "kraken", "bybit", "okx", "bitstamp", "kucoin")
Spawn = Callable[[Any], Any]


def _note(text: str, kind: str = "muted") -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    set_look(label, kind if kind in ("muted", "warning") else "")
    return label


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    label.setStyleSheet("font-size: 15px; font-weight: 600;")
    return label


def show_result(label: QLabel, result: CheckResult) -> None:
    label.setText(("✓ " if result.ok else "✗ ") + result.message)
    set_look(label, "ok" if result.ok else "error")


class Page(QWidget):
    """Base: a titled, scrollable page; subclasses fill ``self.body``."""

    title = ""
    sections: tuple[str, ...] = ()

    def __init__(self, intro: str = "", title: str | None = None) -> None:
        super().__init__()
        if title is not None:
            self.title = title
        self.secret_fields: list[SecretField] = []
        self.forms: dict[str, ModelForm] = {}
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        inner = QWidget()
        self.body = QVBoxLayout(inner)
        self.body.setContentsMargins(16, 12, 16, 12)
        self.body.addWidget(_heading(self.title))
        if intro:
            self.body.addWidget(_note(intro))
        scroll.setWidget(inner)
        outer.addWidget(scroll)

    def finish(self) -> None:
        self.body.addStretch(1)

    def raw(self) -> dict[str, Any]:
        return {name: form.raw() for name, form in self.forms.items()}

    def show_error(self, section: str, loc: tuple[str | int, ...], message: str) -> bool:
        form = self.forms.get(section)
        return form.show_error(loc, message) if form is not None else False

    def clear_errors(self) -> None:
        for form in self.forms.values():
            form.clear_errors()
        for secret in self.secret_fields:
            secret.error.hide()

    def commit_secrets(self) -> list[str]:
        """Store typed keys; the labels of those that could not be stored."""
        return [s.label for s in self.secret_fields if not s.commit()]

    def _secret_row(self, form: QFormLayout, field: SecretField) -> None:
        self.secret_fields.append(field)
        form.addRow(field.label[:1].upper() + field.label[1:], field)


class SectionPage(Page):
    """A page that is one settings section's generated form."""

    def __init__(self, title: str, section: str, model: type[BaseModel], value: BaseModel | None,
                 intro: str = "", docs: dict[str, str] | None = None) -> None:
        super().__init__(intro, title)
        self.sections = (section,)
        form = ModelForm(model, value, docs=docs)
        form.setObjectName(f"form_{section}")
        self.forms[section] = form
        self.body.addWidget(form)
        self.finish()


def risk_docs() -> dict[str, str]:
    """Each rule's own docstring (what it does) and its default, by RiskConfig field name."""
    from app.config.risk import RiskConfig

    defaults = attribute_docs(RiskConfig)
    out: dict[str, str] = {}
    for _name, klass in inspect.getmembers(risk_rules, inspect.isclass):
        field = getattr(klass, "name", None)
        if isinstance(field, str) and field in RiskConfig.model_fields and klass.__doc__:
            what = inspect.cleandoc(klass.__doc__).split("\n\n")[0].replace("\n", " ")
            default = defaults.get(field)
            out[field] = f"{what} Default: {default}" if default else what
    return out


class LlmPage(Page):
    title = "LLM provider"
    sections = ("llm",)

    def __init__(self, settings: Settings, secrets: SecretStore, spawn: Spawn) -> None:
        super().__init__(
            "Which language model answers for new agents. 'template' keeps each agent "
            "template's own provider (the built-in rule engine, which is not an LLM). The key "
            "goes to the OS keyring under the name below, never to settings.toml."
        )
        self._spawn = spawn
        form = ModelForm(type(settings.llm), settings.llm)
        form.setObjectName("form_llm")
        self.forms["llm"] = form
        self.body.addWidget(form)
        keys = QFormLayout()
        self.key = SecretField(secrets, settings.llm.api_key_name, "API key")
        self._secret_row(keys, self.key)
        self.body.addLayout(keys)
        name_edit = form.widget("api_key_name")
        name_edit.textChanged.connect(lambda text: self.key.set_name(text.strip()))  # type: ignore[attr-defined]
        row = QHBoxLayout()
        self.test_button = QPushButton("Test connection")
        self.test_button.setObjectName("test_llm")
        self.test_button.clicked.connect(self._test)
        self.result = QLabel()
        self.result.setObjectName("llm_result")
        self.result.setWordWrap(True)
        row.addWidget(self.test_button)
        row.addWidget(self.result, 1)
        self.body.addLayout(row)
        self.finish()

    def _test(self) -> None:
        from app.ui.settings.connection import test_llm

        raw = self.forms["llm"].raw()
        key = self.key.pending() or self.key.current()
        self.test_button.setEnabled(False)
        self.result.setText("Testing… (one tiny request)")
        set_look(self.result, "muted")

        async def run() -> None:
            try:
                result = await test_llm(
                    str(raw["provider"]), model=str(raw["model"]), base_url=str(raw["base_url"]),
                    api_key=key,
                )
                show_result(self.result, result)
            finally:
                self.test_button.setEnabled(True)

        self._spawn(run())


CCXT_MISSING = (
    "The full list of exchanges comes from ccxt, the exchange library, which is not installed "
    "in this Kestrel, so only the common exchanges are offered. You can still type any "
    "exchange's ccxt id and store its keys.")


def ccxt_exchange_ids() -> list[str] | None:
    """Every exchange id ccxt knows, or None when ccxt cannot be imported."""
    try:
        import ccxt
    except ImportError:
        return None
    return list(ccxt.exchanges)


class ExchangePage(Page):
    title = "Exchanges"
    sections = ("venue",)

    def __init__(self, secrets: SecretStore, spawn: Spawn,
                 settings: Settings | None = None) -> None:
        super().__init__()
        settings = settings or Settings()
        self._settings = settings
        self._spawn = spawn
        from app.runtime.venue import VENUES_IN_WORDS

        venues = _note(VENUES_IN_WORDS, "warning")
        venues.setObjectName("venues_in_words")
        self.body.addWidget(venues)
        form = QFormLayout()
        self.exchange = QComboBox()
        self.exchange.setObjectName("exchange_id")
        self.exchange.setEditable(True)
        self.exchange.addItems(COMMON_EXCHANGES)
        form.addRow("Exchange (ccxt id)", self.exchange)
        self.known: frozenset[str] | None = None
        # the entry names the live broker reads (app.ccxt.credentials), passphrase included for
        # the exchanges whose API needs one
        names = key_names(self.exchange.currentText())
        self.api_key = SecretField(secrets, names["api_key"], "API key")
        self.api_secret = SecretField(secrets, names["secret"], "API secret")
        self.passphrase = SecretField(secrets, names.get("password", ""), "API passphrase")
        self._secret_row(form, self.api_key)
        self._secret_row(form, self.api_secret)
        self._secret_row(form, self.passphrase)
        self._form = form
        form.setRowVisible(self.passphrase, "password" in names)
        self.body.addLayout(form)
        self.availability = _note(CCXT_MISSING)
        self.availability.setObjectName("ccxt_availability")
        self.availability.hide()
        self.body.addWidget(self.availability)
        self.abilities = _note("")
        self.abilities.setObjectName("exchange_abilities")
        self.body.addWidget(self.abilities)
        row = QHBoxLayout()
        self.test_button = QPushButton("Test connection")
        self.test_button.setObjectName("test_exchange")
        self.test_button.setToolTip("Load the exchange's markets and read one ticker, with the "
                                    "workspace's settings for it (URLs, proxy); no key is used")
        self.test_button.clicked.connect(self._test)
        self.result = QLabel()
        self.result.setObjectName("exchange_result")
        self.result.setWordWrap(True)
        row.addWidget(self.test_button)
        row.addWidget(self.result, 1)
        self.body.addLayout(row)
        self.body.addWidget(_heading("Market venue"))
        self.body.addWidget(_note(
            "Where this workspace's agents trade when it opens: the offline replay (no network, "
            "the default) or paper on an exchange's live quotes (its real prices and order "
            "book, simulated fills, no keys); a LIVE account is never a default (--venue live, "
            "above). Applies when the workspace is opened next; an account that has traded "
            "stays on its market, so use a new workspace for another "
            "(kestrel --workspace DIR --venue live-paper --exchange binance)."))
        venue = ModelForm(type(settings.venue), settings.venue)
        venue.setObjectName("form_venue")
        self.forms["venue"] = venue
        self.body.addWidget(venue)
        self.exchange.currentTextChanged.connect(self._renamed)
        self.finish()
        spawn(self._load_ids())
        self._show_abilities(self.exchange.currentText())

    def _show_abilities(self, exchange: str) -> None:
        """What ``exchange`` offers, from ccxt's ``has`` (read off the window's thread)."""
        exchange = exchange.strip().lower()
        if not exchange:
            self.abilities.setText("")
            return

        async def run() -> None:
            from app.runtime.exchange_info import describe_abilities, exchange_abilities

            loop = asyncio.get_event_loop()
            try:
                found = await loop.run_in_executor(None, exchange_abilities, exchange)
            except OperationalError as exc:
                text = str(exc)
            else:
                text = f"What {exchange} offers (ccxt): {describe_abilities(found)}"
            if self.exchange.currentText().strip().lower() == exchange:
                self.abilities.setText(text)

        self._spawn(run())

    def _test(self) -> None:
        """Load the exchange's markets and read a ticker in a worker thread; say how it went."""
        from app.runtime.exchange_info import probe_exchange_blocking

        exchange = self.exchange.currentText().strip().lower()
        settings = self._settings.exchanges.get(exchange)
        self.test_button.setEnabled(False)
        self.result.setText(f"Connecting to {exchange}… (its markets and one ticker)")
        set_look(self.result, "muted")

        async def run() -> None:
            loop = asyncio.get_event_loop()
            try:
                result = await loop.run_in_executor(
                    None, probe_exchange_blocking, exchange, settings)
                show_result(self.result, CheckResult(result.ok, result.message,
                                                     result.latency_ms))
            finally:
                self.test_button.setEnabled(True)

        self._spawn(run())

    async def _load_ids(self) -> None:
        """ccxt's list of exchange ids; importing ccxt takes a second, so not on the loop.

        ccxt is an optional part here: without it the page offers the common exchanges, says
        in words why the list is short, and still stores keys.
        """
        # run_in_executor on the loop set for this thread: Qt may step this task outside
        # run_until_complete, where asyncio.to_thread finds no running loop
        found = await asyncio.get_event_loop().run_in_executor(None, ccxt_exchange_ids)
        if found is None:
            self.availability.show()
            return
        self.known = frozenset(found)
        current = self.exchange.currentText()
        self.exchange.blockSignals(True)
        self.exchange.clear()
        self.exchange.addItems(sorted(found))
        self.exchange.setCurrentText(current)
        self.exchange.blockSignals(False)

    def _renamed(self, text: str) -> None:
        exchange = text.strip().lower()
        names = key_names(exchange) if exchange else {}
        self.api_key.set_name(names.get("api_key", ""))
        self.api_secret.set_name(names.get("secret", ""))
        if "password" not in names:
            self.passphrase.edit.clear()  # typed for another exchange: never stored under this
        self.passphrase.set_name(names.get("password", ""))
        self._form.setRowVisible(self.passphrase, "password" in names)
        self.result.setText("")
        self._show_abilities(exchange)

    def commit_secrets(self) -> list[str]:
        exchange = self.exchange.currentText().strip().lower()
        typed = self.api_key.pending() or self.api_secret.pending() or self.passphrase.pending()
        if typed and self.known is not None and exchange not in self.known:
            self.api_key.error.setText(
                f"{exchange!r} is not an exchange ccxt knows; pick one from the list.")
            self.api_key.error.show()
            return [self.api_key.label]
        return super().commit_secrets()


class TelegramPage(Page):
    title = "Telegram"
    sections = ("telegram",)

    def __init__(self, settings: Settings, secrets: SecretStore, spawn: Spawn) -> None:
        super().__init__(
            "A Telegram bot of your own sends you fills, approvals and agents' questions, and "
            "takes commands (/status, /pause, /approve…) from the user ids allowed below, and "
            "from nobody else. Create the bot with @BotFather, paste its token here (kept in "
            "the OS keyring), open the bot in Telegram and press Start.")
        self._spawn = spawn
        self.body.addWidget(_note(
            "Your user id: message the bot once, then look in Kestrel's log for the refused "
            "sender's id (or ask @userinfobot). Changes take effect when Kestrel next starts."))
        keys = QFormLayout()
        self.token = SecretField(secrets, TELEGRAM_BOT_TOKEN, "bot token")
        self._secret_row(keys, self.token)
        self.body.addLayout(keys)
        form = ModelForm(TelegramSettings, settings.telegram)
        form.setObjectName("form_telegram")
        self.forms["telegram"] = form
        self.body.addWidget(form)
        row = QHBoxLayout()
        self.test_button = QPushButton("Send test message")
        self.test_button.setObjectName("test_telegram")
        self.test_button.clicked.connect(self._test)
        self.result = QLabel()
        self.result.setObjectName("telegram_result")
        self.result.setWordWrap(True)
        row.addWidget(self.test_button)
        row.addWidget(self.result, 1)
        self.body.addLayout(row)
        self.finish()

    def _test(self) -> None:
        from pydantic import ValidationError

        from app.telegram.check import send_test_message

        form = self.forms["telegram"]
        form.clear_errors()
        try:
            settings = TelegramSettings.model_validate(form.raw())
        except ValidationError as exc:
            for error in exc.errors():
                form.show_error(tuple(error["loc"]), error["msg"])
            show_result(self.result, CheckResult(False, "Fix the fields marked in red first."))
            return
        token = self.token.pending() or self.token.current()
        self.test_button.setEnabled(False)
        self.result.setText("Sending…")
        set_look(self.result, "muted")

        async def run() -> None:
            try:
                outcome = await send_test_message(token, settings)
                show_result(self.result, CheckResult(outcome.ok, outcome.message))
            finally:
                self.test_button.setEnabled(True)

        self._spawn(run())


class EmailPage(Page):
    title = "E-mail"
    sections = ("email",)

    def __init__(self, settings: Settings, secrets: SecretStore, spawn: Spawn) -> None:
        super().__init__(
            "Agents' EMAIL notifications go through this SMTP server. The password is kept in "
            "the OS keyring; everything else in settings.toml.")
        self._spawn = spawn
        self.enabled = QCheckBox("Send notifications by e-mail")
        self.enabled.setObjectName("email_enabled")
        self.enabled.setChecked(settings.email is not None)
        self.body.addWidget(self.enabled)
        form = ModelForm(EmailSettings, settings.email)
        form.setObjectName("form_email")
        self.forms["email"] = form
        self.body.addWidget(form)
        keys = QFormLayout()
        self.password = SecretField(secrets, EMAIL_PASSWORD, "SMTP password")
        self._secret_row(keys, self.password)
        self.body.addLayout(keys)
        row = QHBoxLayout()
        self.test_button = QPushButton("Send test e-mail")
        self.test_button.setObjectName("test_email")
        self.test_button.clicked.connect(self._test)
        self.result = QLabel()
        self.result.setObjectName("email_result")
        self.result.setWordWrap(True)
        row.addWidget(self.test_button)
        row.addWidget(self.result, 1)
        self.body.addLayout(row)
        self.enabled.toggled.connect(self._toggle)
        self._toggle(self.enabled.isChecked())
        self.finish()

    def _toggle(self, on: bool) -> None:
        self.forms["email"].setEnabled(on)
        self.test_button.setEnabled(on)

    def raw(self) -> dict[str, Any]:
        return {"email": self.forms["email"].raw() if self.enabled.isChecked() else None}

    def _test(self) -> None:
        from pydantic import ValidationError

        from app.ui.settings.connection import send_test_email

        form = self.forms["email"]
        form.clear_errors()
        try:
            settings = EmailSettings.model_validate(form.raw())
        except ValidationError as exc:
            for error in exc.errors():
                form.show_error(tuple(error["loc"]), error["msg"])
            show_result(self.result, CheckResult(False, "Fix the fields marked in red first."))
            return
        password = self.password.pending() or self.password.current()
        self.test_button.setEnabled(False)
        self.result.setText(f"Sending to {', '.join(settings.recipients)}…")
        set_look(self.result, "muted")

        async def run() -> None:
            try:
                show_result(self.result, await send_test_email(settings, password))
            finally:
                self.test_button.setEnabled(True)

        self._spawn(run())


class AppearancePage(Page):
    title = "Appearance"

    def __init__(self, prefs: UiPrefs) -> None:
        super().__init__("How this window looks and behaves on this computer.")
        self.group = QButtonGroup(self)
        self.buttons: dict[str, QRadioButton] = {}
        for theme in THEMES:
            button = QRadioButton(f"{theme.capitalize()} theme")
            button.setObjectName(f"theme_{theme}")
            button.setChecked(prefs.theme == theme)
            self.group.addButton(button)
            self.buttons[theme] = button
            self.body.addWidget(button)
        self.close_to_tray = QCheckBox(
            "Closing the window keeps Kestrel running in the system tray")
        self.close_to_tray.setObjectName("close_to_tray")
        self.close_to_tray.setChecked(prefs.close_to_tray)
        self.body.addWidget(self.close_to_tray)
        self.finish()

    def theme(self) -> str:
        return next((name for name, b in self.buttons.items() if b.isChecked()), "dark")
