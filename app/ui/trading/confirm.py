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
from app.ui.panels.style import format_fixed, format_quantity, format_time, money_decimals

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


def flatten_text(plan: FlattenPlan, ccy: str, mode: Mode, name: Callable[[str], str], *,
                 fills_at_ms: int | None = None, now_ms: int | None = None) -> str:
    """What Flatten all will do, item by item, and when its sells fill."""
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
    if not plan.positions:
        when = ""
    elif mode is Mode.LIVE:
        when = "This sells on the LIVE exchange. "
    elif fills_at_ms is not None and now_ms is not None:
        when = f"The sells fill at the next bar's open, {fill_time_words(fills_at_ms, now_ms)}. "
    else:
        when = "The sells fill at the best bid now, on live quotes. "
    parts.append(f"{when}Agents keep running and may trade again: trip the kill switch to "
                 "stop them too.")
    return "".join(parts)


def fill_time_words(fills_at_ms: int, now_ms: int) -> str:
    """``14:00 UTC``, with the date when it is not today's (market time)."""
    when, today = format_time(fills_at_ms, seconds=False), format_time(now_ms, seconds=False)
    return f"{when[11:] if when[:10] == today[:10] else when} UTC"


def close_text(position: Position, ccy: str, mode: Mode, *, fills_at_ms: int | None = None,
               now_ms: int | None = None, exits_stay: bool = False) -> str:
    """What closing one position will do, and when: a replay's paper close fills at the next
    bar's open (said with its time), and where exits share the coins they stay until then."""
    live = " on the LIVE exchange" if mode is Mode.LIVE else ""
    symbol = escape(position.symbol)
    if fills_at_ms is not None and now_ms is not None:
        when = (f"<br><br>It fills at the next bar's open, "
                f"<b>{fill_time_words(fills_at_ms, now_ms)}</b> (while the replay is paused: "
                "after one Step).")
    else:
        when = ""
    if exits_stay:
        exits = (f"<br><br>Open sell orders of {symbol} that are not exits are cancelled first "
                 "(they hold back what the close sells); its take profit and stop loss keep "
                 "protecting the position until the sell fills, then go with it.")
    else:
        exits = (f"<br><br>Its take-profit and stop-loss exits and other open sell orders of "
                 f"{symbol} are cancelled first (they hold the coins the close sells).")
    return f"{_position_line(position, ccy)}{live}, before the fee.{when}{exits}"
