"""The main window: one desk with the chart in the middle and every other panel docked around it.

It opens in two steps so a person sees a window at once: the shell (menus, a "loading" line) is
built and shown immediately; the workspace (market data, the paper account, the agents) is opened
in a worker thread and the panels are built when it is ready. A workspace that never ran gets the
offline demo (``app.runtime.desk``); the replay then runs paced on the one event loop.

The arrangement of the docks and the window's geometry are saved in QSettings on close and
restored on the next start; "Reset layout" brings back the default arrangement
(``app.ui.window_layout``).

The kill switch has its own red toolbar button, Ctrl+Shift+K, the Trading menu and the tray's
menu (each asks first), and while tripped a banner over the chart, a status bar badge and a strip
over the account (``app.ui.kill_switch``).
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QLabel,
    QMainWindow,
    QMessageBox,
    QStackedWidget,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.domain.agents import AgentRole, AgentState
from app.domain.clock import ms_to_iso
from app.domain.errors import KestrelError, OperationalError, TemporaryError
from app.events import AgentStateChanged, EventBus, LLMCallRecorded
from app.secrets import SecretStore
from app.ui import window_layout
from app.ui.errors import ErrorReporter
from app.ui.names import AgentNames
from app.ui.names import install as install_names
from app.ui.panels.widget_tasks import BusLink, TaskSet, stop_panel
from app.ui.settings.prefs import UiPrefs
from app.ui.settings_io import save_replay_speed
from app.ui.status import StatusBar
from app.ui.theme import Restylable, apply_theme, set_look
from app.ui.wheel import install_wheel_guard
from app.workspace import Workspace, setup_logging

if TYPE_CHECKING:  # the heavy parts load after the window is shown
    from app.runtime.desk import Desk
    from app.runtime.venue import Venue, VenueSpec
    from app.runtime.world import World
    from app.ui.kill_switch import KillSwitchControls
    from app.ui.trades import DeskTrades

logger = logging.getLogger(__name__)

DEMO_SETUP_TIMEOUT_S = 30
DEMO_SPEED = 600.0
HOUR_MS = 3_600_000
PAUSED_KEY = "replay/paused_workspaces"  # QSettings: workspaces whose replay was left paused
MAX_PAUSED_KEPT = 50


class MainWindow(QMainWindow):
    """The Kestrel desk.

    Signals:
        closed: the window really closed (not hidden to the tray): the app may shut down.

    Args:
        prefs: this desktop's preferences (theme, close to tray); its QSettings also keeps the
            window layout.
        secrets: the OS keyring (API keys), handed to the Settings dialog.
        interactive_errors: show unexpected errors in a dialog (off in tests, which assert on
            ``errors.reports`` instead).
    """

    closed = Signal()

    def __init__(
        self, prefs: UiPrefs, secrets: SecretStore, *, interactive_errors: bool = True
    ) -> None:
        super().__init__()
        self.setObjectName("main_window")
        self.setWindowTitle("Kestrel")
        self.prefs = prefs
        self.store: QSettings = prefs.store
        self.secrets = secrets
        self.errors = ErrorReporter(self, interactive=interactive_errors)
        self.tasks = TaskSet(on_error=self._task_failed)
        self.tasks.attach(self)
        self.desk: Desk | None = None
        self.world: World | None = None
        self.telegram: Any = None  # the Telegram bot when settings turn it on (app.telegram)
        self.docks: dict[str, QDockWidget] = {}
        self.panel_shortcuts: dict[str, QAction] = {}
        self.panels: dict[str, Any] = {}
        self.live: Any = None
        self.tray: Any = None
        self.replay_bar: Any = None
        self.kill_controls: Any = None  # app.ui.kill_switch.KillSwitchControls, once open
        self.person: Any = None  # app.runtime.controls.PersonControls, once open
        self.trading: Any = None  # app.ui.trading.desk_controls.DeskTradingControls, once open
        self.chart_trading: Any = None  # app.ui.trading.chart_trading.ChartTrading, once open
        self.unknown_dialog: Any = None  # the question about unknown exchange orders, if asked
        self.names: AgentNames | None = None  # who an actor id is, once a workspace is open
        self.book: DeskTrades | None = None  # the account's lots with an owner, once open
        self.notices: Any = None  # app.ui.notices.NoticeLog, keeping the notifications list
        self._pacer: asyncio.Task[None] | None = None
        self.banner: Any = None  # app.ui.replay_bar.Banner, once open
        self.tabs: QTabWidget | None = None  # Chart and Backtest, once open
        self.alert_banner: Any = None  # app.ui.alerts.AlertBanner, once open
        self._banner_link: BusLink | None = None
        self._banner_start_ms = 0
        self._answered: set[tuple[str, str]] = set()  # (agent id, model) answers seen
        self._speed_lock = asyncio.Lock()
        self._closing = False
        self._asking_quit = False
        self.quit_dialog: QMessageBox | None = None
        self.loading = QLabel("Opening the workspace…")
        self.loading.setObjectName("loading")
        self.loading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.loading.setStyleSheet("font-size: 14pt;")
        set_look(self.loading, "muted")
        self.loading.setWordWrap(True)  # a long error is wrapped, never cut at both edges
        self.loading.setMargin(24)
        # until the desk is built: the loading line, or why the workspace could not open
        self.opening = QStackedWidget()
        self.opening.addWidget(self.loading)
        self.setCentralWidget(self.opening)
        self.opening_live = False  # the venue being opened is a live market (needs a network)
        self.open_failed: Any = None  # app.ui.open_failed.OpenFailedPage, once an open failed
        self._build_menus()
        window_layout.restore_geometry(self, self.store)
        app = QApplication.instance()
        if isinstance(app, QApplication):  # a scrolled form never changes a value in passing
            install_wheel_guard(app)

    # -- opening a workspace -------------------------------------------------------------------

    async def open_workspace(
        self,
        workspace: Workspace,
        *,
        data_files: Sequence[Path] = (),
        speed: float | None = None,
        paced: bool = True,
        venue: VenueSpec | None = None,
        venue_kind: str | None = None,
        exchange: str | None = None,
        start_ms: int | None = None,
    ) -> Desk:
        """Open ``workspace`` (seeding the demo in a fresh one) and start the replay, or on a
        live venue (``venue``; else ``venue_kind`` and ``exchange`` over the workspace's
        ``[venue]`` setting) let time flow; a live account only once the person confirmed it.
        ``start_ms``: the replay's start date, the person's choice (``kestrel gui --at``).

        Raises:
            KestrelError: the workspace or its data cannot be used, or a live market cannot be
                reached (shown in the window too).
        """
        from app.agents.loop_share import LoopShare
        from app.runtime.desk import live_spec, open_desk, open_live_desk, seed_demo
        from app.ui.panels.widget_tasks import REDRAWS

        bus = EventBus()
        # the agents run on this window's loop: they time-slice their steps, and step aside
        # while a chart, book or account repaint is due
        share = LoopShare(quiet_until=lambda: REDRAWS.quiet_until)
        self.opening_live = False
        if self.open_failed is not None:
            self.open_failed.set_busy(True)
        self.opening.setCurrentWidget(self.loading)
        try:
            if venue is not None:
                live = venue if venue.live else None
            else:
                live = live_spec(workspace, venue_kind, exchange)
            self.opening_live = live is not None
            if live is not None and live.kind == "live":
                desk = await self._open_live(workspace, live, bus, share)
            elif live is not None:
                self.loading.setText(f"Opening {workspace.root} …\nConnecting to "
                                     f"{live.exchange} for live quotes.")
                desk = await open_live_desk(workspace, live, bus=bus, loop_share=share)
            else:
                self.loading.setText(f"Opening {workspace.root} …\n"
                                     "Loading market data and agents.")
                desk = await asyncio.to_thread(
                    open_desk, workspace, bus=bus, data_files=data_files, loop_share=share,
                    start_ms=start_ms,
                )
        except KestrelError as exc:
            self.loading.setText(f"Cannot open {workspace.root}:\n{exc}")
            raise
        self.desk, self.world = desk, desk.world
        setup_logging(workspace, desk.world.settings.logging)  # logs/kestrel.log, rotated
        if not desk.world.venue.offline:
            speed = None  # a live market runs in real time
        if speed is None and desk.fresh:
            speed = DEMO_SPEED  # a new user sees a trade's whole cycle within the first minute
        if speed is not None:
            desk.world.venue.driver.set_speed(speed)
        self._install(desk)
        if speed is not None:
            self.keep_speed(speed)  # a relaunch resumes at the speed this run was given
        if self.replay_bar is not None and self._paused_when_closed(workspace):
            self.replay_bar.set_paused(True)  # it was paused: it stays so until Play
        self._refresh_title()
        await desk.world.start(self._decide_unknown_orders)
        from app.telegram.start import start_telegram

        assert desk.world.agents is not None
        self.telegram = await start_telegram(desk.world, secrets=self.secrets,
                                             kill_switch=desk.world.agents.kill_switch)
        if desk.fresh:
            # the demo's first request is handled before time starts to flow, so its first
            # trade is placed at the moment the replay was chosen for (see app.runtime.desk)
            await seed_demo(desk.world)
            try:
                await asyncio.wait_for(desk.world.agents.manager.wait_idle(),
                                       DEMO_SETUP_TIMEOUT_S)
            except TimeoutError:
                logger.warning("the demo's agents are still busy; starting the replay anyway")
        for key in ("account", "memory", "audit"):
            self.tasks.spawn(self.panels[key].refresh())
        self.tasks.spawn(self.panels["chart"].load())  # shown before the clock first moves
        if paced:
            self.start_replay()
        self._refresh_title()
        return desk

    def show_open_failure(
        self, workspace: Workspace, exc: Exception, *,
        retry: Callable[[], Coroutine[Any, Any, Any]],
        replay: Callable[[], Coroutine[Any, Any, Any]] | None,
    ) -> None:
        """A live market could not be reached: say why in the middle of the window and offer
        Retry and the offline replay, instead of a dead shell behind a message box."""
        from app.ui.open_failed import OpenFailedPage

        why = str(exc)
        page = OpenFailedPage(f"Kestrel could not open {workspace.root.name}",
                              why[:1].upper() + why[1:], offer_replay=replay is not None)
        page.retry_requested.connect(lambda: self.tasks.spawn(retry()))
        if replay is not None:
            page.replay_requested.connect(lambda: self.tasks.spawn(replay()))
        if self.open_failed is not None:
            self.opening.removeWidget(self.open_failed)
            self.open_failed.deleteLater()
        self.open_failed = page
        self.opening.addWidget(page)
        self.opening.setCurrentWidget(page)
        self.setWindowTitle(f"Kestrel — {workspace.root.name} — not open")

    async def _open_live(
        self, workspace: Workspace, venue: VenueSpec, bus: EventBus, share: Any
    ) -> Desk:
        """A live market's world; a live account's only after the person's confirmation."""
        from app.runtime.desk import Desk
        from app.runtime.open_world import open_world
        from app.runtime.world import WorldOptions
        from app.ui.live_dialogs import LiveConfirmDialog

        if venue.kind == "live" and venue.confirmed.lower() != venue.exchange.lower():
            self.loading.setText(f"Waiting for your confirmation to trade LIVE on "
                                 f"{venue.exchange}…")
            confirmed = await LiveConfirmDialog(venue.exchange, self).ask()
            if not confirmed:
                raise OperationalError(f"Live trading on {venue.exchange} was not confirmed; "
                                       "nothing was opened and no order was sent.")
            venue = replace(venue, confirmed=confirmed)
        if not venue.symbols:  # not every market of the exchange: the workspace's own
            venue = replace(venue, symbols=tuple(workspace.settings().venue.symbols))
        self.loading.setText(f"Connecting to your {venue.exchange} account …")
        world = await open_world(workspace, venue, WorldOptions(loop_share=share,
                                                                secrets=self.secrets),
                                 bus=bus, off_loop=True)
        return Desk(world, fresh=False)

    async def _decide_unknown_orders(self, orders: Sequence[Any]) -> Any:
        """Reconciliation found exchange orders the journal does not know: ask the person."""
        from app.ui.live_dialogs import UnknownOrdersDialog, held_words

        assert self.world is not None
        live = self.world.venue.live
        exchange = live.exchange if live is not None else self.world.venue.label
        chat = self.panels["chat"].header
        chat.hold(held_words(exchange, len(orders), decided_later=False))
        self.unknown_dialog = UnknownOrdersDialog(exchange, orders, self)
        choice = await self.unknown_dialog.ask()
        chat.hold(None if choice is not None else held_words(exchange, len(orders)))
        return choice

    def _install(self, desk: Desk) -> None:
        """Build every panel over the world's ports and dock it."""
        world = desk.world
        assert world.agents is not None, "the desk's world runs agents"
        self._build_panels(world)
        kill = self._build_centre(world)
        self._dock_panels()
        if world.venue.offline:  # a live market's time cannot be paused, stepped or sped up
            self._add_replay_bar(world.venue)
        self._add_trading(world, kill)
        self._connect(world, kill)

    def _build_panels(self, world: World) -> None:
        """The panels over the world's ports, and what they share: the names of the agents
        and the one book of lots with an owner."""
        from app.runtime.controls import PersonControls
        from app.runtime.desk import DEMO_SYMBOL
        from app.store.audit_trail import AuditTrailReader
        from app.ui.agents import AgentsPanel
        from app.ui.backtest import BacktestView
        from app.ui.charts.book_widget import BookWidget
        from app.ui.charts.chart_state import ChartMemory
        from app.ui.charts.chart_widget import ChartWidget
        from app.ui.chat import ChatPanel
        from app.ui.notices import NoticeLog
        from app.ui.panels.account_panel import AccountPanel
        from app.ui.panels.audit_panel import AuditPanel
        from app.ui.panels.memory_browser import MemoryBrowser
        from app.ui.panels.notifications import NotificationsPanel
        from app.ui.panels.style import money_decimals
        from app.ui.trades import DeskTrades

        venue, team = world.venue, world.agents
        assert team is not None
        # who an id is, for every panel (the chart's markers find it as names.current()), and
        # the one book of lots with an owner every trade view reads
        self.names = AgentNames(self._agent_name)
        install_names(self.names)
        world.bus.subscribe(AgentStateChanged, self._agent_changed)
        self.book = DeskTrades(venue.broker, world.bus)
        market = venue.market
        symbol = DEMO_SYMBOL if DEMO_SYMBOL in market.symbols() else market.symbols()[0]
        # three re-reads a second: while the view follows the newest bar each one repaints every
        # pane (10-20 ms), and at top replay speed more of them made the window stutter
        # the chart's set-up (indicators, drawings, log scale) is kept per workspace
        kept = ChartMemory(self.store, world.workspace.identity() or str(world.workspace.root))
        chart = ChartWidget(market, symbol=symbol, redraw_hz=3.0, memory=kept,
                            owner_name=self.names)
        book = BookWidget(market, symbol=chart.symbol, redraw_hz=10.0)
        # the person's orders, cancels and closes: tool calls as "person", through the guard
        self.person = PersonControls(world.executor, world.orders, world.bus,
                                     next_bar_open=_next_bar_open(venue))
        account = AccountPanel(venue.broker, venue.clock, venue.broker.mode, world.bus,
                               venue.label, controls=self.person, names=self.names,
                               book=self.book)
        memory = MemoryBrowser(world.memory, world.bus, self._agent_names, names=self.names)
        audit = AuditPanel(AuditTrailReader(world.ledger), world.bus, names=self.names)
        chat = ChatPanel(team, venue, world.bus, world.ledger, world.ensure_orchestrator,
                         names=self.names, book=self.book)
        agents = AgentsPanel(team, venue, world.bus)
        backtest = BacktestView(world.workspace)
        notifications = NotificationsPanel(team.notifications, world.bus, self.names)
        ccy = venue.broker.quote_currency
        # what the tray and Telegram tell the person, kept in the list as it happens
        self.notices = NoticeLog(team.notifications, world.bus, self.book, self.names,
                                 account.price_decimals, money_decimals(ccy), ccy,
                                 venue.clock.now_ms,
                                 on_recorded=notifications.changed)
        self.panels = {"chart": chart, "book": book, "account": account, "memory": memory,
                       "audit": audit, "chat": chat, "agents": agents, "backtest": backtest,
                       "notifications": notifications}
        chart.symbol_changed.connect(book.set_symbol)


    def _build_centre(self, world: World) -> KillSwitchControls:
        """The middle of the window: the kill switch's, the alerts' and the venue's banners
        over the Chart and Backtest tabs."""
        from app.ui.alerts import AlertBanner
        from app.ui.kill_switch import KillSwitchControls
        from app.ui.replay_bar import Banner

        venue, team = world.venue, world.agents
        assert team is not None
        chart, backtest = self.panels["chart"], self.panels["backtest"]
        # what the agents run on, and a language model's training-cutoff warning for the
        # replayed period, from the moment the replay starts here; kept current as agents are
        # created and as models answer (under the name the server gives)
        self._banner_start_ms = venue.clock.now_ms()
        self.banner = Banner(self._banner_text())
        self._banner_link = BusLink(world.bus)
        self._banner_link.subscribe(AgentStateChanged, self._agents_changed)
        self._banner_link.subscribe(LLMCallRecorded, self._model_answered)
        self.tabs = QTabWidget()
        self.tabs.setObjectName("central_tabs")
        self.tabs.addTab(chart, "Chart")
        self.tabs.addTab(backtest, "Backtest")
        # the banner says what the desk's agents run on and where its data comes from: the
        # Backtest view says that of its own run, and needs the room on a small screen
        self.tabs.currentChanged.connect(lambda _index: self._place_banner())
        kill = KillSwitchControls(
            self, team.kill_switch, world.bus, self.tasks,
            reconciler=venue.live.reconciliation if venue.live is not None else None)
        self.kill_controls = kill
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.alert_banner = AlertBanner(world.bus, central)
        # an urgent alert takes the place of the banner that says what runs, until dismissed:
        # on a small screen the chart keeps its room
        self.alert_banner.raised.connect(lambda _up: self._place_banner())
        layout.addWidget(kill.banner)
        layout.addWidget(self.alert_banner)
        layout.addWidget(self.banner)
        layout.addWidget(self.tabs, 1)
        self.setCentralWidget(central)

        return kill

    def _dock_panels(self) -> None:
        """Dock the panels, restore the person's layout, and list each panel's key under F1."""
        self.docks, self.panel_shortcuts = window_layout.build_docks(
            self, self.panels, self.view_menu, self.open_panel)
        window_layout.default_arrangement(self, self.docks)
        self.view_menu.addSeparator()
        self.view_menu.addAction(self.reset_layout_action)
        window_layout.restore_layout(self, self.store)

        for spec in window_layout.DOCKS:
            self._described(self.panel_shortcuts[spec.key], spec.title)

    def _add_replay_bar(self, venue: Venue) -> None:
        """The replay's speed, pause, step and jump; the window holds their actions."""
        from app.ui.replay_bar import ReplayBar

        self.replay_bar = ReplayBar(venue.driver, venue.clock, HOUR_MS, self,
                                    end_ms=venue.end_ms)
        self.replay_bar.speed_chosen.connect(self.keep_speed)
        self.replay_bar.pause_chosen.connect(self._keep_paused)
        self.replay_bar.jumped.connect(lambda text: self.statusBar().showMessage(text, 15_000))
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.replay_bar)
        # the window holds them: their keys work while the toolbar is hidden too
        self.addActions([self.replay_bar.pause_action, self.replay_bar.step_action,
                         self.replay_bar.step_key_action])
        self._described(self.replay_bar.pause_action, "Pause or resume the replay")
        self._described(self.replay_bar.step_key_action, "Step the replay one bar (pauses it)")
        if self.replay_bar.jump_action.isVisible():
            self.addAction(self.replay_bar.jump_action)
            self._described(self.replay_bar.jump_action, "Jump the replay to a date")

    def _add_trading(self, world: World, kill: KillSwitchControls) -> None:
        """The kill switch's and the person's trading tool bars, trading from the chart, and
        the Trading menu."""
        from app.ui.trading.chart_trading import ChartTrading
        from app.ui.trading.desk_controls import DeskTradingControls

        venue = world.venue
        market = venue.market
        chart, book, account = self.panels["chart"], self.panels["book"], self.panels["account"]
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, kill.toolbar)
        self.trading = DeskTradingControls(
            self, self.person, venue.broker, market.symbols(), venue.broker.mode, self.tasks,
            account.show_message, self.names, market=market,
        )
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.trading.toolbar)
        self.trading_menu.removeAction(self.trading_waits)
        # dragging an order's line, "limit here" and the book's prices: the person's calls
        self.chart_trading = ChartTrading(chart, book, self.person, self.trading, self.tasks,
                                          account.show_message)
        self.trading_menu.addActions([self.trading.ticket_action, self.trading.flatten_action])
        self.trading_menu.addSeparator()
        self.trading_menu.addActions([kill.trip_action, kill.reset_action])
        self._described(kill.trip_action, "Trip the kill switch (asks first; reset from the "
                                          "banner)")
        self._described(self.trading.ticket_action,
                        "New order (your own, reviewed against the Risk Guard)")
        self._described(self.trading.flatten_action,
                        "Flatten all: cancel every order, close every position (asks first)")

    def _connect(self, world: World, kill: KillSwitchControls) -> None:
        """The status bar, the tray, the live market feed, and the signals between panels."""
        from app.ui.market_feed import LiveMarket
        from app.ui.tray import TrayController

        venue, team = world.venue, world.agents
        assert team is not None
        chart, book, account = self.panels["chart"], self.panels["book"], self.panels["account"]
        agents = self.panels["agents"]
        self.setStatusBar(StatusBar(team, venue.clock, venue.driver, venue.broker.mode,
                                    venue.label, self))
        self.tray = TrayController(
            self, world.bus, pause_all=self.pause_all, quit_app=self.quit,
            agent_name=self.names, close_to_tray=self.prefs.close_to_tray,
            trip_kill_switch=lambda: kill.request_trip("tray"),
            halted=team.kill_switch.is_tripped(),
            live=venue.label if venue.is_live_account else "",
        )
        self.tray.open_panel.connect(self.open_panel)
        self.tray.notice_raised.connect(self._show_notice)
        self.live = LiveMarket(world.bus, venue.broker, chart, book, account,
                               live_account=venue.is_live_account)
        kill.changed.connect(self._kill_switch_changed)  # now that every view it touches is placed
        kill.refresh()  # a trip of an earlier run shows at once
        agents.open_memory_requested.connect(self.open_memory)
        agents.open_conversation_requested.connect(self.open_conversation)
        for action in self._runtime_actions:
            action.setEnabled(True)
        world.disk.listen(asyncio.get_running_loop(), self._on_disk_full)

    def _on_disk_full(self, _reason: str) -> None:
        """The disk holding the workspace filled up: stop what writes (the replay's clock and
        the agents), and say so where the person looks, with what could not be recorded."""
        self.tasks.spawn(self._stop_for_full_disk())

    async def _stop_for_full_disk(self) -> None:
        world = self.world
        if world is None or world.agents is None:
            return
        if self._pacer is not None:
            self._pacer.cancel()
            await asyncio.gather(self._pacer, return_exceptions=True)
        # the workers are stopped without writing their state: a paused agent is a write the
        # full disk would refuse; each resumes its task at the next start
        await world.agents.manager.aclose()
        said = (f"The disk holding {world.disk.workspace or 'the workspace'} is full "
                f"({world.disk.reason}). Kestrel stopped the replay and every agent: nothing more "
                "is written until you free space on that disk and open the workspace again "
                "(each agent's task runs again then). " + world.disk.not_recorded())
        logger.error("%s", said)
        self.alert_banner.add("Kestrel: the disk is full", said)
        self.statusBar().showMessage("The disk is full: the agents are stopped (see the red "
                                     "strip).", 0)

    def _banner_text(self) -> str:
        """The banner: the venue, what the agents run on, and the training-cutoff warnings of
        the language models among them over this replay (``app.runtime.engines``)."""
        from app.runtime.engines import agent_engines, replay_warnings
        from app.ui.replay_bar import banner_text

        world = self.world
        assert world is not None
        engines = agent_engines(world)
        return banner_text(
            offline=world.venue.offline,
            engines=engines.words(lambda w: f"<b>{escape(w, quote=False)}</b>"),
            label=world.venue.label, warnings=replay_warnings(world, self._banner_start_ms),
            uses_llm=bool(engines.models),
        )

    def _place_banner(self) -> None:
        """Show the banner over the Chart tab, unless an urgent alert has taken its place."""
        if self.banner is None or self.tabs is None:
            return
        alert = self.alert_banner is not None and bool(self.alert_banner.alerts)
        self.banner.setVisible(self.tabs.currentWidget() is self.panels.get("chart")
                               and not alert)

    def _refresh_banner(self) -> None:
        """Say anew what the agents run on; an unchanged text is left alone (no relayout)."""
        if self.world is None or self.banner is None:
            return
        text = self._banner_text()
        if text != self.banner.text():
            self.banner.setText(text)

    def _agents_changed(self, _event: AgentStateChanged) -> None:
        """An agent was created or deleted (or changed state): what runs may have changed."""
        self._refresh_banner()

    def _model_answered(self, event: LLMCallRecorded) -> None:
        """A language model answered: under a name not seen yet, its cutoff is checked again
        (an alias answers as the dated model behind it)."""
        if event.provider == "rule-engine" or (event.agent_id, event.model) in self._answered:
            return
        self._answered.add((event.agent_id, event.model))
        self._refresh_banner()

    def reset_layout(self) -> None:
        for dock in self.docks.values():
            dock.setFloating(False)
        window_layout.default_arrangement(self, self.docks)

    # -- the replay ----------------------------------------------------------------------------

    def start_replay(self) -> None:
        """Let simulated time flow at the driver's speed until the data ends (a live market:
        follow it, reading quotes, settling and firing jobs, until the window closes)."""
        if self.desk is None or (self._pacer is not None and not self._pacer.done()):
            return
        if self.desk.world.disk.full:  # stopped for a full disk: nothing runs until reopened
            return
        venue = self.desk.world.venue
        if not venue.offline:
            self._pacer = self.tasks.spawn(venue.driver.run_paced())
            return
        self._pacer = self.tasks.spawn(venue.driver.run_paced(tick_s=0.1, max_step_ms=HOUR_MS))

    def keep_speed(self, speed: float) -> None:
        """Store the replay speed in the workspace's settings (``[agents] replay_speed``), which
        a relaunch starts the replay at."""
        if self.world is not None:
            # the world's settings are what is in force: a later save compares with them
            world = self.world
            world.settings = world.settings.model_copy(update={
                "agents": world.settings.agents.model_copy(update={"replay_speed": speed})})
            self.tasks.spawn(self._store_speed(world.workspace.settings_path, speed))

    def _paused_when_closed(self, workspace: Workspace) -> bool:
        return str(workspace.root.resolve()) in self._paused_workspaces()

    def _paused_workspaces(self) -> list[str]:
        value = self.store.value(PAUSED_KEY, [])
        if isinstance(value, str):  # QSettings gives one item back as a bare string
            return [value]
        return [str(v) for v in value] if isinstance(value, list) else []

    def _keep_paused(self, paused: bool) -> None:
        """Remember on this desktop that this workspace's replay was paused, so a relaunch opens
        it paused where it stood instead of letting time run on unseen."""
        if self.world is None or self.world.workspace is None:
            return
        root = str(self.world.workspace.root.resolve())
        roots = [r for r in self._paused_workspaces() if r != root]
        if paused:
            roots.append(root)
        self.store.setValue(PAUSED_KEY, roots[-MAX_PAUSED_KEPT:])
        self.store.sync()

    async def _store_speed(self, path: Path, speed: float) -> None:
        async with self._speed_lock:  # two quick choices are written in the order made
            try:
                await asyncio.to_thread(save_replay_speed, path, speed)
            except (OSError, OperationalError) as exc:
                self.statusBar().showMessage(
                    f"The replay speed {speed:g}x was not kept for the next start: {exc}", 15_000)

    async def pause_all(self) -> None:
        """Pause every running agent (the tray's and the Agents menu's command)."""
        if self.world is None:
            return
        for info in self.world.agents.manager.list_agents():
            if info.state in (AgentState.RUNNING, AgentState.WAITING_FOR_USER):
                await self.world.agents.manager.control(info.agent_id, "pause")

    async def resume_all(self) -> None:
        if self.world is None:
            return
        for info in self.world.agents.manager.list_agents():
            if info.state is AgentState.PAUSED:
                await self.world.agents.manager.control(info.agent_id, "resume")

    def _kill_switch_changed(self, trip: Any) -> None:
        """The kill switch tripped or was reset (here or anywhere): the views it does not own.
        While tripped its banner stands in for the desk's, on a small screen there is no room
        for both."""
        from app.ui.kill_switch import summary

        self.banner.setVisible(trip is None)
        account = self.panels.get("account")
        if account is not None:
            account.set_halt(None if trip is None else f"the kill switch was {summary(trip)}")
        status = self.statusBar()
        if isinstance(status, StatusBar):
            status.refresh()

    # -- navigation ----------------------------------------------------------------------------

    def open_panel(self, panel: str, agent_id: str = "") -> None:
        """Show a panel (a tray notice was clicked, or a shortcut), selecting the agent if any."""
        self.show()
        self.raise_()
        self.activateWindow()
        if panel == "chat" and agent_id:
            self.open_conversation(agent_id)
        elif panel in self.docks:
            self.docks[panel].show()
            self.docks[panel].raise_()
        elif panel in ("chart", "backtest") and self.panels:
            self.tabs.setCurrentWidget(self.panels[panel])

    def open_conversation(self, agent_id: str) -> None:
        self.panels["chat"].set_agent(agent_id)
        self.docks["chat"].show()
        self.docks["chat"].raise_()

    def open_memory(self, agent_id: str) -> None:
        self.panels["memory"].show_agent(agent_id)
        self.docks["memory"].show()
        self.docks["memory"].raise_()

    def _agent_names(self) -> list[tuple[str, str]]:
        if self.world is None:
            return []
        return [(a.agent_id, a.name) for a in self.world.agents.manager.list_agents()]

    def _agent_name(self, agent_id: str) -> str | None:
        if self.world is None:
            return None
        info = self.world.agents.store.get(agent_id)
        return info.name if info is not None else None

    def _agent_changed(self, event: AgentStateChanged) -> None:
        """An agent was made or changed: its name is read again (a deleted one keeps it)."""
        if event.state != "deleted" and self.names is not None:
            self.names.changed(event.agent_id)

    def _show_notice(self, notice: Any) -> None:
        if self.tray is None or not self.tray.available:
            self.statusBar().showMessage(f"{notice.title}: {notice.message}", 10_000)

    def _refresh_title(self) -> None:
        if self.world is None:
            return
        venue = self.world.venue
        root = self.world.workspace.root.name if self.world.workspace else ""
        live = "● LIVE · REAL MONEY — " if venue.is_live_account else ""
        self.setWindowTitle(
            f"{live}Kestrel — {root} — {venue.label} — {venue.broker.mode.value}")

    # -- menus ---------------------------------------------------------------------------------

    def _build_menus(self) -> None:
        self._shortcut_help: list[tuple[QAction, str]] = []
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        self.settings_action = QAction("&Settings…", self)
        self.settings_action.setShortcut(QKeySequence("Ctrl+,"))
        self.settings_action.triggered.connect(self.open_settings)
        file_menu.addAction(self.settings_action)
        file_menu.addSeparator()
        quit_action = QAction("&Quit", self)
        quit_action.setShortcut(QKeySequence("Ctrl+Q"))
        quit_action.triggered.connect(self.quit)
        file_menu.addAction(quit_action)

        self.view_menu = bar.addMenu("&View")
        chart_action = QAction("Chart", self)
        chart_action.setShortcut(QKeySequence("Ctrl+1"))
        chart_action.triggered.connect(lambda: self.open_panel("chart"))
        backtest_action = QAction("Backtest", self)
        backtest_action.setShortcut(QKeySequence("Ctrl+B"))
        backtest_action.triggered.connect(lambda: self.open_panel("backtest"))
        self.view_menu.addActions([chart_action, backtest_action])
        self.view_menu.addSeparator()
        self.reset_layout_action = QAction("Reset layout", self)
        self.reset_layout_action.triggered.connect(self.reset_layout)

        agents_menu = bar.addMenu("&Agents")
        pause = QAction("Pause all agents", self)
        pause.setShortcut(QKeySequence("Ctrl+Shift+P"))
        pause.triggered.connect(lambda: self.tasks.spawn(self.pause_all()))
        resume = QAction("Resume all agents", self)
        resume.setShortcut(QKeySequence("Ctrl+Shift+R"))
        resume.triggered.connect(lambda: self.tasks.spawn(self.resume_all()))
        agents_menu.addActions([pause, resume])
        # the kill switch's actions join once a workspace is open (app.ui.kill_switch)
        self.trading_menu = bar.addMenu("&Trading")
        self.trading_waits = self.trading_menu.addAction(
            "New order, Flatten all and the kill switch come with the workspace")
        self.trading_waits.setEnabled(False)
        self._runtime_actions = [pause, resume, chart_action, backtest_action]
        for action in self._runtime_actions:
            action.setEnabled(False)

        help_menu = bar.addMenu("&Help")
        keys = QAction("Keyboard shortcuts", self)
        keys.setShortcut(QKeySequence("F1"))
        keys.triggered.connect(self.show_shortcuts)
        help_menu.addAction(keys)
        self.shortcuts_box: QMessageBox | None = None
        self._described(keys, "These shortcuts")
        self._described(chart_action, "Chart")
        self._described(backtest_action, "Backtest")
        self._described(pause, "Pause all agents")
        self._described(resume, "Resume all agents")
        self._described(self.settings_action, "Settings")
        self._described(quit_action, "Quit (asks first while agents run or a position is open)")

    def _described(self, action: QAction, words: str) -> None:
        """List ``action`` under F1: its shortcut is the action's own, so the list cannot say a
        key the window does not answer."""
        self._shortcut_help.append((action, words))

    def shortcut_list(self) -> list[tuple[QAction, str]]:
        """Every shortcut F1 lists, with its action, in the order listed."""
        return [(a, w) for a, w in self._shortcut_help if not a.shortcut().isEmpty()]

    def show_shortcuts(self) -> None:
        lines = [f"{action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)}  {words}"
                 for action, words in self.shortcut_list()]
        if self.shortcuts_box is not None:  # pressed again: the list already shown comes forward
            self.shortcuts_box.setText("\n".join(lines))
            self.shortcuts_box.raise_()
            return
        box = QMessageBox(self)
        box.setWindowTitle("Keyboard shortcuts")
        box.setText("\n".join(lines))
        box.finished.connect(lambda _result: setattr(self, "shortcuts_box", None))
        self.shortcuts_box = box
        box.open()

    def open_settings(self) -> None:
        from app.ui.settings import SettingsDialog

        workspace = self.world.workspace if self.world else Workspace.default()
        apply = self.world.apply_settings if self.world is not None else None
        dialog = SettingsDialog(workspace, self.secrets, self.prefs, self, apply=apply)
        dialog.theme_changed.connect(self.apply_theme)
        dialog.saved.connect(self._settings_saved)
        if self.tray is not None:
            dialog.close_to_tray_changed.connect(
                lambda value: setattr(self.tray, "close_to_tray", value))
        dialog.open()

    def _settings_saved(self, _settings: object) -> None:
        """The toolbar shows the replay speed the saved settings gave the driver, and the banner
        what new agents would run on under the saved [llm] (with its training-cutoff warning)."""
        if self.replay_bar is not None and self.world is not None:
            self.replay_bar.show_speed(self.world.venue.driver.speed)
        self._refresh_banner()

    def apply_theme(self, name: str) -> None:
        """Switch the whole window to theme ``name``: the application's palette and sheet (which
        every widget takes its look from), then what each panel draws itself (charts, plots)."""
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, name)
        for panel in self.panels.values():
            if isinstance(panel, Restylable):
                panel.restyle()

    # -- errors and closing --------------------------------------------------------------------

    def _task_failed(self, exc: BaseException) -> None:
        if isinstance(exc, TemporaryError):
            # a read the window started failed for now (the network, an exchange's ban or rate
            # limit): its message says what and until when; it is no crash to report
            logger.warning("a read of the window failed: %s", exc)
            self.statusBar().showMessage(str(exc), 15_000)
            return
        details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.errors.report(f"{type(exc).__name__}: {exc}", details)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        if not self._closing and self.tray is not None and self.tray.handle_close(event):
            return
        window_layout.save_layout(self, self.store, docked=bool(self.docks))
        super().closeEvent(event)
        self.closed.emit()

    def quit(self) -> None:
        """Ctrl+Q, File > Quit and the tray's Quit: with agents at work or a position or an
        order open, ask first, naming them (a stray Ctrl+Q must not stop a desk that trades);
        with nothing running, quit at once."""
        if self.world is None or self.world.agents is None:
            self.quit_now()
            return
        if self.quit_dialog is not None:
            self.quit_dialog.raise_()
            return
        if not self._asking_quit:
            self._asking_quit = True
            self.tasks.spawn(self._ask_quit())

    def quit_now(self) -> None:
        self._closing = True
        self.close()

    async def _ask_quit(self) -> None:
        try:
            text = await self._running_words()
        finally:
            self._asking_quit = False
        if not text:
            self.quit_now()
            return
        box = QMessageBox(self)
        box.setObjectName("quitDialog")
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Quit Kestrel")
        box.setText("Quit Kestrel?")
        box.setInformativeText(text)
        leave = box.addButton("Quit", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(leave)
        box.accepted.connect(self.quit_now)
        box.finished.connect(lambda _result: setattr(self, "quit_dialog", None))
        self.quit_dialog = box
        box.open()

    async def _running_words(self) -> str:
        """What quitting stops or leaves open, in words; empty when nothing is."""
        from app.ui.panels.style import format_fixed, format_quantity, money_decimals

        world = self.world
        assert world is not None and world.agents is not None
        working = [a.name for a in world.agents.manager.list_agents()
                   if a.role is not AgentRole.ORCHESTRATOR
                   and a.state in (AgentState.RUNNING, AgentState.WAITING_FOR_USER)]
        broker = world.venue.broker
        try:
            state = await broker.account()
        except KestrelError as exc:  # the account cannot be read now: say so, still ask
            held, orders, unread = [], [], f"The account could not be read ({exc})."
        else:
            held = [p for p in state.positions if p.size > 0]
            orders, unread = list(state.open_orders), ""
        if not (working or held or orders or unread):
            return ""
        ccy = broker.quote_currency
        parts = []
        if working:
            parts.append(f"{_count(len(working), 'agent')} {'is' if len(working) == 1 else 'are'}"
                         f" running: {', '.join(working)}.")
        if held:
            listed = ", ".join(
                f"{p.symbol} {format_quantity(p.size)} (P&L "
                f"{format_fixed(p.unrealized_pnl, money_decimals(ccy), sign=True)} {ccy})"
                for p in held)
            parts.append(f"{_count(len(held), 'position')} open: {listed}.")
        if orders:
            parts.append(f"{_count(len(orders), 'order')} open.")
        if unread:
            parts.append(unread)
        venue = world.venue
        if venue.offline:
            parts.append("Quitting stops the replay and the agents; everything resumes where it "
                         "stood at the next start.")
        elif venue.is_live_account:
            parts.append("Quitting stops the agents. Your positions and the orders resting on the "
                         "exchange stay there; stops Kestrel holds itself do not protect while it "
                         "is closed.")
        else:
            parts.append("Quitting stops the agents and the paper account: its orders are not "
                         "filled and its stops do not protect while Kestrel is closed.")
        return "\n".join(parts)

    async def aclose(self) -> None:
        """Stop the replay and the agents and close the stores (after the window closed)."""
        if self._pacer is not None:
            self._pacer.cancel()
            await asyncio.gather(self._pacer, return_exceptions=True)
        if self.live is not None:
            self.live.close()
        if self.tray is not None:
            self.tray.detach()
        if self.kill_controls is not None:
            self.kill_controls.detach()
        if self.person is not None:
            self.person.detach()
        if self._banner_link is not None:
            self._banner_link.detach()
        if self.world is not None:
            self.world.bus.unsubscribe(AgentStateChanged, self._agent_changed)
        if self.notices is not None:
            self.notices.detach()
        if self.book is not None:
            self.book.detach()
        status = self.statusBar()
        if isinstance(status, StatusBar):
            status.stop()
        for panel in self.panels.values():
            await stop_panel(panel)
        self.tasks.shutdown()
        if self.telegram is not None:
            await self.telegram.aclose()
        if self.world is not None:
            # a full disk was said in the window already (``_on_disk_full``): not raised again
            await self.world.aclose(raise_full_disk=False)
            self.world = None

    def describe(self) -> str:
        """One line for the log: where and when the desk is."""
        if self.world is None:
            return "no workspace"
        agents = self.world.agents.manager.list_agents()
        roles = sorted(a.role.value for a in agents if a.role is not AgentRole.ORCHESTRATOR)
        return (f"{self.world.workspace.root} at {ms_to_iso(self.world.venue.clock.now_ms())},"
                f" agents: {', '.join(roles) or 'none'}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _next_bar_open(venue: Any) -> Any:
    """On a replay, when a market order of a symbol placed now fills: the paper broker fills
    it at the open of the first bar of the symbol's finest interval that opens at or after the
    order; None elsewhere (live quotes fill at once)."""
    if not venue.offline:
        return None
    from app.domain.market import interval_ms

    market, clock = venue.market, venue.clock

    def opens(symbol: str) -> int:
        bar = interval_ms(market.finest_interval(symbol))
        return -(-clock.now_ms() // bar) * bar

    return opens
