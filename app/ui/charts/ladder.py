"""The order book ladder: a fixed-size table model of asks, the spread and bids, and its shading.

The model always has ``2 * depth + 1`` rows, so a new book only changes cell contents and the
view repaints without a reset (no flicker, no widgets rebuilt). Values stay ``Decimal`` from the
book to the text, so the spread and the cumulative sizes shown are exact; the delegate shades
each row by its cumulative size, the way depth is read at a glance on a trading desk.

A repaint asks the model for about ten roles of every cell, ten times a second; the texts,
colours and shading of a book are therefore worked out once, when the book arrives, and ``data``
only looks them up.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QRectF,
    Qt,
)
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QStyledItemDelegate, QStyleOptionViewItem

from app.domain.market import BookLevel, OrderBook
from app.ui.charts.style import format_price, format_quantity, qcolor

COLUMNS = ("Price", "Size", "Total")
FILL_ROLE = Qt.ItemDataRole.UserRole + 1  # fraction of the deepest cumulative size, 0..1
VALUE_ROLE = Qt.ItemDataRole.UserRole + 2  # the exact Decimal behind a cell
QUANTITY_DECIMALS = 4
Index = QModelIndex | QPersistentModelIndex


@dataclass(frozen=True, slots=True)
class LadderRow:
    """One price level as shown: ``side`` is ``ask`` or ``bid``; ``total`` is cumulative from
    the best price outwards."""

    side: str
    price: Decimal
    size: Decimal
    total: Decimal


def cumulative(levels: tuple[BookLevel, ...], side: str, depth: int) -> list[LadderRow]:
    """Rows of the best ``depth`` levels of one side, with sizes summed from the best price."""
    rows: list[LadderRow] = []
    total = Decimal(0)
    for level in levels[:depth]:
        total += level.quantity
        rows.append(LadderRow(side, level.price, level.quantity, total))
    return rows


class LadderModel(QAbstractTableModel):
    """Asks (highest at the top), one spread row, bids: ``2 * depth + 1`` rows, always."""

    def __init__(self, depth: int, decimals: int = 2) -> None:
        super().__init__()
        self.depth = depth
        self.decimals = decimals
        self.asks: list[LadderRow | None] = [None] * depth  # row order: deepest ask first
        self.bids: list[LadderRow | None] = [None] * depth  # row order: best bid first
        self.spread_text = ""
        self._deepest = Decimal(1)
        self._text: list[list[str | None]] = []
        self._fill: list[float | None] = []
        self._colors = self._theme_colors()
        self._right = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self._center = int(Qt.AlignmentFlag.AlignCenter)
        self._cache_cells()

    @staticmethod
    def _theme_colors() -> dict[str, QColor]:
        return {name: qcolor(name) for name in ("up", "down", "text", "background")}

    def recolor(self) -> None:
        """Take the current theme's colours (the rows repaint with them)."""
        self._colors = self._theme_colors()
        if self.rowCount() > 0:
            self.dataChanged.emit(self.index(0, 0),
                                  self.index(self.rowCount() - 1, self.columnCount() - 1))

    @property
    def spread_row(self) -> int:
        return self.depth

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else 2 * self.depth + 1

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(  # noqa: N802 - Qt's name
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def row_at(self, row: int) -> LadderRow | None:
        if row < self.depth:
            return self.asks[row]
        if row > self.depth:
            return self.bids[row - self.depth - 1]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row, column = index.row(), index.column()
        spread = row == self.spread_row
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text[row][column]
        if role == Qt.ItemDataRole.ForegroundRole:
            if spread or column != 0:
                return self._colors["text"]
            return self._colors["down"] if row < self.spread_row else self._colors["up"]
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return self._center if spread else self._right
        if role == Qt.ItemDataRole.BackgroundRole:
            return self._colors["background"] if spread else None
        if role == FILL_ROLE:
            return self._fill[row]
        if role == VALUE_ROLE:
            level = self.row_at(row)
            return None if level is None else (level.price, level.size, level.total)[column]
        return None

    def _cache_cells(self) -> None:
        """Texts and shading of every cell of the current book (see the module docstring)."""
        self._text, self._fill = [], []
        for row in range(self.rowCount()):
            if row == self.spread_row:
                self._text.append([self.spread_text, None, None])
                self._fill.append(None)
                continue
            level = self.row_at(row)
            if level is None:
                self._text.append([None, None, None])
                self._fill.append(None)
                continue
            self._text.append([
                format_price(level.price, self.decimals),
                format_quantity(level.size, QUANTITY_DECIMALS),
                format_quantity(level.total, QUANTITY_DECIMALS),
            ])
            self._fill.append(float(level.total / self._deepest) if self._deepest else 0.0)

    def set_book(self, book: OrderBook) -> None:
        """Show ``book``; only cell contents change, so views repaint without a reset."""
        asks = cumulative(book.asks, "ask", self.depth)
        bids = cumulative(book.bids, "bid", self.depth)
        self.asks = [None] * (self.depth - len(asks)) + list(reversed(asks))
        self.bids = list(bids) + [None] * (self.depth - len(bids))
        totals = [r.total for r in (*asks, *bids)]
        self._deepest = max(totals) if totals else Decimal(1)
        self.spread_text = spread_text(book, self.decimals)
        self._cache_cells()
        self.dataChanged.emit(self.index(0, 0), self.index(self.rowCount() - 1, len(COLUMNS) - 1))


def spread_text(book: OrderBook, decimals: int) -> str:
    """``Spread 1.20 (0.012%)  Mid 9,876.40``, or why there is none."""
    bid, ask = book.best_bid, book.best_ask
    if bid is None or ask is None:
        return "One-sided book: no spread"
    spread = ask - bid
    mid = (ask + bid) / 2
    percent = spread / mid * 100 if mid else Decimal(0)
    return (
        f"Spread {format_price(spread, decimals)} ({percent:.3f}%)   "
        f"Mid {format_price(mid, decimals + 1)}"
    )


class SizeBarDelegate(QStyledItemDelegate):
    """Shades each row from the right by its cumulative size, in its side's colour."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._shades: dict[str, QColor] = {}
        self.recolor()

    def recolor(self) -> None:
        """Take the current theme's colours."""
        self._shades = {side: qcolor(name) for side, name in (("ask", "down"), ("bid", "up"))}
        for color in self._shades.values():
            color.setAlpha(48)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        fraction = index.data(FILL_ROLE)
        level = index.model().row_at(index.row()) if isinstance(fraction, float) else None
        if isinstance(fraction, float) and level is not None:
            view = option.widget
            row_width = float(view.viewport().width()) if view is not None else 0.0
            bar_left = row_width * (1.0 - min(max(fraction, 0.0), 1.0))
            rect = QRectF(option.rect)
            shade = rect.intersected(QRectF(bar_left, rect.top(), row_width, rect.height()))
            if not shade.isEmpty():
                painter.fillRect(shade, self._shades[level.side])
        super().paint(painter, option, index)
