"""Trading from the chart and the order book in the real window, as a person would: dragging a take
profit's tag moves the order on the paper exchange (through the person's ``modify_order`` tool
call) and a refused move snaps back with its reason; dragging a working order's line moves it;
right-click "Buy limit here" opens the ticket filled in, which still reviews before it places;
clicking a book level puts its price in the ticket; the size buttons fill a share of what is free;
and a symbol without data says why, with an empty book."""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal

import pytest
from PySide6.QtCore import QEvent, QPoint, Qt

from app.domain.agents import PERSON_ID
from app.domain.trading import ExitKind, Order, OrderType, Side
from app.runtime.ticket import Ticket, TicketKind
from app.ui.charts.chart_widget import ChartWidget
from app.ui.charts.levels import on_tick
from app.ui.main_window import MainWindow
from tests.helpers.eventually import eventually
from tests.ui.desk import Desk, click, send_mouse
from tests.ui.test_trading_controls import (
    SYMBOL,
    audit_actors,
    last_price,
    next_bar,
    quiet_desk,
    review_and_place,
)

# a menu grabs the keyboard, which the offscreen platform cannot do
pytestmark = [
    pytest.mark.usefixtures("every_mouse_move"),
    pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                              "does not support activateWindow",
                              "does not support grabbing the keyboard"),
]



def drag(chart: ChartWidget, start: QPoint, end: QPoint) -> None:
    """Press at ``start`` on the chart, move to ``end`` in steps, release there."""
    viewport = chart.view.viewport()
    left = Qt.MouseButton.LeftButton
    send_mouse(viewport, QEvent.Type.MouseMove, start)  # hovered: what is under takes the drag
    send_mouse(viewport, QEvent.Type.MouseButtonPress, start, left, left)
    for step in range(1, 9):
        point = start + (end - start) * (step / 8)
        send_mouse(viewport, QEvent.Type.MouseMove, point, Qt.MouseButton.NoButton, left)
    send_mouse(viewport, QEvent.Type.MouseButtonRelease, end, left)


def tag_point(chart: ChartWidget, key: str) -> QPoint:
    """Where ``key``'s tag is on the chart's screen (painted first, so it has a place)."""
    chart.view.grab()
    axis = chart.view.price_axis
    return chart.view.mapFromScene(axis.mapToScene(axis.tag_rects[key].center()))


def price_at(chart: ChartWidget, point: QPoint) -> float:
    scene = chart.view.mapToScene(point)
    return chart.view.price_scale.from_view(chart.view.price_plot.vb.mapSceneToView(scene).y())


async def holding_with_exits(window: MainWindow) -> tuple[Order, Order]:
    """The person holds 0.01 BTC (bought at market, filled at the next bar) with a take profit
    5% above the last price and a stop loss 5% below; the chart shows both."""
    controls = window.person
    outcome = await controls.submit(Ticket(SYMBOL, Side.BUY, TicketKind.MARKET,
                                           quantity=Decimal("0.01")))
    assert outcome.ok, outcome.text
    await next_bar(window)
    last = await last_price(window)
    tp, sl = (on_tick(float(last) * factor, 2) for factor in (1.05, 0.95))
    outcome = await controls.submit(Ticket(SYMBOL, Side.SELL, TicketKind.TP_SL,
                                           take_profit=tp, stop_loss=sl))
    assert outcome.ok, outcome.text
    exits = {o.exit_kind: o for o in await window.world.venue.broker.open_orders()
             if o.agent_id == PERSON_ID}
    chart = window.panels["chart"]
    await eventually(lambda: all(chart.view.levels.level(o.order_id) is not None
                            for o in exits.values()))
    return exits[ExitKind.TAKE_PROFIT], exits[ExitKind.STOP_LOSS]


def test_dragging_the_take_profit_tag_moves_the_order_on_the_paper_exchange(desk: Desk) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        chart = window.panels["chart"]
        broker = window.world.venue.broker
        tp, sl = await holding_with_exits(window)
        last = await last_price(window)
        start = tag_point(chart, tp.order_id)
        # halfway down towards the last price: still above it, so order entry takes it
        end = QPoint(start.x(), round((start.y() + chart.view.view_point_on_screen(
            0, float(last)).y()) / 2))
        wanted = on_tick(price_at(chart, end), 2)
        assert last < wanted < tp.price
        moves = len(window.chart_trading.outcomes)
        drag(chart, start, end)
        await eventually(lambda: len(window.chart_trading.outcomes) > moves)
        outcome = window.chart_trading.outcomes[-1]
        assert outcome.ok, outcome.text
        exits = {o.exit_kind: o for o in await broker.open_orders() if o.agent_id == PERSON_ID}
        assert exits[ExitKind.TAKE_PROFIT].price == wanted
        assert exits[ExitKind.STOP_LOSS].stop_price == sl.stop_price  # the other exit is kept
        assert audit_actors(window, "modify_order")[-1] == PERSON_ID
        assert chart.message.isVisible() and chart.message.text().startswith("Moved")
        new_tp = exits[ExitKind.TAKE_PROFIT].order_id
        await eventually(lambda: chart.view.levels.level(new_tp) is not None)
        assert chart.view.levels.level(tp.order_id) is None
        assert chart.view.price_axis.tags[[t.key for t in chart.view.price_axis.tags]
                                          .index(new_tp)].text == f"TP {wanted:,.2f}"
        assert not window.errors.reports

    desk.run(scenario)


def test_a_refused_move_says_why_and_its_line_snaps_back(desk: Desk) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        chart = window.panels["chart"]
        broker = window.world.venue.broker
        tp, _sl = await holding_with_exits(window)
        last = await last_price(window)
        start = tag_point(chart, tp.order_id)
        # below the last price: a take profit there would sell at once, order entry refuses
        end = QPoint(start.x(), chart.view.view_point_on_screen(0, float(last) * 0.98).y())
        moves = len(window.chart_trading.outcomes)
        drag(chart, start, end)
        await eventually(lambda: len(window.chart_trading.outcomes) > moves)
        outcome = window.chart_trading.outcomes[-1]
        assert not outcome.ok
        assert "above the last price" in outcome.text
        assert chart.message.text().startswith("Not moved") and "above the last price" in \
            chart.message.text()
        level = chart.view.levels.level(tp.order_id)
        assert level is not None and chart.view.levels.shown_price(level) == float(tp.price)
        line = chart.view.levels.line(tp.order_id)
        assert line is not None and line.value() == pytest.approx(float(tp.price))
        takes = [o for o in await broker.open_orders() if o.exit_kind is ExitKind.TAKE_PROFIT]
        assert [(o.order_id, o.price) for o in takes] == [(tp.order_id, tp.price)]
        assert not window.errors.reports

    desk.run(scenario)


def test_dragging_a_working_limit_orders_line_moves_it(desk: Desk) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        chart = window.panels["chart"]
        broker = window.world.venue.broker
        last = await last_price(window)
        bid = on_tick(float(last) * 0.97, 2)
        outcome = await window.person.submit(Ticket(SYMBOL, Side.BUY, TicketKind.LIMIT,
                                                    quantity=Decimal("0.01"), price=bid))
        assert outcome.ok, outcome.text
        await eventually(lambda: chart.view.levels.level(outcome.order_id or "") is not None)
        level = chart.view.levels.level(outcome.order_id or "")
        assert level is not None and level.tag == f"Buy {bid:,.2f}" and level.movable
        # the line, grabbed in the middle of the plot, dragged 1% higher
        x0, x1 = chart.view.visible_bars()
        start = chart.view.view_point_on_screen((x0 + x1) / 2, float(bid))
        end = chart.view.view_point_on_screen((x0 + x1) / 2, float(bid) * 1.01)
        # the line keeps where it was grabbed: it moves by as much as the mouse did
        wanted = on_tick(float(bid) + price_at(chart, end) - price_at(chart, start), 2)
        moves = len(window.chart_trading.outcomes)
        drag(chart, start, end)
        await eventually(lambda: len(window.chart_trading.outcomes) > moves)
        assert window.chart_trading.outcomes[-1].ok, window.chart_trading.outcomes[-1].text
        mine = [o for o in await broker.open_orders() if o.agent_id == PERSON_ID]
        assert [(o.order_type, o.price, o.quantity) for o in mine] == [
            (OrderType.LIMIT, wanted, Decimal("0.01"))]
        assert not window.errors.reports

    desk.run(scenario)


def test_right_click_opens_the_ticket_filled_in_for_a_limit_order_there(desk: Desk, qtbot) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        chart = window.panels["chart"]
        broker = window.world.venue.broker
        last = await last_price(window)
        await eventually(lambda: chart.view.bar_count > 0)
        x0, x1 = chart.view.visible_bars()
        # below the last price, within the Risk Guard's band, on the plot's visible scale
        y0, y1 = chart.view.price_plot.vb.viewRange()[1]
        low = chart.view.price_scale.from_view(y0 + (y1 - y0) / 10)
        point = chart.view.view_point_on_screen(
            (x0 + x1) / 2, min(max(low, float(last) * 0.97), float(last) * 0.999))
        price = on_tick(price_at(chart, point), 2)
        assert price < last
        click(chart.view.viewport(), point, Qt.MouseButton.RightButton)
        await eventually(lambda: chart.context_menu is not None and chart.context_menu.isVisible())
        texts = [a.text() for a in chart.context_menu.actions() if a.text()]
        assert f"Buy limit here at {price:,.2f}…" in texts
        assert f"Sell limit here at {price:,.2f}…" in texts
        before = len(await broker.open_orders())
        next(a for a in chart.context_menu.actions() if a.text().startswith("Buy limit")
             ).trigger()
        ticket = window.trading.ticket
        await eventually(lambda: ticket is not None and ticket.isVisible())
        assert ticket.form()["symbol"] == SYMBOL and ticket.form()["side"] == "BUY"
        assert ticket.kind_value() is TicketKind.LIMIT
        assert ticket.fields["price"].text() == str(price)
        assert len(await broker.open_orders()) == before  # nothing is placed by the menu
        ticket.fields["amount"].setText("0.01")
        await review_and_place(ticket, qtbot)  # the ticket's review, then its Place
        assert ticket.outcome is not None and ticket.outcome.ok, ticket.outcome.text
        mine = [o for o in await broker.open_orders() if o.agent_id == PERSON_ID]
        assert [(o.order_type, o.price) for o in mine] == [(OrderType.LIMIT, price)]
        assert not window.errors.reports

    desk.run(scenario)


def test_clicking_an_order_book_level_puts_its_price_in_the_ticket(desk: Desk) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        book = window.panels["book"]
        await book.refresh()
        book.flush()
        row = book.model.spread_row + 1  # the best bid
        level = book.model.row_at(row)
        assert level is not None
        cell = book.ladder.visualRect(book.model.index(row, 0)).center()
        click(book.ladder.viewport(), cell, Qt.MouseButton.LeftButton)
        ticket = window.trading.ticket
        await eventually(lambda: ticket is not None and ticket.isVisible())
        assert ticket.form()["symbol"] == book.symbol
        assert ticket.kind_value() is TicketKind.LIMIT  # a market ticket takes a limit price
        assert ticket.fields["price"].text() == str(level.price)
        # a stop ticket takes a level's price as its trigger
        ticket.set_kind(TicketKind.STOP)
        row = book.model.spread_row - 1  # the best ask
        ask = book.model.row_at(row)
        assert ask is not None
        cell = book.ladder.visualRect(book.model.index(row, 0)).center()
        click(book.ladder.viewport(), cell, Qt.MouseButton.LeftButton)
        assert ticket.fields["stop_price"].text() == str(ask.price)
        assert not window.errors.reports

    desk.run(scenario)


def test_size_buttons_fill_a_share_of_what_is_free_rounded_down_to_the_step(
    desk: Desk, qtbot
) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        broker = window.world.venue.broker
        rules = broker.market_rules(SYMBOL)
        ticket = window.trading.open_ticket(SYMBOL)
        price = on_tick(float(await last_price(window)) * 0.99, 2)
        ticket.fill_in(side=Side.BUY, kind=TicketKind.LIMIT, price=price)
        state = await broker.account()
        free_usd = next(a.free for a in state.assets if a.currency == "USD")
        qtbot.mouseClick(ticket.sizes.buttons[Decimal("0.5")], Qt.MouseButton.LeftButton)
        expected = (free_usd / 2 / (price * (1 + broker.fee_taker)) / rules.step).to_integral_value(
            rounding=ROUND_DOWN) * rules.step
        await eventually(lambda: ticket.fields["amount"].text() != "")
        assert Decimal(ticket.fields["amount"].text()) == expected
        assert ticket.form()["unit"] == "base"
        # 100% is all the dollars free can pay for, the fee counted: one step more could not be
        qtbot.mouseClick(ticket.sizes.buttons[Decimal("1")], Qt.MouseButton.LeftButton)
        await eventually(lambda: Decimal(ticket.fields["amount"].text()) > expected)
        whole = Decimal(ticket.fields["amount"].text())
        cost = price * (1 + broker.fee_taker)
        assert whole * cost <= free_usd < (whole + rules.step) * cost
        # the review holds back no more than is free (the Risk Guard judges the rest as always)
        qtbot.keyClick(ticket.go, Qt.Key.Key_Return)
        await eventually(lambda: "Holds back" in ticket.review_box.text())
        held = ticket.review_box.text().split("Holds back ")[1].split(" USD")[0]
        assert Decimal(held.replace(",", "")) <= free_usd

        # a sell with nothing held says so on the amount, nothing is guessed
        ticket.fill_in(side=Side.SELL, kind=TicketKind.MARKET)
        ticket.fields["amount"].setText("")
        qtbot.mouseClick(ticket.sizes.buttons[Decimal("0.25")], Qt.MouseButton.LeftButton)
        await eventually(ticket.review_box.isVisible)
        assert "Nothing to size" in ticket.review_box.text()
        assert ticket.fields["amount"].text() == ""
        assert not window.errors.reports

    desk.run(scenario)


def test_a_symbol_without_data_yet_says_why_and_its_book_is_empty(desk: Desk) -> None:
    async def scenario() -> None:
        window = await quiet_desk(desk)
        chart, book = window.panels["chart"], window.panels["book"]
        await book.refresh()
        book.flush()
        assert book.model.row_at(book.model.spread_row + 1) is not None
        # the bundled BTC/USDT data begins in late September 2019, after the demo's replay time
        chart.symbol_box.setCurrentText("BTC/USDT")
        await chart.wait_idle()
        assert chart.view.bar_count == 0
        note = chart.view.note
        assert note.isVisible()
        assert note.text().startswith("No 1h candles for BTC/USDT yet: its data begins at "
                                      "2019-09-30")
        assert "the replay is at 2019-" in note.text()
        # the book shows no BTC/USD price under the BTC/USDT name, and says why it has none
        assert book.symbol == "BTC/USDT"
        assert all(book.model.row_at(r) is None for r in range(book.model.rowCount()))
        await eventually(lambda: "none yet" in book.header.text())
        assert "No BTC/USDT candles are visible yet" in book.header.text()
        assert chart.view.price_axis.tags == []
        chart.symbol_box.setCurrentText(SYMBOL)
        await chart.wait_idle()
        assert not note.isVisible() and chart.view.bar_count > 0
        await eventually(lambda: book.book is not None and book.book.symbol == SYMBOL)
        assert not window.errors.reports

    desk.run(scenario)
