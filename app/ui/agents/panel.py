"""The agent list panel: every agent with its state, work, cost and P&L, and the controls to run it.

The panel reads the runtime's stores and the ledger and acts only through the ``AgentManager`` and
the ``JobScheduler``, the same calls the Orchestrator's tools and the CLI make, so whatever a
person does here is checked by the same rules (the lifecycle table, the template's config schema).

It stays live without polling: agent, task, LLM-usage and clock events on the bus request a
refresh, and a ``Throttle`` turns a backtest's hundreds of events a second into a few refreshes.
A refresh reads the small agent, queue and usage rows on the loop and the ledger's fills off it.
Refusals (an invalid transition, a missing agent) are shown in plain words in the strip under the
table, never as a traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QItemSelectionModel, QModelIndex, QObject, QPoint, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QMessageBox,
    QSplitter,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.agents.templates import AgentTemplate
from app.domain.agents import AgentInfo, AgentRole, AgentState, InvalidTransitionError
from app.domain.errors import KestrelError
from app.events import (
    AgentActed,
    AgentStateChanged,
    ClockAdvanced,
    Event,
    LLMCallRecorded,
    OrderFilled,
    TaskFinished,
    TaskQueued,
)
from app.ui.agents.agent_table import (
    AgentTableModel,
    KeepColorDelegate,
    agent_columns,
    fit_columns,
)
from app.ui.agents.commands import AgentCommands, toolbar_button
from app.ui.agents.confirm import ask_to_confirm
from app.ui.agents.create_dialog import CreateAgentDialog
from app.ui.agents.feed import AgentFeed
from app.ui.agents.jobs import JobsPane
from app.ui.agents.lifecycle import DONE_WORDS, STATE_WORDS, Action, allows
from app.ui.agents.live_grant import LiveGrantCommand
from app.ui.panels.style import (
    format_quantity,
    format_time,
    money_decimals,
    mono_font,
    set_banner,
)
from app.ui.panels.tasks import BusLink, TaskSet, Throttle
from app.ui.theme import set_look

if TYPE_CHECKING:
    from app.runtime.world import World

REFRESH_MS = 250  # at most four refreshes a second, however busy the bus
_ROLE_ORDER = {AgentRole.ANALYST: 0, AgentRole.TRADER: 1, AgentRole.ORCHESTRATOR: 2}
_LIVE_EVENTS: tuple[type[Event], ...] = (
    AgentStateChanged, AgentActed, TaskQueued, TaskFinished, ClockAdvanced,
)


def plain_error(exc: BaseException) -> str:
    """The person-facing words of a refusal (a tool error's message, else the text)."""
    return str(getattr(exc, "message", None) or exc)


class AgentsPanel(QWidget):
    """The agent list, its lifecycle controls and the selected agent's scheduled jobs."""

    open_memory_requested = Signal(str)
    open_conversation_requested = Signal(str)

    def __init__(self, world: World, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.world = world
        self.currency = world.venue.broker.quote_currency
        self.feed = AgentFeed(world)
        self.create_dialog: CreateAgentDialog | None = None
        self.confirm_box: QMessageBox | None = None
        self._busy = False
        self._fitted: tuple[int, int] = (0, 0)
        self.tasks = TaskSet(on_error=self._unexpected)
        self.throttle = Throttle(self.refresh, self.tasks, interval_ms=REFRESH_MS, parent=self)
        self.commands = AgentCommands(self)
        self._connect_commands()
        self._build()
        self.link = BusLink(world.bus)
        for event_type in _LIVE_EVENTS:
            self.link.subscribe(event_type, self._on_event)
        self.link.subscribe(LLMCallRecorded, self._on_llm_call)
        self.link.subscribe(OrderFilled, self._on_fill)
        self.link.attach(self)
        self.tasks.attach(self)
        feed = self.feed
        self.destroyed.connect(lambda *_: feed.close())
        self._update_actions()
        self.throttle.request()  # the first fill of the table, on the loop

    # ------------------------------------------------------------------ layout

    def _connect_commands(self) -> None:
        commands = self.commands  # not "actions": QWidget.actions() must stay what Qt says
        commands.create.triggered.connect(self.open_create_dialog)
        for kind, made in commands.lifecycle.items():
            made.triggered.connect(lambda _c=False, k=kind: self.tasks.spawn(self.control(k)))
        commands.delete.triggered.connect(lambda: self.tasks.spawn(self.delete_selected()))
        commands.memory.triggered.connect(self._open_memory)
        commands.conversation.triggered.connect(self._open_conversation)

    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setContentsMargins(6, 6, 6, 6)
        root.setSpacing(6)
        self.toolbar = self.commands.toolbar()
        self.live_grant = self._live_grant()
        if self.live_grant is not None:
            self.toolbar.addSeparator()
            self.toolbar.addAction(self.live_grant.action)
        root.addWidget(self.toolbar)  # a row of its own: in a narrow dock it folds into »
        self.summary = QLabel()
        set_look(self.summary, "muted")
        root.addWidget(self.summary)

        self.model = AgentTableModel(
            agent_columns(money_decimals(self.currency), self.currency), mono_font())
        self.view = QTableView()
        self.view.setModel(self.model)
        self.view.setItemDelegate(KeepColorDelegate(self.view))
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.view.setAlternatingRowColors(True)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setWordWrap(False)
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setDefaultSectionSize(26)
        header = self.view.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setHighlightSections(False)
        header.setSortIndicator(-1, Qt.SortOrder.AscendingOrder)  # creation order until asked
        self.view.setSortingEnabled(True)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._context_menu)
        self.view.viewport().installEventFilter(self)
        self.view.doubleClicked.connect(self._double_clicked)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._selection_changed())
        self.menu = self.commands.menu(self)

        self.jobs = JobsPane(self.set_job_enabled)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.view)
        split.addWidget(self.jobs)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setChildrenCollapsible(False)
        root.addWidget(split, 1)

        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()
        root.addWidget(self.message)

    def button(self, action: Action | str) -> QToolButton:
        """The toolbar button of ``Action.PAUSE`` (any lifecycle action), or of ``create``,
        ``delete``, ``memory``, ``conversation`` (for the main window's shortcuts and tests)."""
        return toolbar_button(self.toolbar, self.commands.by_name(action))

    # ------------------------------------------------------------------ data

    def _on_event(self, _event: Event) -> None:
        self.throttle.request()

    def _on_llm_call(self, event: LLMCallRecorded) -> None:
        self.feed.on_llm_call(event)
        self.throttle.request()

    def _on_fill(self, event: OrderFilled) -> None:
        self.feed.on_fill(event)
        self.throttle.request()

    def _fit(self) -> None:
        """An agent came or went, or the dock changed width: size to content and to the dock."""
        fitted = (self.model.rowCount(), self.view.viewport().width())
        if self._fitted != fitted:
            fit_columns(self.view, self.model)
            self._fitted = fitted

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        """The table refits when its dock's width changes (the window's first layout, a dragged
        splitter), not at the next refresh: at 1280x720 the P&L column stayed past the edge."""
        if watched is self.view.viewport() and event.type() == QEvent.Type.Resize:
            self._fit()
        return super().eventFilter(watched, event)

    async def refresh(self) -> None:
        """Re-read every agent, its task, usage and P&L, and the selected agent's jobs."""
        self.model.merge(await self.feed.rows())
        self._fit()
        self._selection_changed()
        self._summarize()

    def _summarize(self) -> None:
        states = [row.info.state for row in self.model.rows]
        parts = [f"{len(states)} agent{'' if len(states) == 1 else 's'}"]
        running = states.count(AgentState.RUNNING)
        if not self.world.agents.manager.started:
            parts.append("not started yet")  # a live account's start-up waits for the person
        elif running:
            parts.append(f"{running} running")
        attention = states.count(AgentState.WAITING_FOR_USER) + states.count(AgentState.FAULTED)
        if attention:
            parts.append(f"{attention} need{'s' if attention == 1 else ''} you")
        self.summary.setText(" · ".join(parts))

    # ------------------------------------------------------------------ selection

    def selected_infos(self) -> list[AgentInfo]:
        """The selected agents, top to bottom as shown."""
        rows = sorted(index.row() for index in self.view.selectionModel().selectedRows())
        return [self.model.rows[row].info for row in rows if row < len(self.model.rows)]

    def current_info(self) -> AgentInfo | None:
        """The agent whose jobs are shown: the focused row if selected, else the first one."""
        selected = self.selected_infos()
        current = self.view.currentIndex()
        if current.isValid() and current.row() < len(self.model.rows):
            info = self.model.rows[current.row()].info
            if any(s.agent_id == info.agent_id for s in selected):
                return info
        return selected[0] if selected else None

    def select_agent(self, agent_id: str) -> bool:
        """Select (only) ``agent_id``'s row; False when it is not in the table."""
        row = self.model.row_of(agent_id)
        if row is None:
            return False
        index = self.model.index(row, 0)
        flags = (QItemSelectionModel.SelectionFlag.ClearAndSelect
                 | QItemSelectionModel.SelectionFlag.Rows)
        self.view.selectionModel().setCurrentIndex(index, flags)
        self.view.scrollTo(index)
        return True

    def _selection_changed(self) -> None:
        self._update_actions()
        info = self.current_info()
        jobs = [] if info is None else self.world.agents.scheduler.jobs(info.agent_id)
        self.jobs.show_jobs(None if info is None else info.name, jobs)

    def _update_actions(self) -> None:
        self.commands.update(self.selected_infos(), self._busy)
        if self.live_grant is not None:
            self.live_grant.update()

    def _live_grant(self) -> LiveGrantCommand | None:
        """The "May trade live" command, on a LIVE account only."""
        live = self.world.venue.live
        if live is None:
            return None
        return LiveGrantCommand(self, live.grants, self.world.venue.clock, self._single_selected,
                                self.show_message)

    def _single_selected(self) -> AgentInfo | None:
        infos = self.selected_infos()
        return infos[0] if len(infos) == 1 else None

    def _context_menu(self, pos: QPoint) -> None:
        index = self.view.indexAt(pos)
        if index.isValid() and not self.view.selectionModel().isRowSelected(index.row()):
            self.select_agent(self.model.rows[index.row()].agent_id)
        self.menu.popup(self.view.viewport().mapToGlobal(pos))

    def _double_clicked(self, index: QModelIndex) -> None:
        if index.isValid():
            self.open_conversation_requested.emit(self.model.rows[index.row()].agent_id)

    def _open_memory(self) -> None:
        info = self.current_info()
        if info is not None:
            self.open_memory_requested.emit(info.agent_id)

    def _open_conversation(self) -> None:
        info = self.current_info()
        if info is not None:
            self.open_conversation_requested.emit(info.agent_id)

    # ------------------------------------------------------------------ lifecycle

    async def control(self, action: Action) -> None:
        """Apply ``action`` to every selected agent whose state allows it."""
        targets = [info for info in self.selected_infos() if allows(action, info.state)]
        if not targets:
            return
        done: list[str] = []
        refused: list[str] = []
        self._busy = True
        self._update_actions()
        try:
            for info in targets:
                try:
                    after = await self.world.agents.manager.control(info.agent_id, action.value)
                except (KestrelError, InvalidTransitionError) as exc:
                    refused.append(f"Could not {action.value} {info.name}: {plain_error(exc)}")
                else:
                    waiting = after.state is AgentState.WAITING_FOR_USER
                    done.append(info.name + (" (it is waiting for your answer)" if waiting else ""))
        finally:
            self._busy = False
        report = [f"{DONE_WORDS[action]} {', '.join(done)}."] if done else []
        self.show_message(" ".join(report + refused), "error" if refused else "info")
        await self.refresh()

    async def delete_selected(self) -> None:
        """Delete the selected agents after the person confirms, naming each one."""
        infos = self.selected_infos()
        if not infos:
            return
        names = ", ".join(f"“{info.name}”" for info in infos)
        held = self._open_positions(infos)
        one = len(infos) == 1
        text = (
            f"Delete {'the agent' if one else 'the agents'} {names}?\n\n"
            + ("It stops now, its queued tasks are cancelled and its scheduled jobs disabled. "
               "Its conversations, orders and memory stay on record." if one else
               "They stop now, their queued tasks are cancelled and their scheduled jobs "
               "disabled. Their conversations, orders and memory stay on record.")
        )
        if held:
            text += f"\n\nOpen positions are not closed: {held}."
        if not await ask_to_confirm(self, "Delete agent", text, "Delete", self._confirming):
            self.show_message(f"Kept {names}.", "info")
            return
        refused: list[str] = []
        for info in infos:
            try:
                await self.world.agents.manager.delete_agent(info.agent_id)
            except KestrelError as exc:
                refused.append(f"Could not delete {info.name}: {plain_error(exc)}")
        if refused:
            self.show_message(" ".join(refused), "error")
        else:
            self.show_message(f"Deleted {names}.", "info")
        await self.refresh()

    def _open_positions(self, infos: list[AgentInfo]) -> str:
        wanted = {info.agent_id for info in infos}
        held = [f"{format_quantity(o.quantity)} {o.symbol}"
                for row in self.model.rows if row.agent_id in wanted and row.pnl is not None
                for o in row.pnl.open]
        return ", ".join(held)

    def _confirming(self, box: QMessageBox | None) -> None:
        self.confirm_box = box

    # ------------------------------------------------------------------ create

    def open_create_dialog(self) -> CreateAgentDialog:
        """Open (or bring forward) the "create agent" dialog; it stays open on a refusal."""
        if self.create_dialog is not None:
            self.create_dialog.raise_()
            self.create_dialog.activateWindow()
            return self.create_dialog
        agents = self.world.agents.manager.list_agents()
        dialog = CreateAgentDialog(
            self._creatable(agents), agents, self._create_agent,
            self.world.agents.manager.engine_for,
            symbols=self.world.venue.market.symbols(), parent=self,
        )
        dialog.created.connect(self._agent_created)
        dialog.finished.connect(lambda *_: self._dialog_closed(dialog))
        self.create_dialog = dialog
        dialog.open()
        return dialog

    def _creatable(self, agents: list[AgentInfo]) -> dict[str, AgentTemplate]:
        """Analyst and trader templates first; an orchestrator only when there is none, since
        the chat talks to the one Orchestrator."""
        has_orchestrator = any(a.role is AgentRole.ORCHESTRATOR for a in agents)
        templates = [t for t in self.world.agents.manager.templates.values()
                     if not (has_orchestrator and t.role is AgentRole.ORCHESTRATOR)]
        templates.sort(key=lambda t: (_ROLE_ORDER.get(t.role, 9), t.display_name))
        return {t.template_id: t for t in templates}

    async def _create_agent(
        self, template_id: str, name: str, config: dict[str, Any], start: bool
    ) -> AgentInfo:
        return await self.world.agents.manager.create_agent(template_id, name, config, start=start)

    def _agent_created(self, info: AgentInfo) -> None:
        self.show_message(f"Created {info.name} ({STATE_WORDS[info.state]}).", "info")
        self.tasks.spawn(self._show_created(info.agent_id))

    async def _show_created(self, agent_id: str) -> None:
        await self.refresh()
        self.select_agent(agent_id)

    def _dialog_closed(self, dialog: CreateAgentDialog) -> None:
        if self.create_dialog is dialog:
            self.create_dialog = None
        dialog.deleteLater()

    # ------------------------------------------------------------------ jobs

    def set_job_enabled(self, job_id: str, enabled: bool) -> None:
        """Turn a scheduled job on or off (its Enabled box) and show when it runs next."""
        try:
            job = self.world.agents.scheduler.set_enabled(job_id, enabled)
        except KestrelError as exc:
            self.show_message(f"Could not change the job: {plain_error(exc)}", "error")
        else:
            if job.enabled:
                when = format_time(job.next_run_ms, seconds=False)
                self.show_message(f"Enabled job {job.name}: next run {when} UTC.", "info")
            else:
                self.show_message(
                    f"Disabled job {job.name}: it will not run until you enable it.", "info")
        self._selection_changed()

    # ------------------------------------------------------------------ messages

    def show_message(self, text: str, kind: str = "info") -> None:
        set_banner(self.message, kind)
        self.message.setText(text)
        self.message.show()

    def _unexpected(self, exc: BaseException) -> None:
        self.show_message(
            f"Something went wrong: {type(exc).__name__}: {exc}. The details are in the log.",
            "error",
        )

