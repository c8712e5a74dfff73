"""The window's heavy redraws are spaced so they never pile into one turn of the event loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.domain.clock import ReplayClock
from app.market.replay import ReplayMarketData
from app.ui.charts.book_widget import BookWidget
from app.ui.charts.chart_widget import ChartWidget
from app.ui.panels import widget_tasks
from app.ui.panels.widget_tasks import RedrawGate
from tests.helpers.paths import BTC_USD_1H

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")


def test_the_first_redraw_goes_at_once_and_the_next_ones_wait_their_turn_in_order() -> None:
    gate = RedrawGate(spacing_s=0.020, quiet_s=0.010)
    done: list[tuple[int, float]] = []
    quiet: list[bool] = []

    delayed: list[int] = []

    async def redraw(n: int) -> None:
        await gate.turn()
        done.append((n, time.perf_counter()))
        delayed.append(gate.delayed)
        quiet.append(gate.quiet_until > time.perf_counter())

    async def run() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(redraw(n) for n in range(3)))
        return started

    started = asyncio.run(run())
    assert [n for n, _ in done] == [0, 1, 2]
    offsets = [t - started for _, t in done]
    assert delayed[0] == 0  # the first went at once ...
    assert offsets[1] >= 0.019 and offsets[2] >= 0.039  # ... the next ones a spacing apart
    assert gate.delayed == 2
    assert quiet == [True, True, True]  # each repaint was due right after its redraw


def test_the_quiet_time_after_a_redraw_ends_two_turns_of_the_loop_later() -> None:
    gate = RedrawGate(spacing_s=0.0, quiet_s=10.0)

    async def run() -> list[bool]:
        await gate.turn()
        seen = [gate.quiet_until > time.perf_counter()]
        for _ in range(2):
            await asyncio.sleep(0)
            seen.append(gate.quiet_until > time.perf_counter())
        return seen

    assert asyncio.run(run()) == [True, True, False]


def test_a_negative_spacing_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        RedrawGate(spacing_s=-1)


def test_the_chart_and_the_book_redrawn_together_apply_a_spacing_apart(
    qtbot, qloop, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = RedrawGate(spacing_s=0.050)
    for module in ("app.ui.charts.chart_widget", "app.ui.charts.book_widget"):
        monkeypatch.setattr(f"{module}.REDRAWS", gate)
    assert widget_tasks.REDRAWS is not gate  # the app's own gate is left alone
    clock = ReplayClock(0)
    market = ReplayMarketData.from_paths(clock, [BTC_USD_1H])
    clock.advance_to(market.end_ms())
    chart = ChartWidget(market, symbol="BTC/USD", interval="1h")
    book = BookWidget(market, symbol="BTC/USD", depth=10)
    for widget in (chart, book):
        qtbot.addWidget(widget)
        widget.show()
    qloop.run_until_complete(chart.load())
    applied: dict[str, float] = {}

    async def redraw_both() -> None:
        async def chart_refresh() -> None:
            await chart.refresh()
            applied["chart"] = time.perf_counter()

        async def book_redraw() -> None:
            await book._fetch_and_draw()  # what the book's redraw timer runs
            applied["book"] = time.perf_counter()

        await asyncio.gather(chart_refresh(), book_redraw())

    qloop.run_until_complete(redraw_both())
    assert book.applied_count == 1 and chart.refresh_count >= 1
    assert abs(applied["chart"] - applied["book"]) >= 0.045
    assert gate.delayed == 1
