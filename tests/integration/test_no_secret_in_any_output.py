"""No secret the app holds reaches any output, whatever a foreign server echoes back.

A recognisable value is planted in a real keyring (``tests/helpers/file_keyring.py``, loaded by
``keyring`` itself in this process and in every ``kestrel`` subprocess) for every kind of secret
Kestrel keeps: two LLM keys, an exchange's API key, secret and passphrase (Binance and OKX), the
Telegram bot token, the SMTP password and an MCP server's secret environment value. Then each
flows through the app's real paths to a local server that quotes it back:

- ``kestrel backtest --agents`` (Anthropic) and ``kestrel chat`` (OpenAI-compatible) against model
  servers that refuse the key and echo it, whole and masked;
- ``kestrel run`` with a working model server whose scripted Orchestrator notifies by e-mail (an
  SMTP server that refuses the login quoting the password and its base64 forms) and Telegram (a
  Bot API that quotes the request URL, which holds the token), calls an MCP tool whose server
  names its token in the tool's description, its error and its stderr, relays everything it was
  shown in a second notification (accepted this time), writes it to its memory and says it;
- ``create_order`` through the real executor, Risk Guard and ``CcxtBroker`` on the fake Binance
  (the order's refusal quotes the API key) and OKX (the balance read's refusal quotes the API key
  and the passphrase), with the app's logging set up on the workspace.

Then every output is searched as bytes for each value, each 8-character piece of it and its
masked forms: every file under each workspace and output folder (database, WAL, SHM, logs,
memory, backups, JSON), every stdout and stderr, the log file, the tool results, and what each
fake server received in bodies (the prompts, the e-mails, the Telegram messages, the exchange's
query strings and order bodies). What is *not* searched, because it is how each secret is meant
to be presented: the model servers' ``Authorization``/``x-api-key`` header, the exchange's
credential headers (``X-MBX-APIKEY``; OKX's ``OK-ACCESS-KEY`` and ``OK-ACCESS-PASSPHRASE``), the
Telegram Bot API's URL path (``/bot<token>/``), the SMTP AUTH exchange and the MCP server's
environment. The tests assert that each of those did carry its secret, so every search is about a
secret that really flowed. The exchanges' request signatures are searched but are no needle: each
is an HMAC of one request under the secret, from which the secret cannot be recovered; the
secret itself is a needle, and is found nowhere.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import random
import string
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import keyring.core
import pytest

from app.ccxt.broker import CcxtBroker, build_broker_exchange
from app.ccxt.credentials import key_names, load_keys
from app.ccxt.errors import RetryPolicy
from app.redaction import MARKER, REDACTOR
from app.risk.guard import RiskGuard
from app.runtime.recorders import SqliteRiskRecorder, SqliteToolCallRecorder
from app.secrets import SecretStore
from app.store.ledger import Ledger
from app.store.order_journal import OrderJournal
from app.tools.executor import ToolExecutor
from app.tools.registry import ToolRegistry
from app.tools.spec import ALL_PERMISSIONS, AgentContext
from app.tools.trade_tools import TradeTools
from app.workspace import Workspace, setup_logging
from tests.helpers import file_keyring
from tests.helpers.fake_exchange import FakeExchangeServer, Fault
from tests.helpers.fake_exchange.client import RecordedSleep, fake_settings, open_market
from tests.helpers.fake_llm_servers import FakeAnthropicServer, FakeOpenAIServer
from tests.helpers.fake_smtp import QuotingSmtp
from tests.helpers.fake_telegram import BOT_ID, FakeTelegram
from tests.helpers.leaks import files_under, leak_patterns, read_all
from tests.helpers.orders import order_entry
from tests.helpers.paths import BTC_USDT_1H
from tests.helpers.secret_flows import (
    MCP_CALL,
    MCP_ENTRY,
    SMTP_LOGIN,
    approve_leaky_tool,
    desk_settings,
    kestrel,
    model_step,
    notify_call,
    shown_results,
)

EXCHANGE_START_MS = 1_770_532_635_250  # the fake exchange's recordings (ccxt_fixtures.START_MS)


def _probe(prefix: str, seed: int) -> str:
    """A value no text holds by chance: letters only (so no 8-character piece of it is a word,
    a number or a date), first one upper-case (so no piece is mistaken for a vendor prefix)."""
    rng = random.Random(seed)
    return prefix + rng.choice(string.ascii_uppercase) + "".join(
        rng.choice(string.ascii_letters) for _ in range(27))


@dataclass(frozen=True, slots=True)
class Planted:
    kind: str
    entry: str  # the keyring entry's name
    value: str


PLANTED = (
    Planted("LLM key (OpenAI-compatible)", "llm.openai", _probe("sk-", 1)),
    Planted("LLM key (Anthropic)", "llm.anthropic", _probe("sk-ant-", 2)),
    Planted("Binance API key", key_names("binance")["api_key"], _probe("", 3)),
    Planted("Binance secret", key_names("binance")["secret"], _probe("", 4)),
    Planted("OKX API key", key_names("okx")["api_key"], _probe("", 5)),
    Planted("OKX secret", key_names("okx")["secret"], _probe("", 6)),
    Planted("OKX passphrase", key_names("okx")["password"], _probe("", 7)),
    Planted("Telegram bot token", "telegram.bot_token", f"{BOT_ID}:{_probe('AA', 8)}"),
    Planted("SMTP password", "email.password", _probe("", 9)),
    Planted("MCP secret env (NEWS_TOKEN)", MCP_ENTRY, _probe("news-", 10)),
)
SECRET = {p.entry: p.value for p in PLANTED}


def needles() -> dict[str, str]:
    """What must be found nowhere: each secret, and the SMTP password as the wire carries it:
    AUTH LOGIN's base64 password, and AUTH PLAIN's base64 "\\0login\\0password" blob from
    its first group of 4 characters that encodes a byte of the password (those before encode
    the login alone, which is no secret)."""
    password = SECRET["email.password"]
    found = {p.kind: p.value for p in PLANTED}
    head = f"\0{SMTP_LOGIN}\0".encode()
    plain = base64.b64encode(head + password.encode()).decode()
    found["SMTP password, AUTH PLAIN base64"] = plain[len(head) // 3 * 4:]
    found["SMTP password, AUTH LOGIN base64"] = base64.b64encode(password.encode()).decode()
    return found


def hits(outputs: dict[str, bytes]) -> dict[str, dict[str, list[str]]]:
    """``{needle kind: {output: [what was found]}}``, only where something was found."""
    found: dict[str, dict[str, list[str]]] = {}
    for kind, value in needles().items():
        patterns = leak_patterns(value)
        for name, data in outputs.items():
            kinds = [what for what, pattern in patterns if pattern.search(data)]
            if kinds:
                found.setdefault(kind, {})[name] = kinds
    return found


def describe(found: dict[str, dict[str, list[str]]]) -> str:
    """One line per leak: the secret, the output, and what of it was found there."""
    return "leaks:\n" + "\n".join(
        f"  {kind} in {output}: {', '.join(what[:3])}{' ...' if len(what) > 3 else ''}"
        for kind, where in found.items() for output, what in where.items())


# -- the keyring -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def keyring_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("keyring") / "keyring.json"
    store = SecretStore(backend=file_keyring.at(path), environ={})
    for planted in PLANTED:
        store.set(planted.entry, planted.value)
    REDACTOR.forget_all()  # from here on, only what the app itself reads may teach the redactor
    return path


@pytest.fixture(scope="module")
def this_process_keyring(keyring_file: Path) -> Iterator[None]:
    """``keyring`` in this process answers from the planted file (as the children's do)."""
    saved = keyring.core._keyring_backend
    keyring.core._keyring_backend = file_keyring.at(keyring_file)
    try:
        yield
    finally:
        keyring.core._keyring_backend = saved
        REDACTOR.forget_all()


def child_environment(keyring_file: Path) -> dict[str, str]:
    """This environment without any ``KESTREL_*`` variable (every secret comes from the
    keyring), plus the variables that make the child's ``keyring`` read the planted file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
    return {**env, **file_keyring.environment(keyring_file)}


# -- the scripted Orchestrator of ``kestrel run`` ------------------------------------------------


@dataclass
class ScriptedOrchestrator:
    """Answers the Orchestrator's model calls, one step each; step 3 turns the channels on."""

    smtp: QuotingSmtp
    telegram: FakeTelegram
    shown: list[str] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> str:
        step = model_step(body)
        seen = shown_results(body)
        self.shown.append(seen)
        if step == 0:
            return notify_call("Checking every channel.")
        if step == 1:
            return MCP_CALL
        if step == 2:
            self.smtp.refusing = False
            self.telegram.echo_token = False
            return notify_call(f"What the channels said: {seen}")
        if step == 3:
            content = base64.b64encode(seen.encode()).decode()
            return ("<write_agent_memory_file><file_path>notes/channels.md</file_path>"
                    f"<content_base64>{content}</content_base64></write_agent_memory_file>")
        return f"All done. What I was shown: {seen}"


def chat_settings(folder: Path, llm_url: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.toml").write_text(
        f'[llm]\nprovider = "openai-compatible"\nmodel = "gpt-test"\nbase_url = "{llm_url}"\n'
        'api_key_name = "llm.openai"\nmax_retries = 0\ntimeout_s = 20\n', encoding="utf-8")


# -- orders on a live exchange, in this process ------------------------------------------------

ORDER = ("<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>LIMIT</order_type>"
         "<quantity>0.01</quantity><price>50000.00</price><client_order_id>{key}"
         "</client_order_id></create_order>")


async def order_on(server: FakeExchangeServer, venue: str, workspace: Workspace,
                   endpoint: str) -> tuple[str, dict[str, bytes]]:
    """One ``create_order`` tool call through the executor, the Risk Guard and a
    ``CcxtBroker`` whose keys come from the keyring; the refusal echoes the credentials.
    Returns the tool result, and the workspace's files read while its database is open (the
    newest pages are in the WAL until a checkpoint)."""
    keys = load_keys(venue, SecretStore())
    market = await open_market(server, venue)
    exchange = build_broker_exchange(venue, fake_settings(server, venue), keys)
    exchange.timeout_on_exit = 0
    ledger = Ledger(workspace.db_path)
    journal = OrderJournal(workspace.db_path)
    try:
        await exchange.load_markets()
        broker = CcxtBroker(exchange, market, journal, clock=server.now,
                            retry=RetryPolicy(retries=1, base_s=0.0), sleep=RecordedSleep(),
                            balance_fresh_s=0.0)
        registry = ToolRegistry()
        entry = order_entry(broker, RiskGuard([], SqliteRiskRecorder(ledger)))
        for spec in TradeTools(entry).specs():
            registry.register(spec)
        executor = ToolExecutor(registry, SqliteToolCallRecorder(ledger), server.now)
        server.fail(venue, endpoint, Fault.echo(), times=None)
        # the live order as the agent's loop sends it once the person approved it
        ctx = AgentContext(agent_id=f"trader-{venue}", permissions=ALL_PERMISSIONS,
                           role="trader", watched_symbols=("BTC/USDT",), approved=True)
        result = await executor.execute_text(ctx, ORDER.format(key=f"{venue}-1"))
        assert result is not None
        files = {f"{path} (while the {venue} order's database was open)": path.read_bytes()
                 for path in files_under(workspace.root)}
        return result.xml, files
    finally:
        server.clear_faults()
        await exchange.close()
        await market.close()
        journal.close()
        ledger.close()


# -- the whole run -------------------------------------------------------------------------------


@dataclass
class World:
    """Everything the runs left behind, and what the servers saw."""

    outputs: dict[str, bytes]
    run: subprocess.CompletedProcess[bytes]
    chat: subprocess.CompletedProcess[bytes]
    backtest: subprocess.CompletedProcess[bytes]
    orchestrator: ScriptedOrchestrator
    approved_description: str
    working_llm: FakeOpenAIServer
    refusing_llm: FakeOpenAIServer
    refusing_anthropic: FakeAnthropicServer
    telegram: FakeTelegram
    smtp: QuotingSmtp
    exchange: FakeExchangeServer
    tool_results: dict[str, str]


def served(server: FakeOpenAIServer | FakeAnthropicServer) -> bytes:
    """What a model server received in bodies: every prompt, as JSON."""
    return json.dumps([r.body for r in server.requests], ensure_ascii=False).encode()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, keyring_file: Path,
          this_process_keyring: None) -> Iterator[World]:
    root = tmp_path_factory.mktemp("outputs")
    env = child_environment(keyring_file)
    with (FakeTelegram(token=SECRET["telegram.bot_token"]) as telegram,
          QuotingSmtp(refusing=True) as smtp,
          FakeOpenAIServer(api_key=SECRET["llm.openai"]) as working_llm,
          FakeOpenAIServer(api_key="sk-the-key-the-server-wants-0000",
                           echo_key="both") as refusing_llm,
          FakeAnthropicServer(api_key="sk-ant-the-key-the-server-wants-0000",
                              echo_key="both") as refusing_anthropic,
          FakeExchangeServer(EXCHANGE_START_MS) as exchange):
        telegram.echo_token = True
        orchestrator = ScriptedOrchestrator(smtp, telegram)
        working_llm.default = orchestrator

        run_ws = root / "run-workspace"
        desk_settings(run_ws, llm_url=working_llm.base_url, llm_key_name="llm.openai",
                      telegram_url=telegram.base_url, smtp_port=smtp.port)
        description = approve_leaky_tool(run_ws, SecretStore(), EXCHANGE_START_MS)
        run = kestrel(env, "run", "--workspace", run_ws, "--data", BTC_USDT_1H, "--setup",
                      "check every notification channel and the news tool", "--for", "2h",
                      "--speed", "100000")

        chat_ws = root / "chat-workspace"
        chat_settings(chat_ws, refusing_llm.base_url)
        chat = kestrel(env, "chat", "--workspace", chat_ws, "--data", BTC_USDT_1H,
                       stdin=b"status\n/resume\n/quit\n")

        out = root / "backtest"
        backtest = kestrel(
            env, "backtest", "--data", BTC_USDT_1H, "--agents", "AnalystAgent_Trend_v1",
            "TraderAgent_Default_v1", "--provider", "anthropic", "--model", "claude-test",
            "--base-url", refusing_anthropic.base_url, "--api-key-name", "llm.anthropic",
            "--yes", "--bars", "24", "--no-progress", "--out", out)

        exchange_ws = Workspace.at(root / "exchange-workspace").ensure()
        tool_results, log_files = exchange_orders(exchange, exchange_ws)

        outputs = read_all(files_under(root))
        outputs.update(log_files)
        for name, done in (("run", run), ("chat", chat), ("backtest", backtest)):
            outputs[f"kestrel {name}: stdout"] = done.stdout
            outputs[f"kestrel {name}: stderr"] = done.stderr
        outputs.update({f"tool result: {k}": v.encode() for k, v in tool_results.items()})
        outputs["prompts received by the working model server"] = served(working_llm)
        outputs["prompts received by the refusing model server"] = served(refusing_llm)
        outputs["prompts received by the refusing Anthropic server"] = served(refusing_anthropic)
        outputs["Telegram Bot API calls (parameters)"] = json.dumps(
            telegram.calls, ensure_ascii=False, default=str).encode()
        outputs["e-mails received by the SMTP server"] = b"\n".join(smtp.messages)
        outputs["exchange requests (query strings and bodies)"] = json.dumps(
            [[r.venue, r.endpoint, r.path, dict(r.query)] for r in exchange.requests]).encode()
        yield World(outputs, run, chat, backtest, orchestrator, description, working_llm,
                    refusing_llm, refusing_anthropic, telegram, smtp, exchange, tool_results)


def exchange_orders(server: FakeExchangeServer, workspace: Workspace,
                    ) -> tuple[dict[str, str], dict[str, bytes]]:
    """Both exchange flows with the app's logging on the workspace: the tool results, and the
    workspace's files read while its database was open (WAL and SHM included)."""
    root = logging.getLogger()
    before = list(root.handlers)
    level = root.level
    setup_logging(workspace)  # the app's own handlers and filter, writing logs/kestrel.log
    try:
        async def both() -> tuple[dict[str, str], dict[str, bytes]]:
            binance, early = await order_on(server, "binance", workspace, "order.create")
            # a careless log line about a key the process has read: the handlers' filter
            # must catch it (a key this process never read, it cannot log either)
            logging.getLogger("app.test").warning("keys: %s", SECRET["exchange.binance.api_key"])
            okx, late = await order_on(server, "okx", workspace, "private")
            return {"binance create_order": binance, "okx create_order": okx}, early | late

        results, files = asyncio.run(both())
    finally:
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)
            handler.close()
        for handler in before:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)
    return results, files


# -- the tests -----------------------------------------------------------------------------------


def test_no_planted_secret_reaches_any_output(world: World) -> None:
    outputs = world.outputs
    size = sum(len(data) for data in outputs.values())
    print(f"\nsearched {len(outputs)} outputs, {size:,} bytes, for {len(needles())} secrets "
          "(each whole, in every 8-character piece and masked, in any letter case)")
    names = {Path(name.split(" (")[0]).name for name in outputs}
    assert {"kestrel.db", "kestrel.db-wal", "kestrel.db-shm", "kestrel.log", "channels.md",
            "summary.json", "mcp_approvals.json", "settings.toml"} <= names, sorted(names)
    found = hits(outputs)
    assert not found, describe(found)


def test_every_secret_really_flowed_where_it_belongs(world: World) -> None:
    """The searches are about secrets the app used: each one reached its server by its own
    channel (the ones not searched), and each server quoted it back."""
    bearer = [r.headers.get("authorization") for r in world.working_llm.requests]
    assert bearer and set(bearer) == {f"Bearer {SECRET['llm.openai']}"}
    assert any(r.headers.get("authorization") == f"Bearer {SECRET['llm.openai']}"
               for r in world.refusing_llm.requests)
    assert any(SECRET["llm.anthropic"] in (r.headers.get("x-api-key"), r.headers.get(
        "authorization", "").removeprefix("Bearer ")) for r in world.refusing_anthropic.requests)
    credentials = [dict(r.headers) for r in world.exchange.requests if r.headers]
    assert any(c.get("X-MBX-APIKEY") == SECRET["exchange.binance.api_key"] for c in credentials)
    assert any(c.get("OK-ACCESS-KEY") == SECRET["exchange.okx.api_key"]
               and c.get("OK-ACCESS-PASSPHRASE") == SECRET["exchange.okx.password"]
               for c in credentials)
    assert "getMe" in world.telegram.methods(), "the bot signed in with the planted token"
    assert (SMTP_LOGIN, SECRET["email.password"]) in {(login, pw) for _m, login, pw
                                                       in world.smtp.logins}
    assert world.smtp.messages and world.telegram.sent, "the second notification arrived"
    assert "Fetch news on a topic (signed in with token [redacted])." == \
        world.approved_description


def test_each_echo_arrived_redacted_where_a_person_or_the_model_reads_it(world: World) -> None:
    run_out = world.run.stdout.decode()
    assert world.run.returncode == 0, world.run.stderr.decode()[-2000:]
    relayed = world.orchestrator.shown[2]  # what the model saw after the notice and the MCP call
    assert "refused the login of kestrel" in relayed and MARKER in relayed, relayed
    assert "chat not found" in relayed.lower(), relayed
    assert "upstream refused the request" in relayed, relayed
    assert "All done" in run_out
    binance = world.tool_results["binance create_order"]
    okx = world.tool_results["okx create_order"]
    assert "Invalid API-key" in binance and f"Received key {MARKER}" in binance, binance
    assert f"OK-ACCESS-KEY {MARKER}, OK-ACCESS-PASSPHRASE {MARKER}" in okx, okx
    assert world.chat.returncode == 0
    assert "API key was refused" in world.backtest.stdout.decode() + world.backtest.stderr.decode()


# -- crash reports ---------------------------------------------------------------------------------


def _read_and_fail(what: str) -> None:
    """A code path with a bug: it puts every secret it read into its exception's message."""
    secrets = SecretStore()
    quoted = ", ".join(f"{p.kind}={secrets.get(p.entry)}" for p in PLANTED)
    raise RuntimeError(f"{what} failed; it had {quoted}")


@pytest.mark.qt_no_exception_capture
@pytest.mark.qt_log_ignore("propagateSizeHints")
def test_a_crash_report_in_the_window_shows_and_logs_no_secret(
    qtbot: Any, this_process_keyring: None, caplog: pytest.LogCaptureFixture,
) -> None:
    """Both ways a bug reaches the ErrorReporter: an exception in a Qt slot (sys.excepthook)
    and one in the event loop (its exception handler). What it keeps, logs and shows in the
    dialog, details included (meant to be pasted into a bug report), is searched."""
    from PySide6.QtWidgets import QMessageBox, QPushButton, QWidget

    from app.ui.errors import ErrorReporter

    window = QWidget()
    qtbot.addWidget(window)
    button = QPushButton("Sync", window)
    button.clicked.connect(lambda: _read_and_fail("the slot"))
    reporter = ErrorReporter(window, interactive=True)
    loop = asyncio.new_event_loop()
    saved_hook = sys.excepthook
    reporter.install(loop)
    try:
        with caplog.at_level(logging.ERROR, logger="app.ui.errors"):
            button.click()
            loop.call_soon(_read_and_fail, "the loop callback")
            loop.run_until_complete(asyncio.sleep(0.05))
    finally:
        sys.excepthook = saved_hook
        loop.close()
    boxes = window.findChildren(QMessageBox)
    assert len(reporter.reports) == 2 and len(boxes) == 2, reporter.reports
    outputs = {f"report {i} {part}": text.encode()
               for i, report in enumerate(reporter.reports) for part, text in zip(
                   ("summary", "details"), report, strict=True)}
    for i, box in enumerate(boxes):
        for part, text in (("text", box.text()), ("informative", box.informativeText()),
                           ("details", box.detailedText())):
            outputs[f"dialog {i} {part}"] = text.encode()
    outputs["log records"] = caplog.text.encode()
    assert all("Traceback" in box.detailedText() for box in boxes)
    assert all(MARKER in box.text() and "RuntimeError" in box.text() for box in boxes)
    found = hits(outputs)
    print(f"\nsearched {len(outputs)} crash-report outputs, "
          f"{sum(map(len, outputs.values())):,} bytes")
    assert not found, describe(found)


def test_a_command_that_crashes_prints_its_traceback_without_any_secret(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    this_process_keyring: None,
) -> None:
    """``kestrel`` prints the traceback of a bug (its exit code 1) through the redactor."""
    from app.cli import main as cli

    monkeypatch.setattr(cli, "setup_logging", lambda *_a, **_k: None)  # this process's stays
    monkeypatch.setitem(cli.COMMANDS, "indicators", lambda _args: _read_and_fail("indicators"))
    assert cli.main(["indicators"]) == cli.EXIT_INTERNAL_ERROR
    out, err = capsys.readouterr()
    assert "Traceback" in err and "RuntimeError: indicators failed" in err and MARKER in err
    found = hits({"stdout": out.encode(), "stderr": err.encode()})
    assert not found, describe(found)
