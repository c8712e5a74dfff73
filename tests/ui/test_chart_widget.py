"""The candlestick chart over the real bundled BTC/USD data, driven as a person would."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QToolTip

from app.domain.clock import ReplayClock
from app.domain.trading import (
    ExitKind,
    Fill,
    Order,
    OrderStatus,
    OrderType,
    Position,
    Side,
)
from app.indicators.engine import IndicatorEngine, compute
from app.market.csv_loader import LoadedFile, load_csv
from app.market.replay import ReplayMarketData
from app.ui.charts.chart_widget import ChartWidget
from app.ui.charts.style import format_price
from tests.helpers.eventually import eventually_on
from tests.helpers.paths import BTC_USD_1D, BTC_USD_1H, BTC_USDT_1H

HOUR = 3_600_000
# the offscreen platform warns when a top-level widget is shown; that is not a defect of ours
pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")


@pytest.fixture(scope="module")
def loaded() -> list[LoadedFile]:
    return [load_csv(path) for path in (BTC_USD_1H, BTC_USD_1D, BTC_USDT_1H)]


@pytest.fixture
def clock(loaded: list[LoadedFile]) -> ReplayClock:
    start = int(loaded[0].series.timestamp_ms[-2000])
    # mid-way through a 4h bucket, so the 4h chart has a forming bar
    return ReplayClock(start - start % (4 * HOUR) + 2 * HOUR)


@pytest.fixture
def market(clock: ReplayClock, loaded: list[LoadedFile]) -> ReplayMarketData:
    return ReplayMarketData(clock, loaded)


@pytest.fixture
def chart(qtbot, qloop, market: ReplayMarketData) -> Iterator[ChartWidget]:
    widget = ChartWidget(market, symbol="BTC/USD", interval="1h", redraw_hz=10)
    qtbot.addWidget(widget)
    widget.resize(1100, 700)
    widget.show()
    qloop.run_until_complete(widget.load())
    yield widget


def x_range(chart: ChartWidget) -> tuple[float, float]:
    (x0, x1), _ = chart.view.price_plot.vb.viewRange()
    return x0, x1


def test_chart_shows_the_real_btc_usd_hourly_candles(chart: ChartWidget, market) -> None:
    expected = market.series_now("BTC/USD", "1h")
    candles = chart.view.candles
    assert len(expected) > 15_000
    np.testing.assert_array_equal(candles.close, expected.close)
    np.testing.assert_array_equal(candles.high, expected.high)
    np.testing.assert_array_equal(chart.view.volume.volume, expected.volume)
    assert [chart.symbol_box.itemText(i) for i in range(chart.symbol_box.count())] == [
        "BTC/USD", "BTC/USDT"
    ]
    assert "4h" in [chart.interval_box.itemText(i) for i in range(chart.interval_box.count())]
    x0, x1 = x_range(chart)
    assert x0 < len(expected) - 1 < x1  # the newest bar is in view
    lo, hi = chart.view.price_plot.vb.viewRange()[1]
    visible = slice(int(np.ceil(x0)), len(expected))
    assert lo < expected.low[visible].min() and expected.high[visible].max() < hi
    assert chart.readout.text().startswith("BTC/USD 1h")


def test_picking_another_interval_and_symbol_redraws_their_candles(
    chart: ChartWidget, market, qloop
) -> None:
    chart.interval_box.setCurrentText("1d")
    qloop.run_until_complete(chart.wait_idle())
    daily = market.series_now("BTC/USD", "1d")
    np.testing.assert_array_equal(chart.view.candles.close, daily.close)
    assert chart.view.bar_count == len(daily)
    assert x_range(chart)[1] > len(daily) - 1

    chart.symbol_box.setCurrentText("BTC/USDT")
    qloop.run_until_complete(chart.wait_idle())
    tether = market.series_now("BTC/USDT", chart.interval)
    assert chart.series is not None and chart.series.symbol == "BTC/USDT"
    np.testing.assert_array_equal(chart.view.candles.close, tether.close)
    x0, x1 = x_range(chart)
    assert x0 < len(tether) - 1 < x1


def test_clock_advance_updates_forming_bar_in_place_then_appends_a_bar(
    chart: ChartWidget, clock: ReplayClock, market, qloop
) -> None:
    qloop.run_until_complete(chart.load(interval="4h"))
    rsi = qloop.run_until_complete(chart.add_indicator("RSI"))
    before = chart.series
    assert before is not None and not before.last_complete
    count = len(before)
    forming_open = before.open[-1]

    clock.advance_to(clock.now_ms() + HOUR)
    for _ in range(5):  # a burst of ticks is batched into one re-read
        chart.on_clock_advanced()
    eventually_on(qloop, lambda: chart.refresh_count >= 1)
    qloop.run_until_complete(chart.wait_idle())
    assert chart.refresh_count == 1
    now = market.series_now("BTC/USD", "4h")
    assert chart.view.bar_count == count
    assert chart.view.candles.open[-1] == forming_open
    assert chart.view.candles.close[-1] == now.close[-1] != before.close[-1]
    assert chart.view.volume.volume[-1] == now.volume[-1] > before.volume[-1]
    expected_rsi = compute(rsi.indicator, rsi.params, now).columns["value"]
    np.testing.assert_allclose(rsi.values["value"], expected_rsi, rtol=1e-12)

    clock.advance_to(clock.now_ms() + 2 * HOUR)  # past the bucket's end: a new bar
    chart.on_clock_advanced()
    eventually_on(qloop, lambda: chart.view.bar_count == count + 1)
    after = market.series_now("BTC/USD", "4h")
    np.testing.assert_array_equal(chart.view.candles.close, after.close)
    qloop.run_until_complete(chart.wait_idle())
    assert len(rsi.values["value"]) == len(after)


def test_view_follows_the_newest_bar_until_the_person_scrolls_away(
    chart: ChartWidget, clock: ReplayClock, qloop
) -> None:
    assert chart.following and not chart.follow_button.isEnabled()
    right = x_range(chart)[1]
    clock.advance_to(clock.now_ms() + 3 * HOUR)
    qloop.run_until_complete(chart.refresh())
    assert x_range(chart)[1] == pytest.approx(right + 3)

    chart.view.price_plot.vb.translateBy(x=-300)  # what a drag to the left does
    assert not chart.following and chart.follow_button.isEnabled()
    panned = x_range(chart)
    clock.advance_to(clock.now_ms() + 2 * HOUR)
    qloop.run_until_complete(chart.refresh())
    assert x_range(chart) == pytest.approx(panned)

    QTest.mouseClick(chart.follow_button, Qt.MouseButton.LeftButton)
    assert chart.following
    x0, x1 = x_range(chart)
    assert x0 < chart.view.bar_count - 1 < x1
    assert x1 - x0 == pytest.approx(panned[1] - panned[0])


def test_sma_overlay_and_rsi_pane_show_the_indicator_engines_values(
    chart: ChartWidget, market, qloop
) -> None:
    sma = qloop.run_until_complete(chart.add_indicator("SMA", {"length": 20}))
    rsi = qloop.run_until_complete(chart.add_indicator("rsi"))
    assert sma.plot is chart.view.price_plot and sma.on_price
    assert rsi.plot in chart.view.panes and len(chart.view.panes) == 1
    assert list(chart.studies) == ["SMA(20)", "RSI(14)"]

    engine = IndicatorEngine()
    catalogue = engine.catalogue
    for study, name, params in ((sma, "SMA", {"length": 20}), (rsi, "RSI", {"length": 14})):
        expected = qloop.run_until_complete(
            engine.latest(market, "BTC/USD", "1h", catalogue.get(name), params, 500)
        )
        x, y = study.items["value"].getData()
        assert len(y) == chart.view.bar_count
        np.testing.assert_allclose(y[-500:], expected.columns["value"], rtol=1e-12)
    lo, hi = rsi.plot.vb.viewRange()[1]
    assert lo < 0 and hi > 100  # the fixed 0-100 scale, padded
    assert "RSI(14)" in chart.readout.text()

    chart.remove_indicator("RSI(14)")
    assert chart.view.panes == [] and list(chart.studies) == ["SMA(20)"]


def _order(order_id: str, side: Side, created_ms: int, **extra) -> Order:
    return Order(
        order_id=order_id, client_order_id=order_id, agent_id=extra.pop("agent", "trader-1"),
        symbol="BTC/USD", side=side, order_type=extra.pop("type", OrderType.MARKET),
        quantity=Decimal("0.25"), created_ms=created_ms, **extra,
    )


@pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise")  # the tooltip
def test_fills_and_orders_are_marked_at_their_bars_with_agent_and_reason(
    chart: ChartWidget, qloop
) -> None:
    series = chart.series
    assert series is not None
    n = len(series)
    buy_bar, sell_bar, limit_bar = n - 30, n - 12, n - 5
    ts = series.timestamp_ms
    orders = [
        _order("o1", Side.BUY, int(ts[buy_bar]), reason="RSI oversold bounce",
               status=OrderStatus.FILLED),
        _order("o2", Side.SELL, int(ts[sell_bar]), reason="take profit at resistance",
               status=OrderStatus.FILLED, agent="trader-2"),
        _order("o3", Side.BUY, int(ts[limit_bar]) + 60_000, type=OrderType.LIMIT,
               price=Decimal("7000.5"), reason="bid the dip"),
    ]
    fills = [
        Fill("f1", "o1", "trader-1", "BTC/USD", Side.BUY, Decimal("0.25"),
             Decimal(str(series.close[buy_bar])), Decimal("1"), "USD", int(ts[buy_bar]) + 5_000),
        Fill("f2", "o2", "trader-2", "BTC/USD", Side.SELL, Decimal("0.25"),
             Decimal(str(series.close[sell_bar])), Decimal("1"), "USD", int(ts[sell_bar]) + 9),
        Fill("f3", "oX", "trader-9", "ETH/USD", Side.BUY, Decimal("1"), Decimal("200"),
             Decimal("0"), "USD", int(ts[sell_bar])),  # another symbol: not on this chart
    ]
    chart.set_trades(fills, orders)
    drawn = chart.view.markers.marker_positions()
    assert [round(x) for x, _, _ in drawn] == [buy_bar, sell_bar, limit_bar]
    (_, buy_y, buy_tip), (_, sell_y, sell_tip), (_, limit_y, limit_tip) = drawn
    assert buy_y < series.low[buy_bar] and sell_y > series.high[sell_bar]
    assert limit_y == 7000.5
    assert "BUY 0.250000 BTC/USD" in buy_tip and "trader-1" in buy_tip
    assert "RSI oversold bounce" in buy_tip
    assert f"@ {format_price(series.close[buy_bar], 2)}" in buy_tip
    assert "SELL" in sell_tip and "trader-2" in sell_tip and "take profit" in sell_tip
    assert "LIMIT" in limit_tip and "SUBMITTED" in limit_tip and "bid the dip" in limit_tip

    # hovering the sell marker shows its tooltip, as a person would see it
    vb = chart.view.price_plot.vb
    scene_point = vb.mapViewToScene(QPointF(sell_bar, sell_y))
    view_point = chart.view.mapFromScene(scene_point)
    QTest.qWait(50)  # pyqtgraph drops mouse moves closer together than its rate limit
    QTest.mouseMove(chart.view.viewport(), view_point)
    assert QToolTip.isVisible() and "take profit at resistance" in QToolTip.text()


def test_open_levels_are_tags_on_the_price_axis_apart_and_the_scale_makes_room_for_them(
    chart: ChartWidget,
) -> None:
    series = chart.series
    assert series is not None
    last = float(series.close[-1])
    high = float(series.high[-160:].max())
    position = Position("BTC/USD", Decimal("0.5"), Decimal(str(round(last, 2))),
                        Decimal("8100"), Decimal("50"), Decimal("10"))
    take_profit = Decimal(str(round(high * 1.25, 2)))  # far above every candle in view
    stop = Decimal(str(round(last * 0.97, 2)))
    tp = _order("tp", Side.SELL, 0, type=OrderType.LIMIT, price=take_profit,
                exit_kind=ExitKind.TAKE_PROFIT, reduce_only=True)
    sl = _order("sl", Side.SELL, 0, type=OrderType.STOP, stop_price=stop,
                exit_kind=ExitKind.STOP_LOSS, reduce_only=True)
    bid = _order("bid", Side.BUY, 0, type=OrderType.LIMIT, price=stop + Decimal("1"))
    done = _order("old", Side.SELL, 0, type=OrderType.LIMIT, price=Decimal("9900"),
                  exit_kind=ExitKind.TAKE_PROFIT, status=OrderStatus.CANCELLED)
    chart.set_position_lines([position], [tp, sl, bid, done])

    shown = dict((text.split()[0], price) for price, text in chart.view.levels.visible_lines())
    assert shown == {"Avg": float(position.avg_price), "TP": float(take_profit),
                     "SL": float(stop), "Buy": float(stop + 1)}
    # the take profit above every candle is on the scale, not off it
    y0, y1 = chart.view.price_plot.vb.viewRange()[1]
    assert y0 < float(stop) and float(take_profit) < y1
    # each price is a tag on the axis; the stop loss and the bid a dollar apart do not cover
    # each other, the last price has its own, and every tag is on the axis
    chart.view.grab()
    axis = chart.view.price_axis
    rects = axis.tag_rects
    assert set(rects) == {"avg:BTC/USD", "tp", "sl", "bid", "last"}
    keys = sorted(rects)
    for i, a in enumerate(keys):
        assert 0 <= rects[a].top() and rects[a].bottom() <= axis.height()
        for b in keys[i + 1:]:
            assert not rects[a].intersects(rects[b]), (a, b)
    texts = {tag.key: tag.text for tag in axis.tags}
    assert texts["tp"] == f"TP {format_price(take_profit, 2)}"
    assert texts["last"] == format_price(last, 2)
    # the lines across the plot carry no text over the candles
    for key in ("tp", "sl", "bid", "avg:BTC/USD"):
        line = chart.view.levels.line(key)
        assert line is not None and getattr(line, "label", None) is None

    # looking back into history the scale fits that history; the take profit's tag waits at
    # the top of the axis with an arrow
    chart.view.price_plot.vb.setXRange(100, 260, padding=0)
    assert chart.view.price_plot.vb.viewRange()[1][1] < float(take_profit)
    chart.view.grab()
    assert rects is not axis.tag_rects and axis.tag_rects["tp"].top() <= 1.0

    chart.set_position_lines([], [])
    assert chart.view.levels.visible_lines() == []
    assert [tag.key for tag in chart.view.price_axis.tags] == ["last"]


def test_crosshair_readout_shows_the_hovered_bars_ohlcv(chart: ChartWidget) -> None:
    series = chart.series
    assert series is not None
    bar = len(series) - 40
    vb = chart.view.price_plot.vb
    scene_point = vb.mapViewToScene(QPointF(bar + 0.2, float(series.close[bar])))
    QTest.qWait(50)  # pyqtgraph drops mouse moves closer together than its rate limit
    QTest.mouseMove(chart.view.viewport(), chart.view.mapFromScene(scene_point))
    text = chart.readout.text()
    for label, values in (("O", series.open), ("H", series.high), ("L", series.low),
                          ("C", series.close)):
        assert f"{label} {format_price(float(values[bar]), 2)}" in text
    assert "2019-" in text and "UTC" in text
    assert chart.view._vlines[id(chart.view.volume_plot)].value() == bar

    over_axis = QPoint(chart.view.viewport().width() - 5, 20)
    QTest.qWait(50)  # pyqtgraph drops mouse moves closer together than its rate limit
    QTest.mouseMove(chart.view.viewport(), over_axis)  # off the plots: the newest bar again
    assert f"C {format_price(float(series.close[-1]), 2)}" in chart.readout.text()


def test_zoomed_out_chart_thins_candles_and_reuses_its_picture_when_panned(
    chart: ChartWidget,
) -> None:
    n = chart.view.bar_count
    vb = chart.view.price_plot.vb
    vb.setXRange(0, n, padding=0)
    chart.view.grab()
    candles = chart.view.candles
    assert candles.bucket > 1
    assert candles.drawn_columns <= 3 * chart.view.width() // 1
    renders = candles.render_count
    vb.setXRange(n * 0.1, n * 0.5, padding=0)  # zoom in: other bucket, new picture
    chart.view.grab()
    assert candles.render_count == renders + 1
    vb.translateBy(x=n * 0.02)  # a small pan stays inside the cached span
    chart.view.grab()
    assert candles.render_count == renders + 1


def test_chart_opened_before_the_first_candle_fills_in_as_the_replay_reaches_it(
    qtbot, qloop, loaded
) -> None:
    first = int(loaded[0].series.timestamp_ms[0])
    clock = ReplayClock(first)
    market = ReplayMarketData(clock, loaded[:1])
    widget = ChartWidget(market)
    qtbot.addWidget(widget)
    widget.resize(900, 600)
    widget.show()
    qloop.run_until_complete(widget.load())
    assert widget.interval == "1h" and widget.view.bar_count == 0
    assert widget.readout.text() == ""
    widget.view.grab()  # paints without data
    clock.advance_to(first + 30 * HOUR)
    qloop.run_until_complete(widget.refresh())
    assert widget.view.bar_count == 30
    assert widget.readout.text().startswith("BTC/USD 1h")
