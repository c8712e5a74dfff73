"""The order ticket: the person's own order, reviewed against the broker and the Risk Guard, then
placed through the same tool path as an agent's (``app.runtime.controls``).

Keyboard first: F9 opens it with the symbol field focused; Alt+B / Alt+S choose the side; Enter
reviews (what the order would do, what it holds back, and whether the guard would refuse it and
why); Enter again places it; Esc closes. Any change after a review asks for a new review, so what
is placed is always what was shown. A wrong field is named, focused and marked; nothing is sent.
The result (placed, refused by the guard with its reason, refused by the broker) stays on the
ticket until the next review. The symbol's last price, best bid and ask are read again every
second while the ticket is open (they were read once, so the header disagreed with the review);
a ticket closed and opened again drops its result and reviews afresh what it had reviewed (a
refusal by a kill switch since reset must not stand).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from decimal import Decimal

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.domain.errors import KestrelError
from app.domain.trading import Mode, Side
from app.market.port import MarketData
from app.runtime.controls import Outcome, PersonControls, Preview
from app.runtime.ticket import Ticket, TicketError, TicketKind, read_ticket
from app.trading.port import TradingBroker
from app.ui.panels.style import format_fixed, set_banner
from app.ui.panels.tasks import TaskSet
from app.ui.theme import set_look
from app.ui.trading.sizing import SizeButtons, SizingError, sized_amount

KINDS = (
    (TicketKind.MARKET, "Market"),
    (TicketKind.LIMIT, "Limit"),
    (TicketKind.STOP, "Stop"),
    (TicketKind.STOP_LIMIT, "Stop limit"),
    (TicketKind.TP_SL, "TP/SL on position held"),
)
FIELDS = ("amount", "price", "stop_price", "take_profit", "stop_loss")
QUOTE_MS = 1000  # the quote is read again every second while the ticket is open


class OrderTicket(QDialog):
    """The ticket; one per window, kept between uses (its fields stay as the person left them).

    Signals:
        placed: an order (or TP/SL exits) was placed; carries the ``Outcome``.
    """

    placed = Signal(object)

    def __init__(
        self,
        controls: PersonControls,
        broker: TradingBroker,
        symbols: Sequence[str],
        mode: Mode,
        tasks: TaskSet,
        parent: QWidget | None = None,
        market: MarketData | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("orderTicket")
        self.controls = controls
        self.broker = broker
        self.market = market
        self.tasks = tasks
        self._reading = False  # a quote read is on its way: the timer waits for it
        self.quote_timer = QTimer(self)
        self.quote_timer.setInterval(QUOTE_MS)
        self.quote_timer.timeout.connect(self._read_quote)
        self.live = mode is Mode.LIVE
        self.setWindowTitle("New LIVE order" if self.live else "New order")
        self.reviewed: Ticket | None = None
        self.client_id = ""
        self.outcome: Outcome | None = None
        self._build(symbols)
        self._kind_changed()
        self.symbol.currentTextChanged.connect(self._symbol_changed)
        self._symbol_changed(self.symbol.currentText())

    # -- layout ----------------------------------------------------------------------------------

    def _build(self, symbols: Sequence[str]) -> None:
        root = QVBoxLayout(self)
        root.setSpacing(6)
        # the dialog grows with the review and the result instead of squeezing the form
        root.setSizeConstraint(QLayout.SizeConstraint.SetMinimumSize)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.symbol = QComboBox()
        self.symbol.setObjectName("ticketSymbol")
        self.symbol.addItems(list(symbols))
        self.last = QLabel("")
        set_look(self.last, "muted")
        row = QHBoxLayout()
        row.addWidget(self.symbol, 1)
        row.addWidget(self.last)
        form.addRow(_buddy("&Symbol", self.symbol), row)

        self.buy = QPushButton("&Buy")
        self.buy.setObjectName("ticketBuy")
        self.sell = QPushButton("&Sell")
        self.sell.setObjectName("ticketSell")
        self.sides = QButtonGroup(self)
        for button in (self.buy, self.sell):
            button.setCheckable(True)
            button.setAutoDefault(False)
            self.sides.addButton(button)
        self.buy.setChecked(True)
        sides = QHBoxLayout()
        sides.addWidget(self.buy)
        sides.addWidget(self.sell)
        form.addRow("Side", sides)

        self.kind = QComboBox()
        self.kind.setObjectName("ticketKind")
        for kind, title in KINDS:
            self.kind.addItem(title, kind.value)
        form.addRow("&Type", self.kind)

        self.fields: dict[str, QLineEdit] = {}
        for name in FIELDS:
            edit = QLineEdit()
            edit.setObjectName(f"ticket_{name}")
            self.fields[name] = edit
        self.unit = QComboBox()
        self.unit.setObjectName("ticketUnit")
        amount = QHBoxLayout()
        amount.addWidget(self.fields["amount"], 1)
        amount.addWidget(self.unit)
        form.addRow(_buddy("&Amount", self.fields["amount"]), amount)
        self.sizes = SizeButtons()
        for fraction, button in self.sizes.buttons.items():
            button.clicked.connect(lambda _=False, f=fraction: self.tasks.spawn(self._size(f)))
        form.addRow("", self.sizes)
        form.addRow("&Limit price", self.fields["price"])
        form.addRow("Stop &price", self.fields["stop_price"])
        form.addRow("Take pr&ofit", self.fields["take_profit"])
        form.addRow("Stop l&oss", self.fields["stop_loss"])
        self.fields["take_profit"].setPlaceholderText("optional")
        self.fields["stop_loss"].setPlaceholderText("optional")
        root.addLayout(form)

        self.review_box = QLabel("")
        self.review_box.setObjectName("ticketReview")
        self.review_box.setWordWrap(True)
        self.review_box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.review_box.hide()
        root.addWidget(self.review_box)
        self.result = QLabel("")
        self.result.setObjectName("ticketResult")
        self.result.setWordWrap(True)
        self.result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.result.hide()
        root.addWidget(self.result)

        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.close_button = QPushButton("Close")
        self.close_button.setAutoDefault(False)
        self.close_button.clicked.connect(self.reject)
        self.go = QPushButton("Review")
        self.go.setObjectName("ticketGo")
        self.go.setDefault(True)
        self.go.clicked.connect(self.go_pressed)
        buttons.addWidget(self.close_button)
        buttons.addWidget(self.go)
        root.addLayout(buttons)
        self.review_box.setMinimumWidth(380)  # the form sets the dialog's size: room to read

        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.sides.buttonClicked.connect(lambda _b: self._changed())
        self.unit.currentIndexChanged.connect(lambda _i: self._changed())
        for edit in self.fields.values():
            edit.textEdited.connect(lambda _t: self._changed())

    # -- state -----------------------------------------------------------------------------------

    def kind_value(self) -> TicketKind:
        return TicketKind(self.kind.currentData())

    def set_kind(self, kind: TicketKind) -> None:
        self.kind.setCurrentIndex(self.kind.findData(kind.value))

    def form(self) -> dict[str, str]:
        units = ("base", "quote")
        return {
            "symbol": self.symbol.currentText(),
            "side": "BUY" if self.buy.isChecked() else "SELL",
            "kind": self.kind_value().value,
            "unit": units[self.unit.currentIndex()] if self.unit.currentIndex() >= 0 else "base",
            **{name: edit.text() for name, edit in self.fields.items()},
        }

    def fill_in(
        self, *, symbol: str | None = None, side: Side | None = None,
        kind: TicketKind | None = None, price: Decimal | None = None,
        amount: Decimal | None = None,
    ) -> None:
        """Put values in the form from outside it (the chart's "limit here", an order-book
        level, a size button); what was reviewed no longer stands. A price goes where the
        order type takes it: a stop's trigger, else the limit."""
        if symbol:
            self.symbol.setCurrentText(symbol)
        if side is not None:
            (self.buy if side is Side.BUY else self.sell).setChecked(True)
        if kind is not None:
            self.set_kind(kind)
        if price is not None:
            field = "stop_price" if self.kind_value() is TicketKind.STOP else "price"
            self.fields[field].setText(format(price, "f"))
        if amount is not None:
            self.unit.setCurrentIndex(0)  # the base currency: sizes are quantities
            self.fields["amount"].setText(format(amount, "f"))
        self._changed()

    async def _size(self, fraction: Decimal) -> None:
        """A size button: that share of what is free, in the amount field."""
        try:
            amount = await sized_amount(self.broker, self.form(), fraction)
        except SizingError as exc:
            self._field_error(TicketError("amount", str(exc)))
            return
        self.fill_in(amount=amount)

    def _kind_changed(self) -> None:
        kind = self.kind_value()
        exits_only = kind is TicketKind.TP_SL
        self.fields["price"].setEnabled(kind.needs_price)
        self.fields["stop_price"].setEnabled(kind.needs_stop)
        self.fields["amount"].setEnabled(not exits_only)
        self.unit.setEnabled(not exits_only)
        self.buy.setEnabled(not exits_only)
        self.sell.setEnabled(not exits_only)
        self._changed()

    def _symbol_changed(self, symbol: str) -> None:
        base, _, quote = symbol.partition("/")
        self.unit.blockSignals(True)
        index = max(self.unit.currentIndex(), 0)
        self.unit.clear()
        self.unit.addItems([base or "base", quote or self.broker.quote_currency])
        self.unit.setCurrentIndex(index)
        self.unit.blockSignals(False)
        self.last.setText("")
        self._read_quote()
        self._changed()

    # -- the quote, live while the ticket is open --------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.quote_timer.start()
        self._read_quote()

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802 - Qt's name
        self.quote_timer.stop()  # nobody reads it: nothing is asked of the market
        super().hideEvent(event)

    def reopened(self) -> None:
        """The ticket is shown again: what it said before is of another moment (a price, a
        kill switch since reset), so the result goes and a review shown is made afresh."""
        self.result.hide()
        self.outcome = None
        if not self.review_box.isHidden() or self.reviewed is not None:  # (a hidden dialog's
            self.review()  # children are never "visible": whether one is shown is asked so)

    def _read_quote(self) -> None:
        symbol = self.symbol.currentText()
        if symbol and not self._reading:
            self._reading = True
            self.tasks.spawn(self._show_quote(symbol))

    async def _show_quote(self, symbol: str) -> None:
        """The last price, and the best bid and ask, as the market has them now."""
        try:
            canonical = self.broker.canonical_symbol(symbol)
            last = await self.broker.last_price(canonical)
            book = (await self.market.order_book(canonical, 1)
                    if self.market is not None else None)
        except KestrelError:
            return
        finally:
            self._reading = False
        if self.symbol.currentText() != symbol:
            return
        decimals = max(0, -int(last.normalize().as_tuple().exponent or 0))
        if self.market is not None:
            try:
                decimals = self.market.price_decimals(canonical)
            except KestrelError:
                pass
        parts = [f"last {format_fixed(last, decimals)}"]
        if book is not None and book.best_bid is not None and book.best_ask is not None:
            parts += [f"bid {format_fixed(book.best_bid, decimals)}",
                      f"ask {format_fixed(book.best_ask, decimals)}"]
        self.last.setText("  ·  ".join(parts))

    def _changed(self) -> None:
        """Whatever changed, what was reviewed no longer stands."""
        self.reviewed = None
        self.go.setText("Review")
        self.go.setEnabled(True)
        self.review_box.hide()
        for edit in self.fields.values():
            set_look(edit, "")

    # -- review and place ------------------------------------------------------------------------

    def go_pressed(self) -> None:
        """Enter or the button: review the ticket, or place what was reviewed."""
        if self.reviewed is None:
            self.review()
        else:
            self.place()

    def review(self) -> None:
        self._changed()
        self.result.hide()
        try:
            ticket = read_ticket(self.form())
        except TicketError as exc:
            self._field_error(exc)
            return
        self.go.setEnabled(False)
        self.tasks.spawn(self._review(ticket))

    def _field_error(self, exc: TicketError) -> None:
        set_banner(self.review_box, "error")
        self.review_box.setText(exc.message)
        self.review_box.show()
        edit = self.fields.get(exc.field)
        if edit is not None:
            set_look(edit, "error")
            edit.setFocus()
        elif exc.field == "symbol":
            self.symbol.setFocus()

    async def _review(self, ticket: Ticket) -> None:
        try:
            preview = await self.controls.preview(ticket)
        finally:
            self.go.setEnabled(True)
        self.show_preview(ticket, preview)

    def show_preview(self, ticket: Ticket, preview: Preview) -> None:
        lines = list(preview.lines)
        if preview.error is not None:
            set_banner(self.review_box, "error")
            lines.append(f"The broker would refuse it: {preview.error}")
        elif preview.rule is not None:
            set_banner(self.review_box, "error")
            lines.append(f"The Risk Guard would refuse it ({preview.rule}): {preview.refusal}")
        else:
            set_banner(self.review_box, "warning" if self.live else "info")
            lines.append("The Risk Guard would accept it now.")
        self.review_box.setText("\n".join(lines))
        self.review_box.show()
        self.adjustSize()
        if not preview.passes:
            return
        self.reviewed = ticket
        self.client_id = f"person-{uuid.uuid4().hex[:16]}"
        what = "exits" if ticket.kind is TicketKind.TP_SL else f"{ticket.side.value} order"
        self.go.setText(f"Place {'LIVE ' if self.live else ''}{what}")
        self.go.setFocus()

    def place(self) -> None:
        ticket = self.reviewed
        if ticket is None:
            return
        self.go.setEnabled(False)
        self.tasks.spawn(self._place(ticket, self.client_id))

    async def _place(self, ticket: Ticket, client_id: str) -> None:
        try:
            outcome = await self.controls.submit(ticket, client_id)
        finally:
            self._changed()
        self.show_outcome(outcome)
        if outcome.ok:
            self.placed.emit(outcome)

    def show_outcome(self, outcome: Outcome) -> None:
        self.outcome = outcome
        text = outcome.text
        if outcome.ok and self.reviewed is None and self._pending_exits(outcome):
            text += " Its take profit and stop loss are placed once it fills."
        set_banner(self.result, "ok" if outcome.ok else "error")
        self.result.setText(text if outcome.ok else f"Not placed. {text}")
        self.result.show()
        self.adjustSize()

    def _pending_exits(self, outcome: Outcome) -> bool:
        return outcome.order_id is not None and outcome.order_id in self.controls.pending_exits


def _buddy(text: str, widget: QWidget) -> QLabel:
    """A row's label whose Alt+letter focuses ``widget`` (a row holding a layout gets none)."""
    label = QLabel(text)
    label.setBuddy(widget)
    return label
