"""The window on a LIVE account of the fake Binance: confirmation, unknown orders, LIVE labels,
the per-agent opt-in and an approval given in the window.

The window is the real one, on the real qasync loop; ccxt's binance class talks to the fake over
HTTP with keys from an in-memory keyring backend.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QLabel, QMessageBox

from app.ccxt.gate import GATES
from app.domain.errors import OperationalError
from app.domain.trading import Mode
from app.runtime.live_startup import UnknownOrdersUndecided
from app.runtime.venue import VenueSpec
from app.ui.chat.bubbles import QuestionCard
from app.ui.chat.cards import ToolCard
from app.ui.live_dialogs import LiveConfirmDialog, UnknownOrdersDialog
from app.ui.main_window import MainWindow
from app.ui.settings.prefs import UiPrefs
from app.ui.settings_io import save_settings
from app.ui.tray import TrayState, draw_icon
from app.workspace import Workspace
from tests.helpers.eventually import eventually
from tests.helpers.fake_exchange import FakeExchangeServer
from tests.helpers.fake_exchange.live import keyring_with_keys, live_settings
from tests.integration.ccxt_fixtures import START_MS

TRADER = "TraderAgent_Default_v1"
pytestmark = [pytest.mark.filterwarnings("ignore::ResourceWarning"),
              pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                        "does not support activat")]


@pytest.fixture(scope="module", name="exchange")
def exchange_fixture():
    with FakeExchangeServer(START_MS) as server:
        yield server


@pytest.fixture(name="server")
def server_fixture(exchange: FakeExchangeServer) -> FakeExchangeServer:
    exchange.clear_faults()
    exchange.requests.clear()
    exchange.now.set(START_MS)
    exchange.binance_account.reset()
    GATES.reset(clock=exchange.now)
    return exchange


class LiveDesk:
    """Windows on one workspace whose settings point ccxt at the fake."""

    def __init__(self, tmp_path: Path, qtbot: Any, qloop: Any, server: FakeExchangeServer):
        self.workspace = Workspace.at(tmp_path / "ws").ensure()
        save_settings(self.workspace.settings_path, live_settings(server))
        self.settings_file = str(tmp_path / "kestrel-ui.ini")
        self.qtbot, self.qloop, self.server = qtbot, qloop, server
        self.windows: list[MainWindow] = []

    def run(self, scenario: Any) -> None:
        async def guarded() -> None:
            try:
                await scenario()
            finally:
                for window in self.windows:
                    window.close()
                    await window.aclose()

        self.qloop.run_until_complete(guarded())

    def window(self) -> MainWindow:
        prefs = UiPrefs(QSettings(self.settings_file, QSettings.Format.IniFormat))
        window = MainWindow(prefs, keyring_with_keys(), interactive_errors=False)
        self.qtbot.addWidget(window)
        window.show()
        self.windows.append(window)
        return window

    def opening(self, window: MainWindow) -> asyncio.Task[Any]:
        spec = VenueSpec.live_account("binance", ("BTC/USDT",), "USDT")
        return asyncio.ensure_future(window.open_workspace(self.workspace, paced=False,
                                                           venue=spec))


@pytest.fixture(name="live_desk")
def live_desk_fixture(tmp_path: Path, qapp: Any, qtbot: Any, qloop: Any,
                      server: FakeExchangeServer) -> LiveDesk:
    qapp.setQuitOnLastWindowClosed(False)
    return LiveDesk(tmp_path, qtbot, qloop, server)


def dialog_of[T](window: MainWindow, kind: type[T]) -> T | None:
    found = window.findChildren(kind)
    return found[-1] if found and found[-1].isVisible() else None


async def confirm(qtbot: Any, window: MainWindow, typed: str = "binance") -> LiveConfirmDialog:
    await eventually(lambda: dialog_of(window, LiveConfirmDialog) is not None)
    dialog = dialog_of(window, LiveConfirmDialog)
    assert dialog is not None
    qtbot.keyClicks(dialog.typed, typed)
    return dialog


async def asked_about_unknown_orders(
    qtbot: Any, desk: LiveDesk, window: MainWindow
) -> tuple[asyncio.Task[Any], UnknownOrdersDialog]:
    """Open the live workspace, confirmed, up to the question about exchange orders the
    journal does not know: the opening (still waiting) and the question."""
    task = desk.opening(window)
    dialog = await confirm(qtbot, window)
    qtbot.mouseClick(dialog.confirm, Qt.MouseButton.LeftButton)
    await eventually(lambda: dialog_of(window, UnknownOrdersDialog) is not None)
    unknown = dialog_of(window, UnknownOrdersDialog)
    assert unknown is not None
    return task, unknown


async def open_confirmed(qtbot: Any, desk: LiveDesk, window: MainWindow) -> None:
    task = desk.opening(window)
    dialog = await confirm(qtbot, window)
    qtbot.mouseClick(dialog.confirm, Qt.MouseButton.LeftButton)
    await task


def is_red(label: QLabel) -> bool:
    """The tag as drawn: its middle on the theme's red, not on the card's background."""
    image = label.grab().toImage()
    colour = image.pixelColor(2, image.height() // 2)
    return colour.red() > 150 and colour.green() < 110 and colour.blue() < 110


def place_on_exchange(server: FakeExchangeServer) -> int:
    price = Decimal(str(server.state.last("BTC/USDT"))) * Decimal("0.9")
    answer = server.binance_account.create({
        "symbol": "BTCUSDT", "side": "BUY", "type": "LIMIT", "quantity": "0.01000",
        "price": f"{price:.2f}", "newClientOrderId": "web-1", "timeInForce": "GTC"})
    return int(answer["orderId"])


def test_live_needs_the_exchange_typed_and_then_says_live_everywhere(
    live_desk: LiveDesk, qtbot: Any
) -> None:
    async def scenario() -> None:
        window = live_desk.window()
        task = live_desk.opening(window)
        dialog = await confirm(qtbot, window, typed="binanc")
        warning = dialog.findChild(QLabel, "live_warning")
        assert "LIVE · REAL MONEY" in warning.text() and "REAL money" in warning.text()
        assert dialog.windowTitle() == "Trade LIVE on binance with real money?"
        assert not dialog.confirm.isEnabled()  # a near miss cannot confirm
        qtbot.keyClicks(dialog.typed, "e")
        assert dialog.confirm.isEnabled()
        qtbot.mouseClick(dialog.confirm, Qt.MouseButton.LeftButton)
        await task
        world = window.world
        assert world is not None and world.venue.is_live_account
        assert window.windowTitle().startswith("● LIVE · REAL MONEY — Kestrel")
        assert "LIVE binance" in window.windowTitle()
        account = window.panels["account"]
        assert account.badge.mode is Mode.LIVE and "LIVE" in account.badge.text()
        assert account.venue.text().startswith("LIVE binance")
        assert all(account.tabs.tabText(i).startswith("LIVE ") for i in range(3))
        assert window.replay_bar is None  # a live market runs in real time
        assert window.tray.router.live.startswith("LIVE binance")
        assert window.tray.router.describe().startswith("Kestrel: ● LIVE binance")
        live_icon = draw_icon(TrayState.IDLE, live=True).toImage()
        assert window.tray.icon(TrayState.IDLE).pixmap(64, 64).toImage() == live_icon
        assert live_icon != draw_icon(TrayState.IDLE).toImage()

    live_desk.run(scenario)


def test_cancelling_the_confirmation_opens_nothing_and_sends_nothing(
    live_desk: LiveDesk, qtbot: Any, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        window = live_desk.window()
        task = live_desk.opening(window)
        dialog = await confirm(qtbot, window, typed="binance")
        qtbot.mouseClick(dialog.cancel, Qt.MouseButton.LeftButton)
        with pytest.raises(OperationalError, match="not confirmed"):
            await task
        assert window.world is None
        assert server.requests == []

    live_desk.run(scenario)


def test_an_unknown_exchange_order_is_shown_and_adopted_from_the_window(
    live_desk: LiveDesk, qtbot: Any, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        order_id = place_on_exchange(server)
        window = live_desk.window()
        task, unknown = await asked_about_unknown_orders(qtbot, live_desk, window)
        assert unknown.list.count() == 1
        assert f"exchange id {order_id}" in unknown.list.item(0).text()
        assert not window.world.agents.manager._started  # noqa: SLF001 - agents wait
        header = window.panels["chat"].header
        await eventually(lambda: header.state.text() == "not started")  # not "running"
        assert ("binance holds 1 open order Kestrel's journal does not know; no agent runs until "
                "you decide") in header.status_text()
        agents, status = window.panels["agents"], window.statusBar()
        await agents.refresh()
        assert agents.summary.text() == "1 agent · not started yet"
        state = agents.model.index(0, 1)
        assert state.data() == "not started"  # not the "running" it was saved in
        status.refresh()
        assert status.agents_label.text() == "Agents: 1 not started yet"
        qtbot.mouseClick(unknown.adopt, Qt.MouseButton.LeftButton)
        await task
        assert header.state.text() != "not started" and "no agent runs" not in (
            header.status_text())
        await agents.refresh()
        status.refresh()
        assert agents.summary.text() == "1 agent · 1 running"
        assert agents.model.index(0, 1).data() == "running"
        assert status.agents_label.text() == "Agents: 1 running"
        journal = window.world.venue.broker.journal
        entry = journal.by_exchange_id("binance", str(order_id))
        assert entry is not None and entry.agent_id == "person"
        account = window.panels["account"]
        await account.refresh()
        await eventually(lambda: account.orders.rowCount() == 1)
        status = account.orders.index(0, 8).data()
        assert status == "LIVE · SUBMITTED"  # an open order, as the port names it

    live_desk.run(scenario)


def test_deciding_later_keeps_every_agent_stopped_and_the_chat_says_why(
    live_desk: LiveDesk, qtbot: Any, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        place_on_exchange(server)
        window = live_desk.window()
        task, unknown = await asked_about_unknown_orders(qtbot, live_desk, window)
        qtbot.mouseClick(unknown.later, Qt.MouseButton.LeftButton)
        with pytest.raises(UnknownOrdersUndecided):
            await task
        assert not window.world.agents.manager._started  # noqa: SLF001 - agents stay stopped
        header = window.panels["chat"].header
        assert header.state.text() == "not started"
        assert ("No agent runs: the 1 open order on binance Kestrel's journal does not know "
                "wait for your decision. Open the workspace again to decide.") in (
            header.status_text())
        assert server.count("binance", "order.create") == 0

    live_desk.run(scenario)


def test_a_trader_allowed_in_the_agents_panel_gets_its_live_order_approved_in_the_chat(
    live_desk: LiveDesk, qtbot: Any, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        window = live_desk.window()
        await open_confirmed(qtbot, live_desk, window)
        world = window.world
        info = await world.agents.manager.create_agent(TRADER, "T", {"symbols": ["BTC/USDT"]})
        agents = window.panels["agents"]
        await agents.refresh()
        assert agents.select_agent(info.agent_id)
        grant = agents.live_grant
        assert grant is not None and grant.action.isEnabled() and not grant.action.isChecked()
        grant.action.trigger()
        box = grant.confirm_box
        assert box is not None and "REAL orders with REAL money on binance" in box.text()
        allow = next(b for b in box.buttons() if b.text() == "Allow T")
        qtbot.mouseClick(allow, Qt.MouseButton.LeftButton)
        assert grant.action.isChecked()
        assert world.venue.broker.grants.get(info.agent_id) is not None

        price = await world.venue.broker.last_price("BTC/USDT")
        world.agents.queue.enqueue(info.agent_id, "NEW_MARKET_ANALYSIS_SIGNAL", {
            "symbol": "BTC/USDT", "side": "BUY", "confidence": "0.8", "price": str(price),
            "stop_loss": str((price * Decimal("0.98")).quantize(Decimal("0.01"))),
            "take_profit": str((price * Decimal("1.04")).quantize(Decimal("0.01"))),
            "reason": "test signal"}, "agent:analyst-1")
        chat = window.panels["chat"]
        window.open_conversation(info.agent_id)
        # the rule Trader may size again on the exchange's step: then it is asked again
        for round_ in range(3):
            await asyncio.wait_for(world.agents.manager.wait_idle(), 30)
            if not world.agents.questions.pending():
                break
            await eventually(lambda: any(c.entry.pending and c.entry.question_id
                                    for c in chat.transcript.cards
                                    if isinstance(c, QuestionCard)))
            card = next(c for c in chat.transcript.cards
                        if isinstance(c, QuestionCard) and c.entry.pending)
            assert card.title.text() == "Approval needed · LIVE order · T"
            held = [c for c in chat.transcript.cards if isinstance(c, ToolCard)
                    and c.entry.tool_name == "create_order"]
            assert held and held[-1].live_tag is not None  # the held order says LIVE too
            if round_ == 0:
                assert server.count("binance", "order.create") == 0  # held for the person
            approve = next(b for b in card.buttons if b.text() == "Approve")
            qtbot.mouseClick(approve, Qt.MouseButton.LeftButton)
        await asyncio.wait_for(world.agents.manager.wait_idle(), 30)
        assert server.count("binance", "order.create") >= 1
        assert server.binance_account.total("BTC") > 0
        await eventually(lambda: any(isinstance(c, ToolCard) and c.entry.tool_name == "create_order"
                                and c.live_tag is not None for c in chat.transcript.cards))
        # read back from the stored conversation (as when it is opened later): still tagged
        orchestrator = await world.ensure_orchestrator()
        window.open_conversation(orchestrator.agent_id)
        window.open_conversation(info.agent_id)
        await eventually(lambda: not chat.loading and any(
            isinstance(c, ToolCard) and c.entry.tool_name == "create_order"
            for c in chat.transcript.cards))
        order_cards = [c for c in chat.transcript.cards if isinstance(c, ToolCard)
                       and c.entry.tool_name in ("create_order", "set_position_tp_sl_orders")]
        assert order_cards and all(c.live_tag is not None and c.live_tag.text() == "LIVE"
                                   for c in order_cards)
        assert all(is_red(c.live_tag) for c in order_cards)  # drawn, not only present
        other = [c for c in chat.transcript.cards if isinstance(c, ToolCard)
                 and c.entry.tool_name not in ("create_order", "cancel_order",
                                               "set_position_tp_sl_orders", "close_position")]
        assert all(c.live_tag is None for c in other)

    live_desk.run(scenario)


def test_refusing_to_allow_live_trading_keeps_the_agent_refused(
    live_desk: LiveDesk, qtbot: Any
) -> None:
    async def scenario() -> None:
        window = live_desk.window()
        await open_confirmed(qtbot, live_desk, window)
        world = window.world
        info = await world.agents.manager.create_agent(TRADER, "T", {"symbols": ["BTC/USDT"]})
        agents = window.panels["agents"]
        await agents.refresh()
        agents.select_agent(info.agent_id)
        agents.live_grant.action.trigger()
        box = agents.live_grant.confirm_box
        qtbot.mouseClick(box.button(QMessageBox.StandardButton.Cancel),
                         Qt.MouseButton.LeftButton)
        assert not agents.live_grant.action.isChecked()
        assert world.venue.broker.grants.get(info.agent_id) is None

    live_desk.run(scenario)


def test_during_a_ban_the_status_bar_says_until_when_requests_are_paused(
    live_desk: LiveDesk, qtbot: Any, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        window = live_desk.window()
        await open_confirmed(qtbot, live_desk, window)
        world = window.world
        assert world is not None
        await window.tasks.wait()  # the panels' first reads are done
        label = window.statusBar().findChild(QLabel, "status_connection")
        usual = label.text()
        server.ban("binance", 120)
        await world.venue.driver.round()  # the account watcher's poll meets the ban
        await eventually(lambda: label.text() != usual)
        assert label.text() == "binance: requests paused until 06:39:15 UTC (ban, HTTP 418)"
        assert "sends the exchange nothing, reads or orders, before then" in label.toolTip()
        asked = len(server.requests)
        await world.venue.driver.round()
        assert len(server.requests) == asked
        server.now.set(START_MS + 120_000)  # the ban is over
        await eventually(lambda: label.text() == usual)
        await world.venue.driver.round()
        assert len(server.requests) > asked
        assert label.text() == usual

    live_desk.run(scenario)


def test_a_ban_met_by_a_read_the_window_started_is_said_in_the_status_bar_not_as_a_crash(
    live_desk: LiveDesk, qtbot: Any, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        window = live_desk.window()
        await open_confirmed(qtbot, live_desk, window)
        await window.tasks.wait()
        server.ban("binance", 120)
        window.tasks.spawn(window.panels["account"].refresh())  # as the window does on opening
        await window.tasks.wait()
        assert window.errors.reports == []  # no "unexpected error" report, no traceback
        assert window.statusBar().currentMessage().startswith(
            "binance has banned requests until 06:39:15 UTC (HTTP 418, Retry-After 120 s)")

    live_desk.run(scenario)
