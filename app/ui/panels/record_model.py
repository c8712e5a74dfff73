"""A read-only table model over a list of records, described by columns.

The account panel's positions, open orders and fills are each a list of domain records; a column
says how to print a record (text), how to align it (numbers right) and, optionally, what colour it
takes (P&L green/red, BUY/SELL). One model class serves all three tables, and ``sort`` orders by a
raw key per column rather than by the printed text, so "1,000.00" sorts after "999.00".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont

Index = QModelIndex | QPersistentModelIndex
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
LEFT = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter


@dataclass(frozen=True)
class Column[R]:
    title: str
    text: Callable[[R], str]
    numeric: bool = False
    color: Callable[[R], str | None] | None = None
    key: Callable[[R], Any] | None = None
    tooltip: Callable[[R], str] | None = None


class RecordTableModel[R](QAbstractTableModel):
    """Rows of records ``R`` shown through ``columns``; ``set_rows`` replaces them all."""

    def __init__(self, columns: Sequence[Column[R]], mono: QFont | None = None) -> None:
        super().__init__()
        self.columns = list(columns)
        self.rows: list[R] = []
        self._mono = mono

    def set_rows(self, rows: Sequence[R]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def record(self, row: int) -> R:
        return self.rows[row]

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.columns)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(self.columns):
            return None
        column = self.columns[section]
        if role == Qt.ItemDataRole.DisplayRole:
            return column.title
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return RIGHT if column.numeric else LEFT
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        record = self.rows[index.row()]
        column = self.columns[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return column.text(record)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return RIGHT if column.numeric else LEFT
        if role == Qt.ItemDataRole.ForegroundRole and column.color is not None:
            color = column.color(record)
            return None if color is None else QBrush(QColor(color))
        if role == Qt.ItemDataRole.FontRole and column.numeric:
            return self._mono
        if role == Qt.ItemDataRole.ToolTipRole and column.tooltip is not None:
            return column.tooltip(record)
        return None

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        if not 0 <= column < len(self.columns):
            return
        spec = self.columns[column]
        key = spec.key or spec.text
        self.layoutAboutToBeChanged.emit()
        ranked = sorted(
            range(len(self.rows)),
            key=lambda i: key(self.rows[i]),
            reverse=order == Qt.SortOrder.DescendingOrder,
        )
        new_row = {old: new for new, old in enumerate(ranked)}
        # move persistent indexes (selection, per-row buttons) with their records
        before = self.persistentIndexList()
        after = [self.index(new_row[i.row()], i.column()) for i in before]
        self.rows = [self.rows[i] for i in ranked]
        self.changePersistentIndexList(before, after)
        self.layoutChanged.emit()
