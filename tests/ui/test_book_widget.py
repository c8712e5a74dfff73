"""The order book panel over a real synthetic book from the replayed BTC/USD market."""

from __future__ import annotations

from decimal import Decimal

import pytest
from PySide6.QtCore import Qt

from app.domain.clock import ReplayClock
from app.domain.market import BookLevel, OrderBook
from app.market.replay import ReplayMarketData
from app.ui.charts.book_widget import BookWidget
from app.ui.charts.ladder import VALUE_ROLE
from tests.helpers.eventually import eventually_on
from tests.helpers.paths import BTC_USD_1H

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
DEPTH = 10


@pytest.fixture
def market() -> ReplayMarketData:
    clock = ReplayClock(0)
    market = ReplayMarketData.from_paths(clock, [BTC_USD_1H])
    clock.advance_to(market.end_ms())
    return market


@pytest.fixture
def book_widget(qtbot, qloop, market) -> BookWidget:
    widget = BookWidget(market, symbol="BTC/USD", depth=DEPTH, redraw_hz=10)
    qtbot.addWidget(widget)
    widget.resize(420, 640)
    widget.show()
    return widget


def cell(widget: BookWidget, row: int, column: int, role=Qt.ItemDataRole.DisplayRole):
    return widget.model.index(row, column).data(role)


def test_ladder_shows_best_bid_ask_spread_and_cumulative_sizes(book_widget, market, qloop):
    book = market.order_book_now("BTC/USD", DEPTH)
    qloop.run_until_complete(book_widget.refresh())
    eventually_on(qloop, lambda: book_widget.applied_count == 1)  # the batched redraw
    mid_row = book_widget.model.spread_row
    best_ask, best_bid = mid_row - 1, mid_row + 1
    assert cell(book_widget, best_ask, 0, VALUE_ROLE) == book.best_ask
    assert cell(book_widget, best_bid, 0, VALUE_ROLE) == book.best_bid
    assert cell(book_widget, best_bid, 0) == f"{book.best_bid:,.2f}"
    spread = book.best_ask - book.best_bid
    assert book.best_bid < book.best_ask
    assert cell(book_widget, mid_row, 0).startswith(f"Spread {spread:,.2f} (")
    assert f"Mid {(book.best_ask + book.best_bid) / 2:,.3f}" in cell(book_widget, mid_row, 0)
    # asks read upwards from the spread, bids downwards; totals add up level by level
    for offset in range(DEPTH):
        ask_row, bid_row = best_ask - offset, best_bid + offset
        assert cell(book_widget, ask_row, 0, VALUE_ROLE) == book.asks[offset].price
        assert cell(book_widget, bid_row, 1, VALUE_ROLE) == book.bids[offset].quantity
        assert cell(book_widget, ask_row, 2, VALUE_ROLE) == sum(
            (level.quantity for level in book.asks[: offset + 1]), Decimal(0)
        )
        assert cell(book_widget, bid_row, 2, VALUE_ROLE) == sum(
            (level.quantity for level in book.bids[: offset + 1]), Decimal(0)
        )
    assert "bid " + f"{book.best_bid:,.2f}" in book_widget.header.text()
    assert "synthetic" in book_widget.header.text()
    x, y = book_widget.depth_chart.bids.getData()
    assert x[0] == float(book.best_bid) and y[0] == 0.0
    assert y[-1] == pytest.approx(float(sum(level.quantity for level in book.bids)))


def test_a_burst_of_books_is_drawn_once_with_the_newest_and_widgets_are_kept(
    book_widget, qloop
):
    table_model = book_widget.ladder.model()
    resets: list[bool] = []
    table_model.modelReset.connect(lambda: resets.append(True))
    for step in range(20):
        price = Decimal(9000 + step)
        book = OrderBook(
            "BTC/USD", step,
            bids=(BookLevel(price - 1, Decimal("0.5")), BookLevel(price - 2, Decimal("1.25"))),
            asks=(BookLevel(price + 1, Decimal("0.75")),),
        )
        book_widget.update_book(book)
    eventually_on(qloop, lambda: book_widget.applied_count > 0)
    assert book_widget.applied_count == 1
    assert book_widget.book is not None and book_widget.book.timestamp_ms == 19
    mid = book_widget.model.spread_row
    assert cell(book_widget, mid + 1, 0, VALUE_ROLE) == Decimal(9018)
    assert cell(book_widget, mid + 2, 2, VALUE_ROLE) == Decimal("1.75")
    assert cell(book_widget, mid - 2, 0) is None  # only one ask level: the row stays blank
    assert book_widget.ladder.model() is table_model and resets == []


def test_one_sided_book_says_there_is_no_spread(book_widget):
    book_widget.update_book(
        OrderBook("BTC/USD", 1, bids=(BookLevel(Decimal(100), Decimal(1)),), asks=())
    )
    book_widget.flush()
    assert cell(book_widget, book_widget.model.spread_row, 0) == "One-sided book: no spread"


def test_clock_ticks_fetch_and_draw_a_few_books_a_second(book_widget, market, qloop):
    clock = market._clock
    for step in range(1, 11):  # ten ticks in quick succession
        clock.advance_to(clock.now_ms() + step)
        book_widget.on_clock_advanced()
    newest = market.order_book_now("BTC/USD", DEPTH)
    eventually_on(qloop, lambda: book_widget.book == newest)
    assert 1 <= book_widget.applied_count <= 2
