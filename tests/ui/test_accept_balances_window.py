"""After a reconciliation mismatch on a LIVE account (the fake Binance), the window offers to
accept the exchange's balances: the differences shown, then accepted on the person's word, kept in
the journal as theirs; the kill switch stays tripped (reset is its own deliberate act)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.domain.kill_switch import TripCause
from app.ui.accept_balances import AcceptBalancesDialog
from app.ui.kill_switch import BY
from tests.helpers.eventually import eventually
from tests.helpers.fake_exchange import FakeExchangeServer
from tests.ui.test_live_window import (  # noqa: F401 - fixtures
    LiveDesk,
    dialog_of,
    exchange_fixture,
    live_desk_fixture,
    open_confirmed,
    server_fixture,
)

pytestmark = [pytest.mark.filterwarnings("ignore::ResourceWarning"),
              pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                        "does not support activat")]


def test_the_person_accepts_the_exchanges_balances_after_a_mismatch_from_the_window(
    live_desk: LiveDesk, qtbot: Any, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        first = live_desk.window()
        await open_confirmed(qtbot, live_desk, first)  # the journal's baseline: 100000 USDT
        first.close()
        await first.aclose()
        live_desk.windows.remove(first)
        with server.binance_account.lock:  # 2500 USDT withdrawn on the exchange's website
            server.binance_account.balances["USDT"][0] -= Decimal("2500")

        window = live_desk.window()
        await open_confirmed(qtbot, live_desk, window)
        switch = window.world.agents.kill_switch
        trip = switch.active()
        assert trip is not None and trip.cause is TripCause.RECONCILIATION
        banner = window.kill_controls.banner
        assert banner.isVisible() and banner.accept_button.isVisible()
        assert banner.accept_button.text() == "Accept the exchange's balances…"

        qtbot.mouseClick(banner.accept_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: dialog_of(window, AcceptBalancesDialog) is not None)
        dialog = dialog_of(window, AcceptBalancesDialog)
        assert dialog is not None
        rows = [[dialog.table.item(r, c).text() for c in range(4)]
                for r in range(dialog.table.rowCount())]
        assert rows == [["USDT", "100000", "97500", "-2500"]]
        qtbot.mouseClick(dialog.accept_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: not banner.accept_button.isVisible())

        reconciler = window.world.venue.before_agents.reconciler
        journal = window.world.venue.broker.journal
        assert Decimal(journal.meta("binance", "baseline:USDT")) == Decimal("97500")
        (accepted,) = reconciler.acceptances()
        assert accepted["by"] == BY
        assert accepted["differences"] == [
            {"asset": "USDT", "journal": "100000", "exchange": "97500"}]
        report = await reconciler.check_balances()
        assert report.mismatches == []
        # accepting is not resetting: the switch stays tripped until the person types RESET
        assert switch.active() is not None and banner.isVisible()

    live_desk.run(scenario)
