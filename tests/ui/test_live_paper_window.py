"""The real window on paper on live quotes (the fake Binance on 127.0.0.1, on the wall clock):
the title, banner and account panel say which venue it is, the book is the exchange's own, the
replay controls are gone, and Settings > Exchanges shows what an exchange offers and tests it."""

from __future__ import annotations

from decimal import Decimal

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QLabel, QPushButton

from app.domain.trading import OrderType, Side
from app.secrets import SecretStore
from app.trading.port import OrderRequest
from app.ui.settings.settings_dialog import SettingsDialog
from tests.helpers.eventually import eventually
from tests.helpers.fake_exchange import FakeExchangeServer, Fault
from tests.helpers.fake_exchange.__main__ import point_workspace
from tests.helpers.fake_exchange.tape import wall_ms
from tests.helpers.unreachable import no_retry_waits  # noqa: F401 - a fixture

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise")

LABEL = "Paper on live quotes (binance)"


@pytest.fixture(name="wall_exchange", scope="module")
def wall_exchange_fixture():
    now = wall_ms()
    with FakeExchangeServer(now) as server:
        server.now.run_with_wall_clock(now)
        yield server


def test_a_workspace_set_to_live_paper_opens_on_binances_live_quotes_and_real_book(
    desk, wall_exchange
):
    point_workspace(desk.workspace.root, wall_exchange)

    async def scenario() -> None:
        window = await desk.open(paced=True)
        world = window.world
        assert world is not None and world.venue.label == LABEL
        assert LABEL in window.windowTitle()
        assert window.panels["account"].venue.text() == LABEL
        assert LABEL in window.banner.text() and "Offline replay" not in window.banner.text()
        assert window.replay_bar is None  # live time cannot be paused or sped up
        book = window.panels["book"]
        assert book.symbol == "BTC/USDT"
        await eventually(lambda: book.book is not None and "bid" in book.header.text())
        shown = book.book
        assert shown is not None and not shown.synthetic
        assert "synthetic" not in book.header.text()
        live = await world.venue.market.order_book("BTC/USDT", 1)
        assert abs(shown.best_ask - live.best_ask) < Decimal(50)  # the fake's book, moving
        assert wall_exchange.count("binance", "depth") > 0
        # time flows by itself: the driver reads and settles on the wall clock
        driver = world.venue.driver
        rounds = driver.rounds
        await eventually(lambda: driver.rounds > rounds)

    desk.run(scenario)


def test_the_status_bar_says_when_live_reads_fail_and_when_they_work_again(
    desk, wall_exchange
):
    point_workspace(desk.workspace.root, wall_exchange)

    async def scenario() -> None:
        window = await desk.open(paced=True)
        world = window.world
        assert world is not None
        await world.venue.broker.create_order(OrderRequest(
            "person", "BTC/USDT", Side.BUY, OrderType.LIMIT, Decimal("0.01"),
            price=Decimal("1000")))  # far below: it rests, and its quotes are read every tick
        label = window.statusBar().findChild(QLabel, "status_connection")
        wall_exchange.fail("binance", "*", Fault.status(503), times=None)
        try:
            await eventually(lambda: "market reads failing" in label.text())
            assert label.text() == f"{LABEL}: market reads failing, retrying"
            assert "binance" in label.toolTip()
        finally:
            wall_exchange.clear_faults()
        await eventually(lambda: label.text() == LABEL)

    desk.run(scenario)


@pytest.mark.usefixtures("no_retry_waits")
def test_without_network_the_window_says_why_and_offers_retry_and_the_offline_replay(
    desk, tmp_path, qtbot
):
    """Live-paper without a network left a dead window: an empty title, the error in one line
    cut off at both edges, an empty Trading menu."""
    desk.workspace.ensure()
    (desk.workspace.root / "settings.toml").write_text(
        '[venue]\nkind = "live-paper"\nexchange = "binance"\n'
        '[exchanges.binance]\ntimeout_s = 2\n'
        '[exchanges.binance.ccxt_config.urls.api]\npublic = "http://127.0.0.1:9/api/v3"\n'
        'v3 = "http://127.0.0.1:9/api/v3"\n', encoding="utf-8")

    async def scenario() -> None:
        from app.ui.app import open_or_explain
        from app.ui.main_window import MainWindow
        from app.ui.settings.prefs import UiPrefs

        window = MainWindow(UiPrefs(QSettings(str(tmp_path / "ui.ini"),
                                              QSettings.Format.IniFormat)),
                            SecretStore(), interactive_errors=False)
        desk.qtbot.addWidget(window)
        window.resize(1280, 720)
        window.show()
        assert await open_or_explain(window, desk.workspace) is None  # no box: the window says it
        page = window.open_failed
        assert page is not None and page.isVisible()
        assert "Cannot open paper on live quotes (binance): " in page.reason.text()
        assert "Traceback" not in page.reason.text()
        assert page.reason.wordWrap() and page.reason.width() <= window.width()
        assert window.windowTitle() == f"Kestrel — {desk.workspace.root.name} — not open"
        assert [a.text() for a in window.trading_menu.actions()] == [
            "New order, Flatten all and the kill switch come with the workspace"]
        assert window.world is None and not window.errors.reports

        qtbot.mouseClick(page.retry_button, Qt.MouseButton.LeftButton)  # still no network
        await eventually(lambda: window.open_failed is not page and window.open_failed is not None,
                    within=30)
        page = window.open_failed
        assert window.world is None and page.replay_button.isVisible()

        qtbot.mouseClick(page.replay_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: window.world is not None, within=60)
        assert window.world.venue.label == "Offline replay"
        assert "Offline replay" in window.windowTitle()
        assert window.trading.ticket_action in window.trading_menu.actions()
        assert not window.errors.reports
        window.close()
        await window.aclose()

    desk.run(scenario)


def test_settings_exchanges_lists_what_binance_offers_and_tests_the_connection(
    qtbot, qloop, tmp_path, wall_exchange
):
    point_workspace(tmp_path / "ws", wall_exchange)
    from app.workspace import Workspace

    dialog = SettingsDialog(Workspace.at(tmp_path / "ws"), SecretStore())
    qtbot.addWidget(dialog)
    page = dialog.exchange_page
    page.exchange.setCurrentText("binance")
    abilities = page.findChild(QLabel, "exchange_abilities")

    async def scenario() -> None:
        await eventually(lambda: "What binance offers" in abilities.text())
        text = abilities.text()
        for what in ("✓ candles", "✓ order book", "✓ candle stream", "✓ place orders"):
            assert what in text
        page.findChild(QPushButton, "test_exchange").click()
        result = page.findChild(QLabel, "exchange_result")
        await eventually(lambda: result.text().startswith(("✓", "✗")))
        assert result.text().startswith("✓ Connected to binance in ")
        assert "2 spot markets; BTC/USDT last " in result.text()
        assert page.forms["venue"].raw()["kind"] == "live-paper"

    qloop.run_until_complete(scenario())
