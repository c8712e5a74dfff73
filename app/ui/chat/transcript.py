"""The scrolling column of cards: append, update, prepend a page, trim, and keep the view still.

A chat is read at the bottom: new cards scroll into view only while the person is already there.
Someone who scrolled up to read an earlier tool call keeps it exactly where it is, while cards are
added below, trimmed off the top or loaded above (the first visible card is the anchor whose
position is restored after each change). The column is bounded by whoever drives it (``trim``):
widgets for every message of a long replay would make each layout pass slower.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QScrollArea, QVBoxLayout, QWidget

from app.ui.chat.bubbles import AnswerBubble, PersonBubble, QuestionCard, TypingBubble
from app.ui.chat.cards import Card, CardHooks, FillCard, NoticeLine, TaskCard, ToolCard
from app.ui.chat.entries import (
    AnswerEntry,
    Entry,
    FillEntry,
    NoticeEntry,
    PersonEntry,
    QuestionEntry,
    TaskEntry,
    ToolEntry,
)
from app.ui.chat.widgets import text_label

BOTTOM_SLACK_PX = 8  # "at the bottom" tolerates a few pixels, or a wheel click would unstick
_CARDS: dict[type[Entry], type[Card]] = {
    PersonEntry: PersonBubble,
    TaskEntry: TaskCard,
    ToolEntry: ToolCard,
    AnswerEntry: AnswerBubble,
    QuestionEntry: QuestionCard,
    NoticeEntry: NoticeLine,
    FillEntry: FillCard,
}


def make_card(entry: Entry, hooks: CardHooks) -> Card:
    return _CARDS[type(entry)](entry, hooks)  # type: ignore[arg-type]


class TranscriptView(QScrollArea):
    """Cards in conversation order, then the bubbles of answers still streaming in."""

    load_earlier_requested = Signal()

    def __init__(self, hooks: CardHooks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.hooks = hooks
        self.setWidgetResizable(True)
        # cards wrap or cut their text to the panel's width; should one still be wider (a very
        # long unbroken word in an answer), a scroll bar reaches it rather than nothing
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        body = QWidget()
        body.setObjectName("transcriptBody")
        self.column = QVBoxLayout(body)
        self.column.setContentsMargins(10, 8, 12, 10)
        self.column.setSpacing(6)
        self.column.addStretch(1)  # few cards sit at the bottom, next to the input
        earlier_row = QHBoxLayout()
        self.load_earlier = QPushButton("Load earlier messages")
        self.load_earlier.setObjectName("loadEarlier")
        self.load_earlier.setCursor(Qt.CursorShape.PointingHandCursor)
        self.load_earlier.clicked.connect(self.load_earlier_requested)
        self.load_earlier.hide()
        earlier_row.addStretch(1)
        earlier_row.addWidget(self.load_earlier)
        earlier_row.addStretch(1)
        self.column.addLayout(earlier_row)
        self.empty = text_label("", "muted", selectable=False)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.column.addWidget(self.empty)
        self._first = self.column.count()  # the layout index of the first card
        self.setWidget(body)
        self.cards: list[Card] = []
        self._by_key: dict[str, Card] = {}
        self.typing: dict[tuple[str, int], TypingBubble] = {}
        self._stick = True
        self._anchor: tuple[Card, int] | None = None
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._scrolled)
        bar.rangeChanged.connect(self._range_changed)

    # -- reading ---------------------------------------------------------------------------------

    @property
    def at_bottom(self) -> bool:
        return self._stick

    def card(self, key: str) -> Card | None:
        return self._by_key.get(key)

    def set_empty_text(self, text: str) -> None:
        self.empty.setText(text)
        self._show_empty()

    # -- changing --------------------------------------------------------------------------------

    def clear(self) -> None:
        for widget in [*self.cards, *self.typing.values()]:
            self.column.removeWidget(widget)  # out of the layout now: new cards count from 0
            widget.hide()
            widget.deleteLater()
        self.cards, self._by_key, self.typing = [], {}, {}
        self.load_earlier.hide()
        self._stick = True
        self._anchor = None
        self._show_empty()

    def append(self, entries: Iterable[Entry]) -> None:
        """Add cards at the end; an entry already shown moves to the end (a queued message the
        agent has just started on)."""
        entries = list(entries)
        if not entries:
            return
        self._hold_anchor()
        for entry in entries:
            card = self._by_key.get(entry.key)
            if card is not None:
                self.cards.remove(card)
                self.column.removeWidget(card)
                card.refresh()
            else:
                card = make_card(entry, self.hooks)
                self._by_key[entry.key] = card
            self.column.insertWidget(self._first + len(self.cards), card)
            card.show()  # now, not on the layout's next pass: what is in the column is shown
            self.cards.append(card)
        self._show_empty()

    def refresh_entries(self, entries: Iterable[Entry]) -> None:
        """Redraw the cards of changed entries (a result arrived, a question was answered)."""
        for entry in entries:
            card = self._by_key.get(entry.key)
            if card is None:
                continue
            if card.entry is entry:
                card.refresh()
                continue
            # the entry was replaced by one of another kind: a failed clarification call
            index = self.cards.index(card)
            fresh = make_card(entry, self.hooks)
            self.column.insertWidget(self._first + index, fresh)
            fresh.show()
            self.column.removeWidget(card)
            card.deleteLater()
            self.cards[index] = fresh
            self._by_key[entry.key] = fresh

    def prepend(self, entries: list[Entry]) -> None:
        """Add an earlier page above the cards shown; the view does not move."""
        if not entries:
            return
        self._hold_anchor()
        for index, entry in enumerate(entries):
            card = make_card(entry, self.hooks)
            self._by_key[entry.key] = card
            self.column.insertWidget(self._first + index, card)
            card.show()
            self.cards.insert(index, card)
        self._show_empty()

    def trim(self, limit: int) -> list[str]:
        """Drop the oldest cards beyond ``limit``; return their keys ("load earlier" brings them
        back)."""
        extra = len(self.cards) - limit
        if extra <= 0:
            return []
        self._hold_anchor()
        dropped, self.cards = self.cards[:extra], self.cards[extra:]
        for card in dropped:
            self.column.removeWidget(card)
            del self._by_key[card.entry.key]
            card.deleteLater()
        self.load_earlier.show()
        return [card.entry.key for card in dropped]

    def set_more(self, more: bool) -> None:
        self.load_earlier.setVisible(more)

    # -- streaming -------------------------------------------------------------------------------

    def stream(self, key: tuple[str, int], agent_name: str, delta: str) -> None:
        """Show ``delta`` in the typing bubble of ``key`` (task id, step), made on first use."""
        bubble = self.typing.get(key)
        if bubble is None:
            self._hold_anchor()
            bubble = TypingBubble(agent_name)
            self.typing[key] = bubble
            self.column.addWidget(bubble)
            bubble.show()
            self._show_empty()
        bubble.append(delta)

    def end_stream(self, key: tuple[str, int]) -> None:
        bubble = self.typing.pop(key, None)
        if bubble is not None:
            self.column.removeWidget(bubble)
            bubble.deleteLater()
            self._show_empty()

    def end_streams(self, task_id: str | None = None) -> None:
        """Remove the typing bubbles (of one task): the answer failed or the agent stopped."""
        for key in [k for k in self.typing if task_id is None or k[0] == task_id]:
            self.end_stream(key)

    # -- scrolling -------------------------------------------------------------------------------

    def scroll_to_bottom(self) -> None:
        self._stick = True
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _show_empty(self) -> None:
        self.empty.setVisible(not self.cards and not self.typing and bool(self.empty.text()))

    def _hold_anchor(self) -> None:
        """Remember the first visible card and its offset, unless the view sticks to the end.

        Called only right before the column's height changes, so the anchor is used (and
        dropped) by the range change that follows, never by a later one.
        """
        if self._stick or self._anchor is not None:
            return
        top = self.verticalScrollBar().value()
        for card in self.cards:
            if card.y() + card.height() > top:
                self._anchor = (card, card.y() - top)
                return

    def _scrolled(self, value: int) -> None:
        self._stick = value >= self.verticalScrollBar().maximum() - BOTTOM_SLACK_PX

    def _range_changed(self, _low: int, high: int) -> None:
        bar = self.verticalScrollBar()
        if self._stick:
            bar.setValue(high)
            return
        anchor, self._anchor = self._anchor, None
        if anchor is not None and anchor[0] in self.cards:
            card, offset = anchor
            bar.setValue(card.y() - offset)
