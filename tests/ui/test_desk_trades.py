"""Trades as a trader reads them in the real window: every fill and exit as a card in the chat
and a row in the notifications list (kept across a restart); agents named everywhere, their ids
in tooltips; Open trades with each owner's lot and a Close that says whose lot it is; Closed
trades saying who closed each; Performance per agent and for the person."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QFrame, QLabel, QWidget

from app.domain.agents import PERSON_ID, AgentInfo, AgentRole
from app.domain.trading import ExitKind, Side
from app.runtime.ticket import Ticket, TicketKind
from app.tools.spec import AgentContext
from app.ui.main_window import MainWindow
from app.ui.panels.memory_tree import MARK
from app.ui.panels.style import format_fixed, format_quantity
from app.ui.trading.confirm import ConfirmDialog
from tests.helpers.eventually import eventually
from tests.ui.desk import Desk
from tests.ui.test_trading_controls import next_bar, quiet_desk

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")

SYMBOL = "BTC/USD"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def trader_of(window: MainWindow) -> AgentInfo:
    return next(a for a in window.world.agents.manager.list_agents()
                if a.role is AgentRole.TRADER)


async def as_agent(window: MainWindow, agent: AgentInfo, xml: str) -> None:
    result = await window.world.executor.execute_text(AgentContext(agent.agent_id), xml)
    assert result is not None and result.ok, result.xml


async def trader_buys_and_protects(window: MainWindow, quantity: str, band: str) -> tuple[
        Decimal, Decimal]:
    """The trader buys ``quantity`` at market, and once it fills sets a take profit and a stop
    loss ``band`` (a fraction) either side of the last price. Returns (take profit, stop loss)."""
    trader = trader_of(window)
    await as_agent(window, trader, f"<create_order><symbol>{SYMBOL}</symbol><side>BUY</side>"
                                   f"<quantity>{quantity}</quantity></create_order>")
    await next_bar(window)
    last = await window.world.venue.broker.last_price(SYMBOL)
    tp = (last * (1 + Decimal(band))).quantize(Decimal("0.01"))
    sl = (last * (1 - Decimal(band))).quantize(Decimal("0.01"))
    await as_agent(window, trader,
                   f"<set_position_tp_sl_orders><symbol>{SYMBOL}</symbol>"
                   f"<take_profit_price>{tp}</take_profit_price>"
                   f"<stop_loss_price>{sl}</stop_loss_price></set_position_tp_sl_orders>")
    return tp, sl


async def person_buys(window: MainWindow, quantity: str) -> None:
    outcome = await window.person.submit(
        Ticket(SYMBOL, Side.BUY, TicketKind.MARKET, quantity=Decimal(quantity)))
    assert outcome.ok, outcome.text


class FillCardView:
    """A fill's card in the chat, read as a person reads it: its title, its line, its P&L."""

    def __init__(self, card: QWidget) -> None:
        self.title = card.findChild(QLabel, "fillTitle")
        self.line = card.findChild(QLabel, "fillLine")
        self.pnl = card.findChild(QLabel, "fillPnl")


def fill_cards(window: MainWindow) -> list[FillCardView]:
    return [FillCardView(c) for c in window.panels["chat"].transcript.cards
            if c.findChild(QFrame, "fillCard") is not None]


def chat_texts(chat) -> list[str]:
    """Every text the chat's cards show (a cut label by its whole text)."""
    texts = []
    for card in chat.transcript.cards:
        for label in card.findChildren(QLabel):
            full = getattr(label, "full_text", None)
            texts.append(full() if callable(full) else label.text())
    return texts


def cell(model, row: int, column: str, role=Qt.ItemDataRole.DisplayRole):
    titles = [c.title for c in model.columns]
    return model.data(model.index(row, titles.index(column)), role)


def test_every_fill_and_exit_is_a_card_in_the_chat_and_stays_in_the_notifications_list(
    desk: Desk,
) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        world = window.world
        broker = world.venue.broker
        trader = trader_of(window)
        before = len(fill_cards(window))
        await trader_buys_and_protects(window, "0.1", "0.004")
        buy = next(f for f in world.ledger.fills() if f.agent_id == trader.agent_id
                   and f.side is Side.BUY and f.quantity == Decimal("0.1"))
        await eventually(lambda: len(fill_cards(window)) > before)
        card = fill_cards(window)[-1]
        assert card.title.text() == "Bought"
        assert card.line.text() == (f"{trader.name} bought 0.1 BTC/USD at "
                                    f"{format_fixed(buy.price, 2)}")
        assert not card.pnl.isVisible()

        for _ in range(96):  # hour by hour until its take profit or stop loss sells it
            if broker.position_size(SYMBOL) == 0:
                break
            await next_bar(window)
        assert broker.position_size(SYMBOL) == 0, "neither exit was hit in four days"
        sell = next(f for f in world.ledger.fills() if f.agent_id == trader.agent_id
                    and f.side is Side.SELL and f.time_ms > buy.time_ms)
        order = await broker.get_order(trader.agent_id, SYMBOL, sell.order_id)
        title = {ExitKind.TAKE_PROFIT: "Take profit hit",
                 ExitKind.STOP_LOSS: "Stop loss hit"}[order.exit_kind]
        await eventually(lambda: fill_cards(window)[-1].title.text() == title)
        exit_card = fill_cards(window)[-1]
        closed = window.book.closed()
        trip = next(t for t in closed if t.opened_by == trader.agent_id
                    and t.exit_ms == sell.time_ms)
        # the lot's P&L, as Closed trades and the agent list count it
        assert exit_card.pnl.text() == f"P&L {format_fixed(trip.pnl, 2, sign=True)} USD"
        assert exit_card.line.text().startswith(f"{trader.name} sold 0.1 BTC/USD at ")

        notices = window.panels["notifications"]
        await eventually(lambda: any(n.subject == title for n in notices.model.rows))
        shown = [cell(notices.model, r, "Kind") for r in range(notices.model.rowCount())]
        assert shown.index(title) < shown.index("Bought")  # newest first
        row = shown.index(title)
        assert cell(notices.model, row, "From") == trader.name
        assert cell(notices.model, row, "Message") == (
            f"{exit_card.line.text()}; {exit_card.pnl.text()}")
        assert UUID.search(" ".join(cell(notices.model, r, "Message")
                                    for r in range(notices.model.rowCount()))) is None

        await desk.close(window)
        again = await desk.open()
        notices = again.panels["notifications"]
        await eventually(lambda: any(n.subject == title for n in notices.model.rows))
        # the chat shows the fills of its history again, in time order
        await eventually(lambda: any(c.title.text() == title for c in fill_cards(again)))
        assert not again.errors.reports

    desk.run(scenario)


def test_agents_are_named_everywhere_with_their_id_in_a_tooltip(desk: Desk) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        trader = trader_of(window)
        analyst = next(a for a in window.world.agents.manager.list_agents()
                       if a.role is AgentRole.ANALYST)
        await trader_buys_and_protects(window, "0.1", "0.05")

        audit = window.panels["audit"]
        await audit.refresh()
        model = audit.proxy
        agents = {model.data(model.index(r, 1)) for r in range(model.rowCount())}
        assert trader.name in agents and analyst.name in agents
        assert not any(UUID.search(a) for a in agents), agents
        row = next(r for r in range(model.rowCount()) if model.data(model.index(r, 1))
                   == trader.name)
        assert trader.agent_id in model.data(model.index(row, 1), Qt.ItemDataRole.ToolTipRole)
        offered = [audit.agent_filter.itemText(i) for i in range(audit.agent_filter.count())]
        assert trader.name in offered and not any(UUID.search(o) for o in offered)
        audit.agent_filter.setCurrentIndex(offered.index(trader.name))
        assert {model.data(model.index(r, 1)) for r in range(model.rowCount())} == {trader.name}

        account = window.panels["account"]
        await account.refresh()
        orders = account.orders
        assert orders.rowCount() == 2  # the trader's take profit and stop loss
        assert {cell(orders, r, "Agent") for r in range(2)} == {trader.name}
        assert trader.agent_id in cell(orders, 0, "Agent", Qt.ItemDataRole.ToolTipRole)

        await window.live.refresh_trades()
        tips = [tip for _x, _y, tip in window.panels["chart"].view.markers.marker_positions()]
        mine = [t for t in tips if trader.name in t]
        assert mine and all(f"(id {trader.agent_id})" in t for t in mine)
        assert not any(f"agent: {trader.agent_id}" in t for t in tips)

        memory = window.panels["memory"]
        await memory.refresh()
        branch = memory.tree.item_for(trader.agent_id, "")
        assert branch.text(0).removeprefix(MARK) == trader.name  # marked: its files changed
        assert trader.agent_id in branch.toolTip(0)
        journal = next(f.path for f in window.world.memory.list_files(trader.agent_id, "journal"))
        raw = window.world.memory.read_file(trader.agent_id, journal).data.decode()
        assert f"agent:{analyst.agent_id}" in raw  # the journal line names its signal's source
        assert await memory.open_file(trader.agent_id, journal)
        shown = memory.pane.viewer.toPlainText()
        assert analyst.name in shown and analyst.agent_id not in shown
        memory.begin_edit()
        assert memory.pane.editor.toPlainText() == raw  # what is edited is the file itself
        memory.discard_edit()

        chat = window.panels["chat"]
        window.open_conversation(trader.agent_id)
        await eventually(lambda: chat.agent_id == trader.agent_id and not chat.busy)
        shown = " ".join(chat_texts(chat))
        assert "log_journal_entry" in shown and analyst.name in shown
        assert analyst.agent_id not in shown and trader.agent_id not in shown
        assert not window.errors.reports

    desk.run(scenario)


def test_open_trades_list_each_owners_lot_and_close_says_whose_lot_it_is(
    desk: Desk, qtbot
) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        world = window.world
        broker = world.venue.broker
        trader = trader_of(window)
        account = window.panels["account"]
        await person_buys(window, "0.05")
        tp, sl = await trader_buys_and_protects(window, "0.1", "0.05")
        await account.refresh()
        account.tabs.setCurrentWidget(account.open_trades_view)
        rows = {r.owner: r for r in account.open_trades.rows}
        assert set(rows) == {PERSON_ID, trader.agent_id}
        model = account.open_trades
        theirs = model.rows.index(rows[trader.agent_id])
        lot = next(x for x in window.book.open_lots() if x.owner == trader.agent_id)
        assert cell(model, theirs, "Owner") == trader.name
        assert trader.agent_id in cell(model, theirs, "Owner", Qt.ItemDataRole.ToolTipRole)
        assert cell(model, theirs, "Size") == "0.1"
        assert cell(model, theirs, "Avg cost") == format_fixed(lot.cost / lot.size, 2)
        assert (cell(model, theirs, "TP"), cell(model, theirs, "SL")) == (
            format_fixed(tp, 2), format_fixed(sl, 2))
        assert cell(model, theirs, "Held") == "1 h 0 min"
        last = await broker.last_price(SYMBOL)
        assert cell(model, theirs, "Unrealized P&L") == format_fixed(
            lot.size * last - lot.cost, 2, sign=True)
        mine = model.rows.index(rows[PERSON_ID])
        assert cell(model, mine, "Owner") == "you" and cell(model, mine, "TP") == "—"

        # the trader's lot: the question says it is not the person's, and what selling takes
        await eventually(lambda: account.trade_button(SYMBOL, trader.agent_id) is not None)
        qtbot.mouseClick(account.trade_button(SYMBOL, trader.agent_id),
                         Qt.MouseButton.LeftButton)
        await eventually(lambda: isinstance(account.dialog, ConfirmDialog)
                    and account.dialog.isVisible())
        text = account.dialog.text()
        assert f"This trade is {trader.name}'s, not yours." in text
        assert f"stays {trader.name}'s" in text
        assert "This closes the whole BTC/USD position" in text and "you 0.05" in text
        account.dialog.cancel_button.click()
        await eventually(lambda: account.dialog is None)

        # the person's own lot is sold alone: a sale of the person's comes out of it first
        qtbot.mouseClick(account.trade_button(SYMBOL, PERSON_ID), Qt.MouseButton.LeftButton)
        await eventually(lambda: isinstance(account.dialog, ConfirmDialog)
                    and account.dialog.isVisible())
        assert "This trade is yours" in account.dialog.text()
        assert "Sell 0.05 BTC/USD at market" in account.dialog.text()
        qtbot.mouseClick(account.dialog.confirm_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: "Closing your BTC/USD trade" in account.message.text())
        await next_bar(window)
        assert {r.owner for r in account.open_trades.rows} == {trader.agent_id}
        assert broker.position_size(SYMBOL) == Decimal("0.1")
        calls = [c for c in world.ledger.tool_calls() if c["tool_name"] == "create_order"]
        assert calls[-1]["agent_id"] == PERSON_ID  # the person's order, through the guard

        # now the trader's lot is the only one: Close sells it alone, the P&L stays the trader's
        await eventually(lambda: account.trade_button(SYMBOL, trader.agent_id) is not None)
        qtbot.mouseClick(account.trade_button(SYMBOL, trader.agent_id),
                         Qt.MouseButton.LeftButton)
        await eventually(lambda: isinstance(account.dialog, ConfirmDialog)
                    and account.dialog.isVisible())
        assert "whole" not in account.dialog.text()
        qtbot.mouseClick(account.dialog.confirm_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: f"Closing {trader.name}'s BTC/USD trade" in account.message.text())
        await next_bar(window)
        assert broker.position_size(SYMBOL) == 0
        await eventually(lambda: account.open_trades.rowCount() == 0)

        closed = account.closed
        await closed.refresh()
        theirs_closed = next(t for t in closed.model.rows if t.opened_by == trader.agent_id
                             and t.quantity == Decimal("0.1"))
        row = closed.model.rows.index(theirs_closed)
        assert cell(closed.model, row, "Opened by") == trader.name
        assert cell(closed.model, row, "Closed by") == "you"
        titles = [c.title for c in closed.model.columns]
        assert titles.index("Closed by") == titles.index("Opened by") + 1
        assert not window.errors.reports

    desk.run(scenario)


def test_performance_shows_each_agents_and_the_persons_pnl_win_rate_and_curve(
    desk: Desk,
) -> None:
    from app.ui.panels.performance import ALL, DAILY

    async def scenario() -> None:
        window = await quiet_desk(desk, size=QSize(1280, 720))
        trader = trader_of(window)
        account = window.panels["account"]
        await person_buys(window, "0.05")
        await trader_buys_and_protects(window, "0.1", "0.05")
        outcome = await window.person.submit(
            Ticket(SYMBOL, Side.SELL, TicketKind.MARKET, quantity=Decimal("0.05")))
        assert outcome.ok, outcome.text
        await next_bar(window)
        await account.refresh()
        perf = account.performance
        account.tabs.setCurrentWidget(perf)
        rows = {r.actor: r for r in perf.model.rows}
        assert set(rows) >= {ALL, PERSON_ID, trader.agent_id}
        closed = window.book.closed()
        for actor in (PERSON_ID, trader.agent_id):
            trips = [t for t in closed if t.opened_by == actor]
            row = rows[actor]
            assert row.trades == len(trips)
            assert row.realized == sum((t.pnl for t in trips), Decimal(0))
            wins = sum(1 for t in trips if t.pnl > 0)
            assert row.wins == wins
        mine = rows[PERSON_ID]
        assert mine.trades >= 1
        number = perf.model.rows.index(mine)
        assert cell(perf.model, number, "Who") == "you"
        assert cell(perf.model, number, "Realized") == format_fixed(mine.realized, 2, sign=True)
        assert cell(perf.model, number, "Win rate") == (
            f"{format_fixed(Decimal(mine.wins) / mine.trades * 100, 2)}%")
        theirs = rows[trader.agent_id]
        assert theirs.unrealized is not None and theirs.unrealized != 0  # its lot is open
        everyone = rows[ALL]
        assert everyone.realized == sum((r.realized for a, r in rows.items() if a != ALL),
                                        Decimal(0))

        # on a small screen the panel stays within its dock: the cards and tabs are not cut
        await eventually(lambda: perf.isVisible())
        dock = window.docks["account"].widget()
        assert account.width() <= dock.viewport().width()
        assert perf.minimumSizeHint().width() <= perf.width()  # nothing asks for more room

        perf.choose(trader.agent_id)
        curves = dict(perf.drawn())
        assert pytest.approx(curves[trader.name][-1]) == float(theirs.total)
        assert pytest.approx(curves["you"][-1]) == float(mine.total)
        perf.show_box.setCurrentText(DAILY)
        perf.choose(PERSON_ID)
        bars = dict(perf.drawn())["bars"]
        assert pytest.approx(sum(bars)) == float(mine.realized)
        assert format_quantity(Decimal("0.05")) == "0.05"
        assert not window.errors.reports

    desk.run(scenario)
