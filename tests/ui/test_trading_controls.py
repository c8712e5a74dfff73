"""The trader's controls in the real window: an order placed from the ticket by keyboard (reviewed
against the Risk Guard first) and cancelled from its row; a position closed from its row after a
question naming its quantity and P&L; Flatten all after a question naming what it cancels and
closes; the closed trades with totals per agent; and, with the kill switch tripped, new exposure
refused on the ticket while closing still works."""

from __future__ import annotations

from decimal import Decimal

import pytest
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QApplication

from app.domain.agents import PERSON_ID, AgentRole
from app.domain.trading import OrderStatus
from app.runtime.ticket import TicketKind
from app.tools.spec import AgentContext
from app.ui.main_window import MainWindow
from app.ui.theme import apply_theme
from app.ui.trading.confirm import ConfirmDialog
from app.ui.trading.ticket import OrderTicket
from tests.helpers.eventually import eventually, settled
from tests.ui.desk import Desk, focus_back, on_screen
from tests.ui.test_theme import MIN_CONTRAST, contrast, ground

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")

HOUR_MS = 3_600_000
SYMBOL = "BTC/USD"


async def quiet_desk(desk: Desk, size: QSize | None = None) -> MainWindow:
    """The desk with its demo agents settled and paused, and flat (whatever the demo's trader
    bought or ordered is gone): only the person and the test trade."""
    window = await desk.open(size=size)
    await desk.settle(window)
    await window.pause_all()
    await window.trading.controls.flatten()
    await next_bar(window)
    return window


async def next_bar(window: MainWindow) -> None:
    world = window.world
    assert world is not None
    world.venue.driver.advance_to(world.venue.clock.now_ms() + HOUR_MS)
    await window.panels["account"].refresh()


async def last_price(window: MainWindow) -> Decimal:
    return await window.world.venue.broker.last_price(SYMBOL)


async def ticket_by_keyboard(window: MainWindow, qtbot) -> OrderTicket:
    qtbot.keyClick(window, Qt.Key.Key_F9)
    await eventually(
        lambda: window.trading.ticket is not None and window.trading.ticket.isVisible())
    ticket = window.trading.ticket
    ticket.symbol.setCurrentText(SYMBOL)
    return ticket


async def review_and_place(ticket: OrderTicket, qtbot) -> None:
    """Enter reviews; Enter again places what was reviewed."""
    ticket.outcome = None
    qtbot.keyClick(ticket.go, Qt.Key.Key_Return)
    await eventually(lambda: ticket.go.text().startswith("Place")
                or "refuse" in ticket.review_box.text())
    assert ticket.go.text().startswith("Place"), ticket.review_box.text()
    qtbot.keyClick(ticket.go, Qt.Key.Key_Return)
    await eventually(lambda: ticket.outcome is not None)


def audit_actors(window: MainWindow, tool: str) -> list[str]:
    return [c["agent_id"] for c in window.world.ledger.tool_calls() if c["tool_name"] == tool]


def test_a_limit_order_from_the_ticket_then_cancelled_from_its_row(desk: Desk, qtbot) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        broker = window.world.venue.broker
        account = window.panels["account"]
        ticket = await ticket_by_keyboard(window, qtbot)
        ticket.set_kind(TicketKind.LIMIT)
        ticket.fields["amount"].setText("0.01")
        limit = (await last_price(window) * Decimal("0.95")).quantize(Decimal("0.01"))
        # a wrong number is named and nothing is sent
        ticket.fields["price"].setText("1,000")
        qtbot.keyClick(ticket.go, Qt.Key.Key_Return)
        await eventually(ticket.review_box.isVisible)
        assert "Limit price" in ticket.review_box.text()
        assert "written plainly" in ticket.review_box.text()
        assert ticket.go.text() == "Review"
        ticket.fields["price"].setText(str(limit))
        await review_and_place(ticket, qtbot)
        review = ticket.outcome
        assert review is not None and review.ok, review.text
        assert "SUBMITTED" in ticket.result.text()
        mine = [o for o in await broker.open_orders() if o.agent_id == PERSON_ID]
        assert [(o.order_id, o.price) for o in mine] == [(review.order_id, limit)]
        assert audit_actors(window, "create_order")[-1] == PERSON_ID

        await eventually(lambda: account.order_button(review.order_id) is not None)
        qtbot.mouseClick(account.order_button(review.order_id), Qt.MouseButton.LeftButton)
        await eventually(lambda: account.order_button(review.order_id) is None)
        assert review.order_id not in {o.order_id for o in await broker.open_orders()}
        assert f"Cancelled {review.order_id}" in account.message.text()
        assert "(you)" in account.message.text()
        assert audit_actors(window, "cancel_order")[-1] == PERSON_ID
        assert not window.errors.reports

    desk.run(scenario)


def test_a_position_closed_from_its_row_after_naming_quantity_and_pnl(desk: Desk, qtbot) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        broker = window.world.venue.broker
        account = window.panels["account"]
        ticket = await ticket_by_keyboard(window, qtbot)
        ticket.set_kind(TicketKind.MARKET)
        ticket.fields["amount"].setText("0.02")
        await review_and_place(ticket, qtbot)
        assert ticket.outcome.ok, ticket.outcome.text
        await next_bar(window)
        await eventually(lambda: account.position_button(SYMBOL) is not None)
        held = broker.position_size(SYMBOL)
        assert held == Decimal("0.02")

        qtbot.mouseClick(account.position_button(SYMBOL), Qt.MouseButton.LeftButton)
        await eventually(lambda: isinstance(account.dialog, ConfirmDialog)
                    and account.dialog.isVisible())
        dialog = account.dialog
        assert "sell 0.02 at market" in dialog.text() and "P&amp;L about" in dialog.text()
        dialog.cancel_button.click()  # second thoughts: nothing happens
        await eventually(lambda: account.dialog is None)
        assert broker.position_size(SYMBOL) == held

        qtbot.mouseClick(account.position_button(SYMBOL), Qt.MouseButton.LeftButton)
        await eventually(lambda: isinstance(account.dialog, ConfirmDialog)
                    and account.dialog.isVisible())
        qtbot.mouseClick(account.dialog.confirm_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: "Closing BTC/USD" in account.message.text())
        # on paper the close is a market sell as the person (its exits stay until it fills)
        assert audit_actors(window, "create_order")[-1] == PERSON_ID
        await next_bar(window)
        assert broker.position_size(SYMBOL) == 0
        await eventually(lambda: account.positions.rowCount() == 0)
        assert not window.errors.reports

    desk.run(scenario)


def test_flatten_all_asks_naming_everything_then_leaves_nothing_open_and_totals_per_agent(
    desk: Desk, qtbot
) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        world = window.world
        broker = world.venue.broker
        account = window.panels["account"]
        trader = next(a for a in world.agents.manager.list_agents()
                      if a.role is AgentRole.TRADER)
        # the trader and the person each buy; the person also rests a limit buy
        result = await world.executor.execute_text(
            AgentContext(trader.agent_id),
            f"<create_order><symbol>{SYMBOL}</symbol><side>BUY</side>"
            "<quantity>0.03</quantity></create_order>")
        assert result is not None and result.ok, result.xml
        ticket = await ticket_by_keyboard(window, qtbot)
        ticket.set_kind(TicketKind.MARKET)
        ticket.fields["amount"].setText("0.01")
        await review_and_place(ticket, qtbot)
        await next_bar(window)
        ticket.set_kind(TicketKind.LIMIT)
        ticket.fields["price"].setText(
            str((await last_price(window) * Decimal("0.95")).quantize(Decimal("0.01"))))
        await review_and_place(ticket, qtbot)
        resting = ticket.outcome.order_id
        ticket.close()

        window.trading.flatten_action.trigger()
        await eventually(lambda: isinstance(window.trading.dialog, ConfirmDialog)
                    and window.trading.dialog.isVisible())
        dialog = window.trading.dialog
        assert "Cancel 1 open order" in dialog.text() and resting in dialog.text()
        assert "Close 1 position" in dialog.text() and "sell 0.04 at market" in dialog.text()
        qtbot.mouseClick(dialog.confirm_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: "Flatten all: 1 order cancelled, 1 close order placed"
                    in account.message.text())
        await next_bar(window)
        assert await broker.open_orders() == []
        assert await broker.positions() == []
        assert {o.status for o in [r.order for r in world.ledger.load().orders]
                if o.order_id == resting} == {OrderStatus.CANCELLED}

        closed = account.closed
        account.tabs.setCurrentWidget(closed)
        await eventually(
            lambda: {t.opened_by for t in closed.trades} >= {PERSON_ID, trader.agent_id})
        totals = closed.totals
        mine = [t for t in closed.trades if t.opened_by == PERSON_ID and t.exit_ms
                == max(x.exit_ms for x in closed.trades)]
        assert totals[trader.agent_id].trades == 1
        theirs = next(t for t in closed.trades if t.opened_by == trader.agent_id)
        assert theirs.quantity == Decimal("0.03") and theirs.closed_by == (PERSON_ID,)
        assert totals[trader.agent_id].pnl == theirs.pnl
        assert totals[PERSON_ID].pnl == sum((t.pnl for t in closed.trades
                                             if t.opened_by == PERSON_ID), Decimal(0))
        assert mine
        summary = closed.summary.text()
        assert f"<b>{trader.name}</b> 1 trade" in summary and "<b>you</b>" in summary
        assert "<b>All</b>" in summary
        titles = [c.title for c in closed.model.columns]
        row = next(r for r, t in enumerate(closed.model.rows) if t is theirs)
        index = closed.model.index(row, titles.index("Opened by"))
        assert closed.model.data(index, Qt.ItemDataRole.DisplayRole) == trader.name
        assert not window.errors.reports

    desk.run(scenario)


def test_with_the_kill_switch_tripped_the_ticket_shows_the_refusal_and_close_works(
    desk: Desk, qtbot
) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        world = window.world
        account = window.panels["account"]
        ticket = await ticket_by_keyboard(window, qtbot)
        ticket.set_kind(TicketKind.MARKET)
        ticket.fields["amount"].setText("0.02")
        await review_and_place(ticket, qtbot)
        await next_bar(window)
        await world.agents.kill_switch.trip("testing", "the person")

        ticket.fields["amount"].setText("0.01")
        ticket.fields["amount"].textEdited.emit("0.01")
        qtbot.keyClick(ticket.go, Qt.Key.Key_Return)
        await eventually(lambda: "Risk Guard would refuse it (kill_switch)"
                    in ticket.review_box.text())
        assert ticket.go.text() == "Review"  # nothing to place: the guard would refuse it
        ticket.close()

        await eventually(lambda: account.position_button(SYMBOL) is not None)
        assert await account.close_position(SYMBOL)
        await next_bar(window)
        assert world.venue.broker.position_size(SYMBOL) == 0

    desk.run(scenario)


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_the_ticket_and_its_verdicts_are_readable_in_both_themes_on_a_small_screen(
    desk: Desk, qtbot, theme: str
) -> None:
    async def scenario() -> None:
        app = QApplication.instance()
        apply_theme(app, theme)
        window = await quiet_desk(desk, size=QSize(1280, 720))
        assert window.trading.toolbar.isVisible() and on_screen(window.docks["account"])
        assert window.trading.flatten_button.isVisible()
        ticket = await ticket_by_keyboard(window, qtbot)
        ticket.set_kind(TicketKind.MARKET)
        ticket.fields["amount"].setText("0.01")
        qtbot.keyClick(ticket.go, Qt.Key.Key_Return)
        await eventually(lambda: ticket.go.text().startswith("Place"))
        assert ticket.height() <= 700 and ticket.width() <= 1280
        await settled(lambda: (ticket.geometry(), ticket.review_box.geometry(),
                               ticket.last.geometry(), ticket.review_box.text()))
        image = ticket.grab().toImage()
        for label in (ticket.review_box, ticket.last):
            rect = label.geometry()
            text = label.palette().color(label.foregroundRole())
            assert contrast(text, ground(image, rect)) >= MIN_CONTRAST, label.objectName()

    desk.run(scenario)


def test_a_market_order_placed_while_paused_shows_filled_after_one_step(desk: Desk, qtbot) -> None:
    """It took two presses of "Step 1 bar": the replay had been paused mid-bar, so the order
    waited for the bar after next (the paper broker fills at the open of the first bar that
    opens after the order)."""
    async def scenario() -> None:
        window = await quiet_desk(desk)
        world = window.world
        broker = world.venue.broker
        world.venue.driver.advance_to(world.venue.clock.now_ms() + 37 * 60_000)  # mid-bar
        window.replay_bar.pause_button.click()
        ticket = await ticket_by_keyboard(window, qtbot)
        ticket.set_kind(TicketKind.MARKET)
        ticket.fields["amount"].setText("0.02")
        await review_and_place(ticket, qtbot)
        assert ticket.outcome.ok and ticket.outcome.order_status == "SUBMITTED"
        ticket.close()
        window.replay_bar.step_button.click()
        assert broker.position_size(SYMBOL) == Decimal("0.02"), "filled after one step"
        account = window.panels["account"]
        await account.refresh()
        await eventually(lambda: account.position_button(SYMBOL) is not None)

    desk.run(scenario)


def test_close_keeps_the_stop_until_its_sell_fills_and_says_when_that_is(
    desk: Desk, qtbot
) -> None:
    """Close cancelled the stop loss at once while the sell waited a bar for its fill: for that
    bar the position had no stop. The question now says when the close fills."""
    async def scenario() -> None:
        window = await quiet_desk(desk)
        world = window.world
        broker = world.venue.broker
        account = window.panels["account"]
        ticket = await ticket_by_keyboard(window, qtbot)
        ticket.set_kind(TicketKind.MARKET)
        ticket.fields["amount"].setText("0.02")
        last = await last_price(window)
        ticket.fields["take_profit"].setText(str((last * Decimal("1.5")).quantize(Decimal(1))))
        ticket.fields["stop_loss"].setText(str((last * Decimal("0.5")).quantize(Decimal(1))))
        await review_and_place(ticket, qtbot)
        ticket.close()
        await next_bar(window)
        await eventually(lambda: len(window.person.exit_outcomes) == 1)
        world.venue.driver.advance_to(world.venue.clock.now_ms() + 20 * 60_000)
        window.replay_bar.pause_button.click()  # stands on the bar's close
        at = world.venue.clock.now_ms()
        assert at % HOUR_MS == 0

        await eventually(lambda: account.position_button(SYMBOL) is not None)
        qtbot.mouseClick(account.position_button(SYMBOL), Qt.MouseButton.LeftButton)
        await eventually(lambda: isinstance(account.dialog, ConfirmDialog)
                    and account.dialog.isVisible())
        said = account.dialog.text()
        hour = f"{at // HOUR_MS % 24:02d}:00 UTC"
        assert f"It fills at the next bar's open, <b>{hour}</b>" in said, said
        assert "stop loss keep protecting the position until the sell fills" in said
        qtbot.mouseClick(account.dialog.confirm_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: "Closing BTC/USD" in account.message.text())
        exits = {o.exit_kind.value for o in await broker.open_orders() if o.reduce_only}
        assert exits == {"STOP_LOSS", "TAKE_PROFIT"}, "the exits stay until the sell fills"

        window.replay_bar.step_button.click()
        assert broker.position_size(SYMBOL) == 0
        assert await broker.open_orders() == [], "the exits went with the position"
        assert not window.errors.reports

    desk.run(scenario)


def test_the_ticket_shows_the_live_bid_and_ask_while_open(desk: Desk, qtbot) -> None:
    """The ticket read "last" once: one showed 10938.29 while its review said 10601.53."""
    async def scenario() -> None:
        window = await quiet_desk(desk)
        ticket = await ticket_by_keyboard(window, qtbot)
        market = window.world.venue.market

        async def shown() -> str:
            last = await last_price(window)
            book = await market.order_book(SYMBOL, 1)
            return (f"last {last:,.2f}  ·  bid {book.best_bid:,.2f}  ·  "
                    f"ask {book.best_ask:,.2f}")

        expected = await shown()
        await eventually(lambda: ticket.last.text() == expected)
        for _hour in range(3):  # the market moves while the ticket is open
            await next_bar(window)
            expected = await shown()
            await eventually(lambda e=expected: ticket.last.text() == e)
        ticket.set_kind(TicketKind.MARKET)
        ticket.fields["amount"].setText("0.01")
        qtbot.keyClick(ticket.go, Qt.Key.Key_Return)
        await eventually(lambda: ticket.go.text().startswith("Place"))
        last = await last_price(window)
        assert f"at market (last {last.normalize():f})" in ticket.review_box.text()
        assert f"last {last:,.2f}" in ticket.last.text()

    desk.run(scenario)


def test_a_reopened_ticket_reviews_afresh(desk: Desk, qtbot) -> None:
    """A ticket closed on "Risk Guard would refuse it (kill_switch)" still said so when opened
    again after the switch was reset."""
    async def scenario() -> None:
        window = await quiet_desk(desk)
        world = window.world
        await world.agents.kill_switch.trip("testing", "the person")
        ticket = await ticket_by_keyboard(window, qtbot)
        ticket.set_kind(TicketKind.MARKET)
        ticket.fields["amount"].setText("0.01")
        qtbot.keyClick(ticket.go, Qt.Key.Key_Return)
        await eventually(lambda: "Risk Guard would refuse it (kill_switch)"
                    in ticket.review_box.text())
        ticket.close()
        focus_back(window)
        await world.agents.kill_switch.reset("the person")

        again = await ticket_by_keyboard(window, qtbot)
        assert again is ticket  # the same ticket, its fields as they were left
        await eventually(lambda: "The Risk Guard would accept it now." in ticket.review_box.text())
        assert "kill_switch" not in ticket.review_box.text()
        assert ticket.go.text() == "Place BUY order"

    desk.run(scenario)
