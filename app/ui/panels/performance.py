"""Performance while it runs: each agent's and the person's P&L today and in all, win rate,
profit factor, and their P&L over time.

One account holds everyone's money, so an agent's "equity" is what its own trades made: the P&L
of its lots (``app.ui.trades``, the one book every view reads, ``app.trading.lots``' rule), realized
when a part of a lot is sold (whoever sold it) and unrealized at the last price while held. The
curve is that P&L over time: a step at every sale out of the actor's lots, and at the end what is
still open. Win rate and profit factor count the actor's closed trades, as Closed trades lists
them. A day is the market clock's UTC day (a replay's simulated one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

import pyqtgraph as pg
from PySide6.QtCore import QItemSelection, Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.domain.agents import PERSON_ID, agent_key
from app.trading.closed_trades import ClosedTrade
from app.trading.lots import Lot
from app.ui.names import AgentNames
from app.ui.panels.record_model import Column, RecordTableModel
from app.ui.panels.style import COLORS, format_fixed, format_pct, mono_font, pnl_color
from app.ui.theme import set_look
from app.ui.trades import Realized

ZERO = Decimal(0)
DAY_MS = 86_400_000
ALL = ""  # the row of everyone together
CUMULATIVE, DAILY = "P&L over time", "Daily P&L"
TABLE_MAX_PX = 700
CHART_MIN_PX = 240
CURVE_COLOURS = ("#4f8cff", "#f0b429", "#26a69a", "#e040fb", "#ff7043", "#8d6e63", "#90a4ae")


@dataclass(frozen=True, slots=True)
class ActorPerformance:
    """One actor's results (``actor`` is ``ALL`` for everyone together)."""

    actor: str
    today: Decimal
    realized: Decimal
    unrealized: Decimal | None  # None: something held has no price now
    trades: int
    wins: int
    gross_profit: Decimal
    gross_loss: Decimal  # as a positive amount

    @property
    def total(self) -> Decimal:
        return self.realized + (self.unrealized or ZERO)

    @property
    def win_rate(self) -> Decimal | None:
        return Decimal(self.wins) / self.trades * 100 if self.trades else None

    @property
    def profit_factor(self) -> Decimal | None:
        """Gross profit over gross loss; None without a losing trade (or any trade)."""
        return self.gross_profit / self.gross_loss if self.gross_loss else None


def day_start(ms: int) -> int:
    return ms - ms % DAY_MS


def _is(actor: str, owner: str) -> bool:
    return actor == ALL or agent_key(actor) == agent_key(owner)


def actor_performance(actor: str, realized: Sequence[Realized], closed: Sequence[ClosedTrade],
                      lots: Sequence[Lot], last: Callable[[str], Decimal | None],
                      now_ms: int) -> ActorPerformance:
    mine = [r for r in realized if _is(actor, r.owner)]
    today = day_start(now_ms)
    trades = [t for t in closed if _is(actor, t.opened_by)]
    unrealized: Decimal | None = ZERO
    for lot in lots:
        if not _is(actor, lot.owner):
            continue
        price = last(lot.symbol)
        if price is None:
            unrealized = None
            break
        unrealized = (unrealized or ZERO) + lot.size * price - lot.cost
    return ActorPerformance(
        actor=actor,
        today=sum((r.pnl for r in mine if r.time_ms >= today), ZERO),
        realized=sum((r.pnl for r in mine), ZERO),
        unrealized=unrealized,
        trades=len(trades), wins=sum(1 for t in trades if t.pnl > 0),
        gross_profit=sum((t.pnl for t in trades if t.pnl > 0), ZERO),
        gross_loss=-sum((t.pnl for t in trades if t.pnl < 0), ZERO),
    )


def pnl_curve(actor: str, realized: Iterable[Realized], start_ms: int, now_ms: int,
              open_pnl: Decimal | None) -> tuple[list[float], list[float]]:
    """(seconds, P&L): zero at ``start_ms``, a step at each sale out of the actor's lots, and
    at ``now_ms`` the realized P&L plus what is still open at the last price."""
    xs, ys = [start_ms / 1000], [0.0]
    total = ZERO
    for part in realized:
        if _is(actor, part.owner):
            xs.append(part.time_ms / 1000)  # a step: flat until the sale, then up or down
            ys.append(float(total))
            total += part.pnl
            xs.append(part.time_ms / 1000)
            ys.append(float(total))
    xs.append(max(now_ms, int(xs[-1] * 1000)) / 1000)
    ys.append(float(total + (open_pnl or ZERO)))
    return xs, ys


def daily_pnl(actor: str, realized: Iterable[Realized]) -> list[tuple[int, Decimal]]:
    """What the actor realized each market day (UTC), oldest first; days without a sale left
    out."""
    days: dict[int, Decimal] = {}
    for part in realized:
        if _is(actor, part.owner):
            day = day_start(part.time_ms)
            days[day] = days.get(day, ZERO) + part.pnl
    return sorted(days.items())


def performance_columns(names: AgentNames, money: int) -> list[Column[ActorPerformance]]:
    def money_text(value: Decimal | None) -> str:
        return "—" if value is None else format_fixed(value, money, sign=True)

    def who(p: ActorPerformance) -> str:
        return "All" if p.actor == ALL else names.name(p.actor)

    return [
        Column("Who", who, tooltip=lambda p: "everyone together" if p.actor == ALL
               else names.tooltip(p.actor)),
        Column("Today", lambda p: money_text(p.today), numeric=True,
               color=lambda p: pnl_color(p.today), key=lambda p: p.today,
               tooltip=lambda _p: "realized since the market day began (UTC)"),
        Column("Realized", lambda p: money_text(p.realized), numeric=True,
               color=lambda p: pnl_color(p.realized), key=lambda p: p.realized),
        Column("Unrealized", lambda p: money_text(p.unrealized), numeric=True,
               color=lambda p: pnl_color(p.unrealized or ZERO),
               key=lambda p: p.unrealized or ZERO),
        Column("Total", lambda p: money_text(p.total), numeric=True,
               color=lambda p: pnl_color(p.total), key=lambda p: p.total),
        Column("Trades", lambda p: str(p.trades), numeric=True, key=lambda p: p.trades,
               tooltip=lambda _p: "closed trades this actor opened"),
        Column("Win rate", lambda p: "—" if p.win_rate is None else format_pct(p.win_rate),
               numeric=True, key=lambda p: p.win_rate or ZERO),
        Column("Profit factor", lambda p: _factor(p), numeric=True,
               key=lambda p: p.profit_factor if p.profit_factor is not None else ZERO,
               tooltip=lambda _p: "gross profit of the winning trades over the gross loss of "
                                  "the losing ones"),
    ]


def _factor(p: ActorPerformance) -> str:
    if p.profit_factor is not None:
        return format_fixed(p.profit_factor, 2)
    return "no loss yet" if p.gross_profit > 0 else "—"


class PerformanceView(QWidget):
    """The table of results per actor beside the chosen actor's P&L over time or per day."""

    def __init__(self, names: AgentNames, money: int, ccy: str,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.names = names
        self.money = money
        self.ccy = ccy
        self.rows: list[ActorPerformance] = []
        self.realized: list[Realized] = []
        self.curves: dict[str, tuple[list[float], list[float]]] = {}
        self.model = RecordTableModel(performance_columns(names, money), mono_font())
        self.table = QTableView()
        self.table.setObjectName("performance_table")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(24)
        self.table.horizontalHeader().setSectionResizeMode(
            QHeaderView.ResizeMode.ResizeToContents)
        self.table.setMinimumHeight(48)
        self.table.selectionModel().selectionChanged.connect(self._selected)
        self.show_box = QComboBox()
        self.show_box.setObjectName("performance_show")
        self.show_box.addItems([CUMULATIVE, DAILY])
        self.show_box.currentTextChanged.connect(lambda _t: self._draw())
        self.caption = QLabel("")
        self.caption.setObjectName("performance_caption")
        set_look(self.caption, "muted")
        # cut at the chart's width, never widening the panel past a small screen
        self.caption.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.chart = pg.PlotWidget(axisItems={"bottom": pg.DateAxisItem(utcOffset=0)})
        self.chart.setObjectName("performance_chart")
        self.chart.setMenuEnabled(False)
        self.chart.setMinimumSize(160, 60)
        self.plot = self.chart.getPlotItem()
        self.plot.showGrid(x=False, y=True, alpha=0.15)
        self.zero = pg.InfiniteLine(pos=0.0, angle=0)
        right = QWidget()
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        bar = QHBoxLayout()
        bar.addWidget(self.caption, 1)
        bar.addWidget(self.show_box)
        column.addLayout(bar)
        column.addWidget(self.chart, 1)
        self.split = split = QSplitter(Qt.Orientation.Horizontal)
        split.setChildrenCollapsible(False)
        split.addWidget(self.table)
        split.addWidget(right)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addWidget(split)
        self.restyle()

    def restyle(self) -> None:
        self.chart.setBackground(COLORS["panel"])
        item = self.plot
        for axis in ("left", "bottom"):
            item.getAxis(axis).setTextPen(COLORS["muted"])
            item.getAxis(axis).setPen(COLORS["border"])
        self.zero.setPen(pg.mkPen(COLORS["muted"], style=Qt.PenStyle.DashLine))
        self._draw()

    @property
    def chosen(self) -> str:
        """The actor whose P&L the chart shows (``ALL``: everyone together)."""
        rows = self.table.selectionModel().selectedRows()
        if rows and rows[0].row() < len(self.model.rows):
            return self.model.rows[rows[0].row()].actor
        return ALL

    def show_performance(self, rows: Sequence[ActorPerformance], realized: Sequence[Realized],
                         start_ms: int, now_ms: int) -> None:
        chosen = self.chosen
        self.rows = list(rows)
        self.realized = list(realized)
        header = self.table.horizontalHeader()
        column, order = header.sortIndicatorSection(), header.sortIndicatorOrder()
        self.model.set_rows(self.rows)
        if self.table.isSortingEnabled() and 0 <= column < self.model.columnCount():
            self.model.sort(column, order)
        self.curves = {p.actor: pnl_curve(p.actor, self.realized, start_ms, now_ms, p.unrealized)
                       for p in self.rows}
        for number, row in enumerate(self.model.rows):
            if row.actor == chosen:
                self.table.selectRow(number)
                break
        if self.isVisible():  # a hidden tab is drawn when it is shown
            self._fit()
            self._draw()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self._fit()
        self._draw()

    def _fit(self) -> None:
        """The numbers whole where there is room, the chart what is left (never a minimum
        width: on a small screen the dock must not grow past the window)."""
        total = sum(self.split.sizes())
        wanted = (self.table.horizontalHeader().length() + 2 * self.table.frameWidth()
                  + self.table.verticalScrollBar().sizeHint().width() + 4)
        table = min(wanted, TABLE_MAX_PX, max(total - CHART_MIN_PX, total // 2))
        if total > 0 and abs(self.split.sizes()[0] - table) > 4:
            self.split.setSizes([table, total - table])

    def choose(self, actor: str) -> None:
        """Select ``actor``'s row (``ALL``: everyone), as a click on it would."""
        for number, row in enumerate(self.model.rows):
            if row.actor == actor:
                self.table.selectRow(number)
                return

    def _selected(self, _selected: QItemSelection, _deselected: QItemSelection) -> None:
        self._draw()

    def _who(self, actor: str) -> str:
        return "everyone" if actor == ALL else self.names.name(actor)

    def _draw(self) -> None:
        self.plot.clear()
        self.plot.addItem(self.zero)
        chosen = self.chosen
        if not self.rows:
            self.caption.setText("No trades yet.")
            return
        if self.show_box.currentText() == DAILY:
            days = daily_pnl(chosen, self.realized)
            self.caption.setText(f"{self._who(chosen)}: realized P&L per day ({self.ccy})")
            if days:
                width = DAY_MS / 1000 * 0.8
                self.plot.addItem(pg.BarGraphItem(
                    x=[(d + DAY_MS / 2) / 1000 for d, _ in days],
                    height=[float(v) for _, v in days], width=width,
                    brushes=[pg.mkBrush(COLORS["up"] if v >= 0 else COLORS["down"])
                             for _, v in days], pen=pg.mkPen(None)))
            self.plot.enableAutoRange()
            return
        self.caption.setText(f"P&L over time ({self.ccy}), {self._who(chosen)} in bold")
        self.caption.setToolTip("Realized as parts of each lot are sold; the last point adds "
                                "what is still open, at the last price.")
        for index, row in enumerate(self.rows):
            xs, ys = self.curves.get(row.actor, ([], []))
            colour = (COLORS["text"] if row.actor == ALL
                      else CURVE_COLOURS[index % len(CURVE_COLOURS)])
            width = 2.4 if row.actor == chosen else 1.0
            self.plot.plot(xs, ys, pen=pg.mkPen(colour, width=width), name=self._who(row.actor))
        self.plot.enableAutoRange()

    def drawn(self) -> list[tuple[str, list[float]]]:
        """What the chart shows: each curve's or bar set's values (for tests)."""
        out = []
        for item in self.plot.items:
            if isinstance(item, pg.PlotDataItem):
                _x, y = item.getData()
                out.append((item.name() or "", [] if y is None else list(y)))
            elif isinstance(item, pg.BarGraphItem):
                out.append(("bars", list(item.opts["height"])))
        return out


def performance_rows(owners: Iterable[str], realized: Sequence[Realized],
                     closed: Sequence[ClosedTrade], lots: Sequence[Lot],
                     last: Callable[[str], Decimal | None], now_ms: int) -> list[ActorPerformance]:
    """Everyone together first, then each actor who traded, and always the person."""
    actors: dict[str, str] = {}
    for actor in (*owners, *(r.owner for r in realized), *(lot.owner for lot in lots)):
        actors.setdefault(agent_key(actor), actor)
    actors.setdefault(agent_key(PERSON_ID), PERSON_ID)
    rows = [actor_performance(ALL, realized, closed, lots, last, now_ms)]
    rows += [actor_performance(a, realized, closed, lots, last, now_ms)
             for a in actors.values()]
    return rows
