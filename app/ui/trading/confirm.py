"""The questions asked before the person's Close and Flatten all: what exactly will happen.

A close names the quantity sold and the P&L it would realize at the last price; Flatten all names
every order it cancels and every position it closes, so the person confirms a list, not a word.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.domain.trading import Mode, Order, Position
from app.runtime.controls import FlattenPlan
from app.ui.panels.style import format_fixed, format_quantity, money_decimals

MAX_LISTED = 12  # more than this are counted, not listed: the dialog must fit a small screen


class ConfirmDialog(QDialog):
    """A question with a title, what will happen (rich text) and a confirm button (the default:
    Enter confirms, Esc backs out)."""

    def __init__(self, name: str, title: str, heading: str, body: str, confirm: str,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(name)
        self.setWindowTitle(title)
        layout = QVBoxLayout(self)
        head = QLabel(heading)
        head.setObjectName("killDialogTitle")
        self.body = QLabel(body)
        self.body.setTextFormat(Qt.TextFormat.RichText)
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(self.body)
        scroll.setMaximumHeight(360)
        buttons = QDialogButtonBox()
        self.confirm_button = QPushButton(confirm)
        self.confirm_button.setObjectName("tradeConfirm")
        self.confirm_button.setDefault(True)
        buttons.addButton(self.confirm_button, QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel_button = buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(head)
        layout.addWidget(scroll, 1)
        layout.addWidget(buttons)
        self.setMinimumWidth(440)

    def text(self) -> str:
        return self.body.text()


def _order_line(order: Order, name: Callable[[str], str]) -> str:
    price = (f" @ {order.price.normalize():f}" if order.price is not None else
             f" stop {order.stop_price.normalize():f}" if order.stop_price is not None else "")
    who = escape(name(order.agent_id))
    return (f"{escape(order.order_id)} {order.side.value} {format_quantity(order.remaining)} "
            f"{escape(order.symbol)} {order.order_type.value}{price} ({who})")


def _position_line(position: Position, ccy: str) -> str:
    pnl = format_fixed(position.unrealized_pnl, money_decimals(ccy), sign=True)
    return (f"{escape(position.symbol)}: sell {format_quantity(position.size)} at market "
            f"(last {position.current_price.normalize():f}), P&amp;L about {pnl} {escape(ccy)}")


def _listed(lines: list[str]) -> str:
    shown = "".join(f"<li>{line}</li>" for line in lines[:MAX_LISTED])
    more = f"<li>… and {len(lines) - MAX_LISTED} more</li>" if len(lines) > MAX_LISTED else ""
    return f"<ul style='margin: 2px 0 6px 0'>{shown}{more}</ul>"


def flatten_text(plan: FlattenPlan, ccy: str, mode: Mode, name: Callable[[str], str]) -> str:
    """What Flatten all will do, item by item."""
    parts = []
    if plan.orders:
        parts.append(f"<b>Cancel {len(plan.orders)} open order"
                     f"{'s' if len(plan.orders) != 1 else ''}</b> (every agent's and yours):")
        parts.append(_listed([_order_line(o, name) for o in plan.orders]))
    if plan.positions:
        total = sum((p.unrealized_pnl for p in plan.positions), Decimal(0))
        parts.append(f"<b>Close {len(plan.positions)} position"
                     f"{'s' if len(plan.positions) != 1 else ''}</b> with market sells, "
                     f"P&amp;L about {format_fixed(total, money_decimals(ccy), sign=True)} "
                     f"{escape(ccy)} before fees:")
        parts.append(_listed([_position_line(p, ccy) for p in plan.positions]))
    when = ("" if not plan.positions else "The sells fill at the next bar's open. "
            if mode is not Mode.LIVE else "This sells on the LIVE exchange. ")
    parts.append(f"{when}Agents keep running and may trade again: trip the kill switch to "
                 "stop them too.")
    return "".join(parts)


def close_text(position: Position, ccy: str, mode: Mode) -> str:
    """What closing one position will do."""
    live = " on the LIVE exchange" if mode is Mode.LIVE else ""
    return (f"{_position_line(position, ccy)}{live}, before the fee.<br><br>Open sell orders "
            f"of {escape(position.symbol)} that are not exits are cancelled first (they hold "
            "back what the close sells); take-profit and stop-loss exits go when the position "
            "is gone.")
