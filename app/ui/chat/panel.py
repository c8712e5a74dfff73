"""The chat panel: talk to the Orchestrator (or any agent) and watch it work.

The panel shows one agent's conversation: its stored history, read a page at a time off the event
loop, then the live stream from the bus (messages, streamed answer pieces, questions and answers,
state changes). Bus handlers only queue events; a timer applies the queue at most ten times a
second, so a replay producing hundreds of messages a minute costs a few layout passes, not
hundreds. The column keeps the newest ``MAX_CARDS`` cards while the person reads at the bottom
("load earlier" brings older ones back), and follows new messages only when the person is there.

What the person types goes through ``AgentManager.send_user_message``, which answers an open
clarification or queues a new task; a reply button answers its question directly. Refusals are
shown in words above the input.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.agents.history import ConversationHistory
from app.domain.agents import AgentInfo, AgentRole, AgentState, Question, QuestionKind, Task
from app.domain.errors import KestrelError
from app.events import (
    AgentStateChanged,
    AnswerStreamed,
    ConversationMessageAdded,
    Event,
    QuestionAnswered,
    QuestionAsked,
)
from app.store.audit_trail import ledger_reader
from app.ui.chat.builder import ConversationBuilder, Delta, by_time
from app.ui.chat.cards import CardHooks
from app.ui.chat.composer import Composer
from app.ui.chat.entries import Entry, FillEntry, Message, ToolEntry, readable_hint
from app.ui.chat.header import AgentHeader
from app.ui.chat.reader import ChatReader
from app.ui.chat.transcript import TranscriptView
from app.ui.names import AgentNames
from app.ui.notices import fill_words
from app.ui.panels.style import money_decimals
from app.ui.panels.tasks import BusLink, TaskSet, Throttle
from app.ui.trades import DeskTrades, FillNews

if TYPE_CHECKING:
    from app.runtime.world import World

MAX_CARDS = 300  # kept while the person reads at the bottom
HARD_MAX_CARDS = 900  # kept while the person reads further up (or loaded earlier pages)
HISTORY_MESSAGES = 300  # read when an agent's chat opens
EARLIER_MESSAGES = 150  # read per "load earlier"
DRAW_CHUNK = 40  # cards drawn per loop turn when a page of history is shown
FLUSH_MS = 100  # live events are applied at most ten times a second
DURATION_MS = 500  # tool durations are looked up in the ledger at most twice a second
EXAMPLE = "watch BTC/USDT on 1h every 1h with a trend analyst and a trader"
_STREAM_ENDS = frozenset({"assistant", "native_call", "cut_answer", "final"})


class ChatPanel(QWidget):
    """The chat with one agent at a time; the Orchestrator unless another is chosen.

    Signals:
        agent_changed: the conversation shown is now this agent's (its id).

    Args:
        world: the agent runtime (manager, stores, bus).
    """

    agent_changed = Signal(str)

    def __init__(self, world: World, parent: QWidget | None = None, *,
                 names: AgentNames | None = None, book: DeskTrades | None = None) -> None:
        """``names``: who an id is (the window's resolver); ``book``: the window's book of
        fills (else one of the panel's own), whose fills and exits the chat shows as cards."""
        super().__init__(parent)
        self.setObjectName("chatPanel")
        self.world = world
        self.names = names if names is not None else AgentNames(self._stored_name)
        self.book = book if book is not None else DeskTrades(world.venue.broker, world.bus)
        self._decimals: dict[str, int] = {}
        self.agent_id: str | None = None
        self.builder: ConversationBuilder | None = None
        self._names: dict[str, str] = {}
        self._pending: list[tuple[Event | FillNews, int]] = []
        self._loading = False
        self._generation = 0  # bumped on each switch: a page read for another agent is dropped
        self._timing: list[ToolEntry] = []
        self.tasks = TaskSet(on_error=self._task_failed)
        self.reader = ChatReader(ConversationHistory(ledger_reader(world.ledger)))
        self.hooks = CardHooks(self._agent_name, lambda: dict(self._names), self._answer,
                               live=world.venue.is_live_account, readable=self.names.label_ids)
        self._build()
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(FLUSH_MS)
        self._flush_timer.timeout.connect(self._flush)
        self.durations = Throttle(self._fill_durations, self.tasks, DURATION_MS, parent=self)
        self.link = BusLink(world.bus)
        for event_type in (ConversationMessageAdded, AnswerStreamed, QuestionAsked,
                           QuestionAnswered, AgentStateChanged):
            self.link.subscribe(event_type, self._on_event)
        self.link.attach(self)
        self.tasks.attach(self)
        reader, book, own = self.reader, self.book, book is None
        stop = book.listen(self._on_fill)  # a fill once booked, with whose lots it took
        self.destroyed.connect(lambda *_: (reader.close(), book.detach() if own else stop()))
        self.refresh_agents()
        self.tasks.spawn(self._open_orchestrator())

    def _build(self) -> None:
        # styled by the application's sheet (``app.ui.theme_sheet``), so it follows the theme
        self.setAutoFillBackground(True)
        root = QVBoxLayout(self)
        root.setContentsMargins(0, 0, 0, 0)
        root.setSpacing(0)
        self.header = AgentHeader()
        self.header.agent_chosen.connect(self.set_agent)
        self.header.resume_requested.connect(lambda agent_id: self.tasks.spawn(
            self.resume(agent_id)))
        self.transcript = TranscriptView(self.hooks)
        self.transcript.load_earlier_requested.connect(
            lambda: self.tasks.spawn(self._load_earlier()))
        self.composer = Composer()
        self.composer.send_requested.connect(self.send)
        root.addWidget(self.header)
        root.addWidget(self.transcript, 1)
        root.addWidget(self.composer)

    # -- the agent shown -----------------------------------------------------------------------

    def set_agent(self, agent_id: str) -> None:
        """Show ``agent_id``'s conversation (the main window's "open conversation")."""
        if agent_id == self.agent_id and self.builder is not None:
            return
        info = self.world.agents.store.get(agent_id)
        if info is None:
            self.composer.show_error(f"There is no agent with id {agent_id!r}.")
            return
        self._names[agent_id] = info.name
        self.agent_id = agent_id
        self._generation += 1
        self.builder = ConversationBuilder(agent_id, self.world.agents.questions.get)
        self._pending = [p for p in self._pending
                         if isinstance(p[0], AgentStateChanged | FillNews)]
        self._timing.clear()
        self.transcript.clear()
        self.transcript.set_empty_text("Loading the conversation…")
        self.header.set_agents(self.world.agents.manager.list_agents(), agent_id)
        self.header.show_agent(info)
        self._update_placeholder()
        self.composer.clear_error()
        self._loading = True
        self.tasks.spawn(self._load_history(self._generation, info))
        self.agent_changed.emit(agent_id)

    @property
    def loading(self) -> bool:
        """The shown agent's history is still being read."""
        return self._loading

    @property
    def busy(self) -> bool:
        """Events wait to be drawn, history is being read, or durations are being looked up."""
        return (self._loading or bool(self._pending) or self._flush_timer.isActive()
                or self.durations.pending)

    def refresh_agents(self) -> None:
        """Re-read the agents: the picker, the status line; a deleted agent's chat closes."""
        agents = self.world.agents.manager.list_agents()
        self._names.update({a.agent_id: a.name for a in agents})
        current = next((a for a in agents if a.agent_id == self.agent_id), None)
        if self.agent_id is not None and current is None:
            fallback = next((a for a in agents if a.role is AgentRole.ORCHESTRATOR),
                            agents[0] if agents else None)
            self.agent_id, self.builder = None, None
            self.transcript.clear()
            if fallback is not None:
                self.set_agent(fallback.agent_id)
                return
            self.transcript.set_empty_text("There are no agents.")
        self.header.set_agents(agents, self.agent_id)
        self.header.show_agent(current)

    async def _open_orchestrator(self) -> None:
        info = await self.world.ensure_orchestrator()
        if self.agent_id is None:
            self.set_agent(info.agent_id)

    async def _load_history(self, generation: int, info: AgentInfo) -> None:
        try:
            await self._show_history(generation, info)
        finally:
            if generation == self._generation:
                self._loading = False
        if generation == self._generation:
            self._flush()  # what arrived while the history was read and drawn

    async def _show_history(self, generation: int, info: AgentInfo) -> None:
        """Read the newest page and draw it, newest cards first, a chunk per loop turn."""
        page = await self.reader.page(info.agent_id, None, HISTORY_MESSAGES)
        builder = self.builder
        if generation != self._generation or builder is None:
            return
        entries = builder.adopt(page.builder)
        since = _first_time(entries) if page.more else None
        fills = await self._fill_entries(builder, since, None)
        if generation != self._generation:
            return
        delta = Delta(added=by_time(entries, fills))
        for question in self.world.agents.questions.pending(info.agent_id):
            if builder.question(question.question_id) is None:
                delta.merge(builder.asked(question))
        self.transcript.set_empty_text(
            f"No messages with {info.name} yet. Ask it to watch a market, e.g.\n“{EXAMPLE}”,"
            "\nor type “help”." if info.role is AgentRole.ORCHESTRATOR
            else f"{info.name} has no conversation yet."
        )
        older = delta.added[:-DRAW_CHUNK]
        self._apply(Delta(added=delta.added[-DRAW_CHUNK:], updated=delta.updated))
        self.transcript.scroll_to_bottom()
        if await self._prepend(older, generation):
            self.transcript.set_more(page.more)

    async def _load_earlier(self) -> None:
        builder, generation = self.builder, self._generation
        origin = next((c.entry.origin for c in self.transcript.cards
                       if c.entry.origin is not None), None)
        if builder is None or self.agent_id is None or origin is None:
            return
        self.transcript.load_earlier.setEnabled(False)
        try:
            page = await self.reader.page(self.agent_id, origin, EARLIER_MESSAGES)
            if generation != self._generation:
                return
            entries = builder.adopt(page.builder)
            since = _first_time(entries) if page.more else None
            fills = await self._fill_entries(builder, since, origin.market_ms)
            if generation == self._generation and await self._prepend(
                    by_time(entries, fills), generation):
                self.transcript.set_more(page.more)
        finally:
            self.transcript.load_earlier.setEnabled(True)

    async def _prepend(self, entries: list[Entry], generation: int) -> bool:
        """Draw earlier cards above the others in chunks, letting the window breathe between
        them (a card costs about a millisecond to build and show); False if the agent changed."""
        while entries:
            await asyncio.sleep(0)
            if generation != self._generation:
                return False
            chunk, entries = entries[-DRAW_CHUNK:], entries[:-DRAW_CHUNK]
            self.transcript.prepend(chunk)
        return generation == self._generation

    # -- fills ---------------------------------------------------------------------------------

    def _on_fill(self, news: FillNews) -> None:
        """A fill was booked: its card joins whichever chat is shown, in arrival order."""
        self._pending.append((news, self.world.venue.clock.now_ms()))
        if not self._flush_timer.isActive():
            self._flush_timer.start()

    def price_decimals(self, symbol: str) -> int:
        decimals = self._decimals.get(symbol)
        if decimals is None:
            try:
                decimals = self.world.venue.broker.market_rules(symbol).price_decimals
            except (KestrelError, KeyError):
                decimals = 8  # a symbol the market no longer lists: every digit
            self._decimals[symbol] = decimals
        return decimals

    def fill_entry(self, news: FillNews) -> FillEntry:
        fill = news.fill
        ccy = self.world.venue.broker.quote_currency
        words = fill_words(news, self.names, self.price_decimals(fill.symbol),
                           money_decimals(ccy), ccy)
        return FillEntry(f"fill:{fill.fill_id}", fill.agent_id, "", fill.time_ms, None,
                         title=words.title, line=words.line, pnl=words.pnl,
                         pnl_value=words.pnl_value, side=fill.side.value)

    async def _fill_entries(self, builder: ConversationBuilder, since_ms: int | None,
                            until_ms: int | None) -> list[FillEntry]:
        """The cards of the fills in [since, until) the chat does not show yet, oldest first
        (the newest ``HISTORY_MESSAGES`` of them); a sell's order is looked up for its kind."""
        await self.book.load()
        found = [f for f in self.book.fills_between(since_ms, until_ms)
                 if f"fill:{f.fill_id}" not in builder.entries][-HISTORY_MESSAGES:]
        entries = []
        for fill in found:
            if fill.side.value == "SELL":
                await self.book.order_of(fill)
            entries.append(self.fill_entry(self.book.news(fill)))
        return entries

    # -- the person ----------------------------------------------------------------------------

    def send(self, text: str) -> None:
        """Send ``text`` to the agent shown: an answer to its open clarification, or a task."""
        if self.agent_id is None or self.builder is None:
            self.composer.show_error("No agent to talk to yet.")
            return
        try:
            outcome = self.world.agents.manager.send_user_message(self.agent_id, text)
        except (KestrelError, ValueError) as exc:  # ValueError: a refused state change
            self.composer.show_error(f"Not sent: {exc}")
            return
        self.composer.accept(text)
        if isinstance(outcome, Task):
            self._apply(self.builder.queued(outcome.task_id, text, self.world.venue.clock.now_ms()))
        else:  # it answered the open clarification
            self._answered(outcome.question_id, text)
        self.transcript.scroll_to_bottom()

    async def resume(self, agent_id: str) -> None:
        """The header's Resume: the agent runs again (the Agents panel's Resume, here where
        the person sees their message wait); a refusal is said above the input."""
        try:
            await self.world.agents.manager.control(agent_id, "resume")
        except (KestrelError, ValueError) as exc:  # ValueError: a refused state change
            self.composer.show_error(f"Could not resume: {exc}")
        self.refresh_agents()

    def _answer(self, question_id: str, text: str) -> bool:
        try:
            self.world.agents.manager.answer(question_id, text)
        except (KestrelError, ValueError) as exc:
            self.composer.show_error(f"Could not answer: {exc}")
            return False
        self.composer.clear_error()
        self.transcript.scroll_to_bottom()
        self._answered(question_id, text)
        return True

    def _answered(self, question_id: str, text: str) -> None:
        """The question is answered now: its entry knows (the card redraws from it) and the
        input no longer asks for an answer. Its ``QuestionAnswered`` then changes nothing."""
        if self.builder is not None:
            self.transcript.refresh_entries(self.builder.answered(question_id, text).updated)
        self._update_placeholder()

    def _update_placeholder(self) -> None:
        name = self._names.get(self.agent_id or "", "the agent")
        question = self.builder.pending_question() if self.builder is not None else None
        if question is not None and question.question_id and question.pending:
            self.composer.set_placeholder(
                f"Answer {name} (expected: {readable_hint(question.hint)}) or pick a reply "
                "above…")
        else:
            self.composer.set_placeholder(f"Message {name}…")

    # -- live events ---------------------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        """Queue an event (cheap, on every bus delivery); the timer applies the queue."""
        if isinstance(event, AgentStateChanged) or event.agent_id == self.agent_id:
            self._pending.append((event, self.world.venue.clock.now_ms()))
            if not self._flush_timer.isActive():
                self._flush_timer.start()

    def _flush(self) -> None:
        if self._loading or not self._pending:
            return
        events, self._pending = self._pending, []
        builder = self.builder
        stored = {(e.task_id, e.step) for e, _ in events
                  if isinstance(e, ConversationMessageAdded) and e.kind in _STREAM_ENDS}
        delta = Delta()
        agents_changed = False
        for event, now_ms in events:
            if isinstance(event, FillNews):
                if builder is not None:
                    delta.merge(builder.fill(self.fill_entry(event)))
                continue
            if isinstance(event, AgentStateChanged):
                agents_changed = True
                if event.agent_id == self.agent_id and event.state != AgentState.RUNNING.value:
                    self.transcript.end_streams()
                continue
            if builder is None or event.agent_id != builder.agent_id:
                continue
            if isinstance(event, ConversationMessageAdded):
                delta.merge(builder.feed(Message.added(event, now_ms)))
                if event.kind in _STREAM_ENDS:
                    self.transcript.end_stream((event.task_id, event.step))
                elif event.kind == "notice":
                    self.transcript.end_streams(event.task_id)
            elif isinstance(event, AnswerStreamed):
                if (event.task_id, event.step) not in stored:
                    self.transcript.stream((event.task_id, event.step),
                                           self._agent_name(event.agent_id), event.delta)
            elif isinstance(event, QuestionAsked):
                delta.merge(builder.asked(_question(event, now_ms), now_ms))
            elif isinstance(event, QuestionAnswered):
                delta.merge(builder.answered(event.question_id, event.answer))
        self._apply(delta)
        self._update_placeholder()  # a question answered elsewhere changes no card here
        if agents_changed:
            self.refresh_agents()

    def _apply(self, delta: Delta) -> None:
        """Draw a delta, keep the column bounded, and look up the new calls' durations."""
        builder = self.builder
        if builder is None or not delta:
            return
        added = delta.added
        if len(added) > MAX_CARDS:  # a burst: cards for the older ones would be trimmed at once
            skipped = {e.key for e in added[:-MAX_CARDS]} - {e.key for e in added[-MAX_CARDS:]}
            builder.forget(skipped)
            added = added[-MAX_CARDS:]
            self.transcript.set_more(True)
        self.transcript.setUpdatesEnabled(False)
        try:
            self.transcript.append(added)
            self.transcript.refresh_entries(delta.updated)
            limit = MAX_CARDS if self.transcript.at_bottom else HARD_MAX_CARDS
            builder.forget(self.transcript.trim(limit))
        finally:
            self.transcript.setUpdatesEnabled(True)
        self._time([*added, *delta.updated])
        self._update_placeholder()

    def _time(self, entries: Any) -> None:
        waiting = [e for e in entries if isinstance(e, ToolEntry) and e.result_xml
                   and e.duration_ms is None and e.market_ms is not None]
        if waiting:
            self._timing.extend(waiting)
            self.durations.request()

    async def _fill_durations(self) -> None:
        waiting, self._timing = self._timing, []
        agent_id = self.agent_id
        waiting = [e for e in waiting
                   if e.agent_id == agent_id and self.transcript.card(e.key) is not None]
        if agent_id is None or not waiting:
            return
        times = await self.reader.durations(
            agent_id, min(e.market_ms or 0 for e in waiting), max(e.market_ms or 0 for e in waiting)
        )
        if agent_id != self.agent_id:
            return
        found: list[Entry] = []
        for entry in waiting:
            duration = times.get(entry.result_xml)
            if duration is not None:
                entry.duration_ms = duration
                found.append(entry)
        self.transcript.refresh_entries(found)

    # -- helpers -------------------------------------------------------------------------------

    def _agent_name(self, agent_id: str) -> str:
        name = self._names.get(agent_id)
        if name is None:
            name = self.names.name(agent_id)
            self._names[agent_id] = name
        return name

    def _stored_name(self, agent_id: str) -> str | None:
        info = self.world.agents.store.get(agent_id)
        return info.name if info is not None else None

    def _task_failed(self, exc: BaseException) -> None:
        self.composer.show_error(f"The chat could not load: {exc}")


def _first_time(entries: list[Entry]) -> int | None:
    """When the earliest of ``entries`` was made (where its page of history begins)."""
    return next((e.market_ms for e in entries if e.market_ms is not None), None)


def _question(event: QuestionAsked, now_ms: int) -> Question:
    return Question(
        question_id=event.question_id, agent_id=event.agent_id, task_id=event.task_id,
        kind=QuestionKind(event.kind), text=event.text, suggested_replies=event.suggested_replies,
        format_hint=event.format_hint, asked_ms=now_ms,
    )
