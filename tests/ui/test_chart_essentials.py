"""The chart's essentials in the real window, as a person uses them: the crosshair's price and time
in boxes on the axes; the log scale; an indicator's parameters edited in its dialog (a wrong value
refused there) and its value in the legend; a horizontal line from the right-click menu and a trend
line from two clicks; and all of it back after a restart of the same workspace."""

from __future__ import annotations

import math

import pytest
from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtWidgets import QDialogButtonBox

from app.ui.charts.chart_widget import ChartWidget
from app.ui.charts.style import format_price
from tests.helpers.eventually import eventually
from tests.ui.desk import Desk, click, send_mouse

# a menu grabs the keyboard, which the offscreen platform cannot do
pytestmark = [
    pytest.mark.usefixtures("every_mouse_move"),
    pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                              "does not support activateWindow",
                              "does not support grabbing the keyboard"),
]



def middle(chart: ChartWidget) -> QPoint:
    """The viewport pixel in the middle of the price plot."""
    scene = chart.view.price_plot.vb.sceneBoundingRect().center()
    return chart.view.mapFromScene(scene)


def test_crosshair_log_scale_indicator_dialog_and_drawings_kept_per_workspace(
    desk: Desk,
) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        await window.pause_all()
        window.replay_bar.toggle_pause()
        chart: ChartWidget = window.panels["chart"]
        await eventually(lambda: chart.view.bar_count > 0)
        await chart.wait_idle()
        view = chart.view

        # the crosshair: its price on the price axis, its bar's time on the time axis
        point = middle(chart)
        send_mouse(view.viewport(), QEvent.Type.MouseMove, point)
        axis, times = view.price_axis, view.plots[-1].getAxis("bottom")
        await eventually(lambda: axis.cursor is not None and times.cursor is not None)
        scene = view.mapToScene(point)
        under = view.price_plot.vb.mapSceneToView(scene)
        assert axis.format_value(axis.cursor) == format_price(under.y(), 2)
        assert times.cursor == round(under.x())
        assert times.cursor_text().count(" ") == 4  # "Sat 20 Jul 2019 10:00"

        # log scale: the candles are drawn at log10 of their prices, the ticks are prices
        series = chart.series
        assert series is not None
        chart.log_button.click()
        assert view.price_scale.log
        assert view.high[-1] == pytest.approx(math.log10(float(series.high[-1])))
        y0, y1 = view.price_plot.vb.viewRange()[1]
        ticks = [v for _spacing, values in axis.tickValues(y0, y1, axis.height())
                 for v in values]
        assert ticks and all(10 ** y0 <= view.price_scale.from_view(t) <= 10 ** y1
                             for t in ticks)

        # an indicator's parameters in its dialog: a wrong value is refused there, a right one
        # replaces the study; its value at the newest bar is in the legend
        await chart.add_indicator("SMA", {"length": 20})
        button = chart._study_buttons["SMA(20)"]
        edit = next(a for a in button.menu().actions() if a.text().startswith("Edit"))
        edit.trigger()
        dialog = chart.study_dialog
        await eventually(lambda: dialog is not None and dialog.isVisible())
        ok = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
        dialog.fields["length"].setText("0")
        ok.click()
        assert dialog.isVisible() and dialog.error.isVisible()
        assert "length" in dialog.error.text()
        dialog.fields["length"].setText("50")
        ok.click()
        await eventually(lambda: "SMA(50)" in chart.studies)
        await chart.wait_idle()
        assert list(chart.studies) == ["SMA(50)"]
        sma = chart.studies["SMA(50)"]
        newest = sma.value_at(view.bar_count - 1)["value"]
        view.hide_crosshair()  # the legend shows the newest bar's values
        assert view.legend_text(view.price_plot) == f"SMA(50) {format_price(newest, 2)}"

        # a horizontal line from the right-click menu, where the mouse is
        point = middle(chart)
        click(view.viewport(), point, Qt.MouseButton.RightButton)
        await eventually(lambda: chart.context_menu is not None and chart.context_menu.isVisible())
        line = next(a for a in chart.context_menu.actions()
                    if a.text().startswith("Horizontal line at"))
        line.trigger()
        chart.context_menu.close()
        assert [d.kind for d in view.drawings.drawings] == ["hline"]
        at = view.drawings.drawings[0].price
        assert line.text() == f"Horizontal line at {format_price(at, 2)}"

        # a trend line from the Draw menu: two clicks on the chart
        trend = next(a for a in chart.draw_button.menu().actions()
                     if a.text().startswith("Trend line"))
        trend.trigger()
        assert chart.message.isVisible() and "both ends" in chart.message.text()
        x0, x1 = view.visible_bars()
        low = view.price_scale.from_view(y0 + (y1 - y0) * 0.3)
        high = view.price_scale.from_view(y0 + (y1 - y0) * 0.7)
        for x, price in ((x0 + (x1 - x0) * 0.4, low), (x0 + (x1 - x0) * 0.6, high)):
            click(view.viewport(), view.view_point_on_screen(x, price), Qt.MouseButton.LeftButton)
        assert [d.kind for d in view.drawings.drawings] == ["hline", "trend"]
        (t0, p0), (t1, p1) = view.drawings.drawings[1].points
        assert t0 < t1 and p0 < p1  # drawn up and to the right, in times and prices
        kept = list(view.drawings.drawings)
        await desk.close(window)

        # the same workspace again: the log scale, the edited indicator and both drawings
        again = await desk.open()
        chart = again.panels["chart"]
        await eventually(lambda: "SMA(50)" in chart.studies and chart.view.bar_count > 0)
        assert chart.log_button.isChecked() and chart.view.price_scale.log
        assert list(chart.studies) == ["SMA(50)"]
        assert chart.view.drawings.drawings == kept
        assert chart.view.drawings.item(kept[1].drawing_id) is not None
        assert not again.errors.reports

    desk.run(scenario)
