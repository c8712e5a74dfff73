"""The Backtest view: pick data, a strategy or agents, dates and cash; see the estimate; run; read.

The form and the results are pages of their own (Setup, Summary, Trades, Past runs, Compare): on
a small screen the view is the room left between the docks, and a result beside the form got a
fifth of it. A finished run opens its Summary; past runs are read back from their folders.

Why the estimate comes first: a run with a language model costs money per bar, so the number of
calls and the price are on screen before Start, and a run on the rule engine says plainly that it
calls no LLM. The run itself happens in a worker thread (``jobs``); this widget polls its progress
ten times a second for the bar, the ETA and Cancel, and shows any failure (a bad data file, a
range too short to trade) as a sentence in the form instead of a traceback.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QDateTime, Qt, QTimer, QTimeZone, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDateTimeEdit,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.backtest.report import BacktestResult
from app.backtest.strategy import StrategyError
from app.config import Settings
from app.domain.errors import DataFileError, OperationalError
from app.resources import sample_data_files
from app.ui.backtest.compare import CompareView
from app.ui.backtest.history import RunsView
from app.ui.backtest.jobs import (
    AgentRequest,
    BacktestCancelled,
    DataInfo,
    Progress,
    RunOutcome,
    SmaRequest,
    inspect_file,
    run_agents,
    run_sma,
)
from app.ui.backtest.report import ReportView
from app.ui.backtest.runs import PastRun, RunUnreadable, find_runs, load_result, price_files
from app.ui.panels.tasks import TaskSet
from app.ui.theme import set_look
from app.workspace import Workspace

if TYPE_CHECKING:
    from app.runtime.providers import ProviderChoice

logger = logging.getLogger(__name__)
DEFAULT_BARS = 500
POLL_MS = 100
FORM_MAX_PX = 760
RUNS_FOLDER = "backtests"  # the window's runs: <workspace>/backtests/<time>/


def _qdt(ms: int) -> QDateTime:
    return QDateTime.fromMSecsSinceEpoch(ms, QTimeZone.utc())


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "estimating time left…"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"about {seconds} s left"
    return f"about {seconds // 60} min {seconds % 60:02d} s left"


class BacktestView(QWidget):
    """Run backtests from the window.

    Args:
        workspace: where runs are written (``<workspace>/backtests/<time>/``) and whose settings
            say which LLM the agents would use.
        data_files: the files offered (default: the bundled sample data); Browse adds more.
        templates: agent templates by id (default: ``load_templates()``; empty hides agents).
        settings: the settings to use (default: the workspace's).

    Signals:
        finished(object): the ``RunOutcome`` of a completed run.
    """

    finished = Signal(object)

    def __init__(
        self,
        workspace: Workspace,
        data_files: Sequence[Path] | None = None,
        templates: Mapping[str, Any] | None = None,
        settings: Settings | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("backtest_view")
        self.workspace = workspace
        self.settings = settings if settings is not None else workspace.settings()
        self.templates = dict(templates) if templates is not None else self._load_templates()
        self.tasks = TaskSet(self._task_failed)
        self.infos: dict[Path, DataInfo] = {}
        self.progress_state: Progress | None = None
        self.outcome: RunOutcome | None = None
        self.run_roots: list[Path] = [workspace.root / RUNS_FOLDER]
        self._runs_read = False
        self._build()
        for path in data_files if data_files is not None else sample_data_files():
            self._add_file(Path(path), checked=False)
        self.tasks.spawn(self.load_files())
        # -- sweeps: a tab of their own (app.ui.backtest.sweeps), kept apart from this view --
        from app.ui.backtest.sweeps import attach_sweeps

        self.sweeps = attach_sweeps(self)

    @staticmethod
    def _load_templates() -> dict[str, Any]:
        from app.agents.template_files import load_templates

        return dict(load_templates())

    # -- layout ---------------------------------------------------------------------------------
    def _build(self) -> None:
        data_box = self._data_box()
        what_box = self._what_box()
        range_box = self._range_box()
        self._build_pages(self._setup_page(data_box, what_box, range_box))

    def _data_box(self) -> QGroupBox:
        """The data files to run over, checked or not."""
        data_box = QGroupBox("Data")
        self.data_list = QListWidget()
        self.data_list.setObjectName("data_list")
        self.data_list.setMaximumHeight(96)
        self.data_list.setMinimumHeight(64)  # the form scrolls rather than squash the lists
        self.data_list.itemChanged.connect(lambda _item: self._selection_changed())
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        column = QVBoxLayout(data_box)
        column.addWidget(self.data_list)
        column.addWidget(browse, 0, Qt.AlignmentFlag.AlignRight)
        return data_box

    def _what_box(self) -> QGroupBox:
        """The strategy and its parameters, or the agent templates (with the engine each would
        run on), and blind mode."""
        from app.runtime.providers import choose_provider  # loads the agents' side, off start-up

        what_box = QGroupBox("What to run")
        self.use_sma = QRadioButton("Strategy: sma_cross (SMA crossover, rule-based)")
        self.use_sma.setObjectName("use_sma")
        self.use_sma.setChecked(True)
        self.fast = QSpinBox()
        self.fast.setRange(2, 500)
        self.fast.setValue(10)
        self.slow = QSpinBox()
        self.slow.setRange(3, 2000)
        self.slow.setValue(30)
        params = QHBoxLayout()
        params.addWidget(QLabel("fast"))
        params.addWidget(self.fast)
        params.addWidget(QLabel("slow"))
        params.addWidget(self.slow)
        params.addStretch(1)
        self.use_agents = QRadioButton("Agents (templates, bar by bar)")
        self.use_agents.setObjectName("use_agents")
        self.agent_list = QListWidget()
        self.agent_list.setObjectName("agent_list")
        self.agent_list.setMaximumHeight(96)
        self.agent_list.setMinimumHeight(64)
        for template_id, template in sorted(self.templates.items()):
            role = getattr(getattr(template, "role", None), "value", "")
            if role == "orchestrator":
                continue  # an orchestrator talks to people; a backtest has none to talk to
            choice = choose_provider(template, self.settings.llm)  # what the run would call
            engine = choice.kind if choice.is_llm else "rule engine"
            item = QListWidgetItem(f"{getattr(template, 'display_name', template_id)} "
                                   f"({role}, {engine})")
            item.setToolTip(f"{template_id}: "
                            + (f"{choice.kind} model {choice.model}" if choice.is_llm
                               else "the built-in rule engine, not an LLM"))
            item.setData(Qt.ItemDataRole.UserRole, template_id)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked)
            self.agent_list.addItem(item)
        self.agent_list.itemChanged.connect(lambda _item: self.update_estimate())
        if self.agent_list.count() == 0:
            self.use_agents.setEnabled(False)
            self.use_agents.setText("Agents (no agent templates found)")
        for widget in (self.use_sma, self.use_agents):
            widget.toggled.connect(self._mode_changed)
        for spin in (self.fast, self.slow):
            spin.valueChanged.connect(lambda _v: self.update_estimate())
        what = QVBoxLayout(what_box)
        what.addWidget(self.use_sma)
        what.addLayout(params)
        what.addWidget(self.use_agents)
        what.addWidget(self.agent_list)
        self.blind = QCheckBox("Blind: hide the symbol, dates and price level from the agents")
        self.blind.setObjectName("blind")
        self.blind.setToolTip("A language model may remember this market. Blind, the agents see "
                              "ASSET1/QUOTE, dates in 1971 and prices x 0.032; their orders "
                              "fill for real and the report is in real terms.")
        self.blind.setEnabled(False)
        what.addWidget(self.blind)
        return what_box

    def _range_box(self) -> QGroupBox:
        """The period and the starting cash."""
        range_box = QGroupBox("Range and money")
        form = QFormLayout(range_box)
        self.start = QDateTimeEdit()
        self.end = QDateTimeEdit()
        for edit in (self.start, self.end):
            edit.setTimeZone(QTimeZone.utc())
            edit.setDisplayFormat("yyyy-MM-dd HH:mm 'UTC'")
            edit.setCalendarPopup(True)
            edit.dateTimeChanged.connect(lambda _v: self.update_estimate())
        self.start.setObjectName("start_date")
        self.end.setObjectName("end_date")
        self.cash = QLineEdit(str(self.settings.paper.initial_cash))
        self.cash.setObjectName("cash")
        self.cash.setAlignment(Qt.AlignmentFlag.AlignRight)
        form.addRow("Start", self.start)
        form.addRow("End", self.end)
        form.addRow("Cash (quote)", self.cash)
        return range_box

    def _setup_page(self, data_box: QGroupBox, what_box: QGroupBox,
                    range_box: QGroupBox) -> QScrollArea:
        """The Setup page: the boxes, the estimate, Start and Cancel, and the run's progress;
        it scrolls where a small screen leaves it less than its height."""
        self.estimate = QLabel()
        self.estimate.setObjectName("estimate")
        self.estimate.setWordWrap(True)
        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("start_backtest")
        self.start_button.clicked.connect(self.start_run)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancel_backtest")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel_run)
        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.cancel_button)
        self.progress = QProgressBar()
        self.progress.setObjectName("progress")
        self.progress.setRange(0, 100)
        self.progress.setValue(0)
        self.eta = QLabel()
        self.eta.setObjectName("eta")
        set_look(self.eta, "muted")
        self.status = QLabel()
        self.status.setObjectName("status")
        self.status.setWordWrap(True)

        left = QWidget()
        left.setObjectName("backtest_setup")
        side = QVBoxLayout(left)
        side.setContentsMargins(8, 8, 8, 8)
        for widget in (data_box, what_box, range_box, self.estimate):
            side.addWidget(widget)
        side.addLayout(buttons)
        side.addWidget(self.progress)
        side.addWidget(self.eta)
        side.addWidget(self.status)
        side.addStretch(1)
        left.setMaximumWidth(FORM_MAX_PX)  # on a wide screen the form does not sprawl
        # the form is taller than a small screen's window leaves the view: it scrolls there
        # instead of setting the whole window's minimum height
        form = QScrollArea()
        form.setObjectName("backtest_form")
        form.setWidgetResizable(True)
        form.setFrameShape(QScrollArea.Shape.NoFrame)
        form.setWidget(left)
        self.form = form
        return form

    def _build_pages(self, form: QScrollArea) -> None:
        """The view's pages (Setup, Summary, Trades, Past runs, Compare) and its poll."""
        # the form and each result have a page of their own: a result gets the whole view,
        # which on a small screen is all the room there is between the docks
        self.report = ReportView()
        self.runs_view = RunsView()
        self.runs_view.open_requested.connect(lambda run: self.tasks.spawn(self.open_run(run)))
        self.runs_view.compare_requested.connect(
            lambda a, b: self.tasks.spawn(self.compare_runs(a, b)))
        self.runs_view.refresh_requested.connect(lambda: self.tasks.spawn(self.refresh_runs()))
        self.runs_view.folder_added.connect(self.add_runs_folder)
        self.compare = CompareView()
        self.compare.pair_chosen.connect(lambda a, b: self.tasks.spawn(self.compare_runs(a, b)))
        self.pages = QTabWidget()
        self.pages.setObjectName("backtest_pages")
        self.pages.setDocumentMode(True)
        self.pages.addTab(form, "Setup")
        self.pages.addTab(self.report, "Summary")
        self.pages.addTab(self.report.trades_view, "Trades")
        self.pages.addTab(self.runs_view, "Past runs")
        self.pages.addTab(self.compare, "Compare")
        self.pages.currentChanged.connect(self._page_shown)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.pages)
        self.timer = QTimer(self)
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self._poll)
        self._mode_changed()

    def restyle(self) -> None:
        """Redraw the report's plots and coloured cells (the theme changed)."""
        self.report.restyle()
        self.compare.restyle()

    def show_page(self, name: str) -> None:
        """Bring a page forward by its tab's title ("Setup", "Summary", "Trades"...)."""
        for index in range(self.pages.count()):
            if self.pages.tabText(index) == name:
                self.pages.setCurrentIndex(index)
                return

    def _page_shown(self, index: int) -> None:
        widget = self.pages.widget(index)
        if widget in (self.runs_view, self.compare) and not self._runs_read:
            self.tasks.spawn(self.refresh_runs())

    # -- past runs ------------------------------------------------------------------------------
    def known_data_files(self) -> list[Path]:
        """The candle files the view knows (listed or added), where a run's data is looked for."""
        return [Path(self.data_list.item(r).data(Qt.ItemDataRole.UserRole))
                for r in range(self.data_list.count())]

    async def refresh_runs(self) -> list[PastRun]:
        """Read the run folders again (in a thread) and list what they hold."""
        roots = list(self.run_roots)
        runs = await asyncio.to_thread(find_runs, roots)
        self._runs_read = True
        self.runs_view.show_runs(runs, roots)
        self.compare.set_runs(runs)
        return runs

    def add_runs_folder(self, folder: Path) -> None:
        """Look for runs in ``folder`` too (a run made in the shell, or a folder of runs)."""
        if folder not in self.run_roots:
            self.run_roots.append(folder)
        self.tasks.spawn(self.refresh_runs())

    async def _read(self, run: PastRun) -> BacktestResult | None:
        try:
            return await asyncio.to_thread(load_result, run.folder)
        except RunUnreadable as exc:
            self.runs_view.where.setText(f"{run.folder} cannot be shown: {exc}")
            set_look(self.runs_view.where, "error")
            return None

    async def open_run(self, run: PastRun) -> bool:
        """Show a past run in the Summary and Trades pages; False if its files are unreadable."""
        result = await self._read(run)
        if result is None:
            return False
        files = price_files(run.folder, result.settings, self.known_data_files())
        self.report.show_result(result, run.title, f"{run.folder} · made {run.written}",
                                files)
        self.show_page("Summary")
        return True

    async def compare_runs(self, first: PastRun, second: PastRun) -> bool:
        """Put two past runs side by side in the Compare page."""
        a, b = await self._read(first), await self._read(second)
        if a is None or b is None:
            return False
        self.compare.show_pair((first, a), (second, b))
        self.show_page("Compare")
        return True

    # -- data -----------------------------------------------------------------------------------
    def _add_file(self, path: Path, checked: bool) -> QListWidgetItem:
        item = QListWidgetItem(f"{path.name} (reading…)")
        item.setData(Qt.ItemDataRole.UserRole, str(path))
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
        self.data_list.addItem(item)
        return item

    def _item_for(self, path: Path) -> QListWidgetItem | None:
        for row in range(self.data_list.count()):
            item = self.data_list.item(row)
            if Path(item.data(Qt.ItemDataRole.UserRole)) == path:
                return item
        return None

    async def load_files(self) -> None:
        """Read every listed file (in a thread) and describe it; tick the first if none is."""
        paths = [Path(self.data_list.item(r).data(Qt.ItemDataRole.UserRole))
                 for r in range(self.data_list.count())]
        for path in paths:
            if path not in self.infos:
                await self._inspect(path)
        if not self.selected_files():
            first = next((self._item_for(p) for p in paths if p in self.infos), None)
            if first is not None:
                first.setCheckState(Qt.CheckState.Checked)
        self._selection_changed()

    async def _inspect(self, path: Path) -> DataInfo | None:
        item = self._item_for(path)
        try:
            info = await asyncio.get_event_loop().run_in_executor(None, inspect_file, path)
        except (DataFileError, OSError) as exc:
            if item is not None:
                item.setText(f"{path.name}: unusable")
                item.setToolTip(str(exc))
                item.setForeground(Qt.GlobalColor.red)
                item.setCheckState(Qt.CheckState.Unchecked)
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsUserCheckable)
            self.show_error(f"{path.name} cannot be used: {exc}")
            return None
        self.infos[path] = info
        if item is not None:
            self.data_list.blockSignals(True)
            item.setText(info.label)
            item.setToolTip(str(path))
            self.data_list.blockSignals(False)
        return info

    def add_data_file(self, path: Path) -> None:
        """Add a file (as Browse does), tick it and read it."""
        path = Path(path)
        item = self._item_for(path) or self._add_file(path, checked=True)
        item.setCheckState(Qt.CheckState.Checked)
        self.tasks.spawn(self._inspect_and_select(path))

    async def _inspect_and_select(self, path: Path) -> None:
        if await self._inspect(path) is not None:
            self._selection_changed()

    def _browse(self) -> None:
        names, _ = QFileDialog.getOpenFileNames(
            self, "Kline CSV files", str(self.workspace.root),
            "Kline CSV (*.csv);;All files (*)")
        for name in names:
            self.add_data_file(Path(name))

    def selected_files(self) -> list[DataInfo]:
        out = []
        for row in range(self.data_list.count()):
            item = self.data_list.item(row)
            path = Path(item.data(Qt.ItemDataRole.UserRole))
            if item.checkState() == Qt.CheckState.Checked and path in self.infos:
                out.append(self.infos[path])
        return out

    def _selection_changed(self) -> None:
        files = self.selected_files()
        if not files:
            self.update_estimate()
            return
        first = max(f.first_ms for f in files)
        last = min(f.last_ms for f in files)
        bar = min(f.bar_ms for f in files)
        for edit in (self.start, self.end):
            edit.blockSignals(True)
            edit.setDateTimeRange(_qdt(min(first, last)), _qdt(max(first, last)))
            edit.blockSignals(False)
        self.end.setDateTime(_qdt(last))
        self.start.setDateTime(_qdt(max(first, last - DEFAULT_BARS * bar)))
        self.update_estimate()

    def set_range(self, start_ms: int, end_ms: int) -> None:
        self.start.setDateTime(_qdt(start_ms))
        self.end.setDateTime(_qdt(end_ms))

    def range_ms(self) -> tuple[int, int]:
        return self.start.dateTime().toMSecsSinceEpoch(), self.end.dateTime().toMSecsSinceEpoch()

    # -- what to run and what it costs -----------------------------------------------------------
    def _mode_changed(self, *_args: object) -> None:
        agents = self.use_agents.isChecked()
        self.agent_list.setEnabled(agents)
        self.blind.setEnabled(agents)
        self.fast.setEnabled(not agents)
        self.slow.setEnabled(not agents)
        self.update_estimate()

    def selected_templates(self) -> list[str]:
        return [str(self.agent_list.item(r).data(Qt.ItemDataRole.UserRole))
                for r in range(self.agent_list.count())
                if self.agent_list.item(r).checkState() == Qt.CheckState.Checked]

    def provider_plan(self) -> ProviderChoice:
        """What the selected agents would call under the workspace's ``[llm]`` settings (the
        runtime's one rule, ``choose_provider``)."""
        from app.runtime.providers import plan_for_templates

        chosen = [self.templates[t] for t in self.selected_templates()]
        return plan_for_templates(chosen, self.settings.llm)

    def bars_in_range(self) -> int:
        files = self.selected_files()
        if not files:
            return 0
        start, end = self.range_ms()
        bar = min(f.bar_ms for f in files)
        return max(0, (end - start) // bar + 1)

    def update_estimate(self) -> None:
        bars = self.bars_in_range()
        if not self.selected_files():
            self.estimate.setText("Tick at least one data file.")
            return
        if self.use_sma.isChecked():
            self.estimate.setText(
                f"{bars:,} bars. Estimate: 0 LLM calls, $0 — sma_cross is a rule engine "
                "(not an LLM).")
            return
        templates = self.selected_templates()
        if not templates:
            self.estimate.setText("Tick the agent templates to run (at least one analyst).")
            return
        plan = self.provider_plan()
        kind, model = plan.kind, plan.model
        if not plan.is_llm:
            self.estimate.setText(
                f"{bars:,} bars. Estimate: 0 LLM calls, $0 — the agents run on the rule engine "
                "(not an LLM).")
            return
        from app.agents.costs import PriceTable
        from app.runtime.agent_backtest import estimate

        analysts = sum(1 for t in templates
                       if getattr(self.templates[t].role, "value", "") == "analyst")
        try:
            prices = PriceTable.load(self.workspace.root / "prices.yaml")
        except OperationalError as exc:
            self.estimate.setText(f"{bars:,} bars; the cost cannot be estimated: {exc}")
            return
        est = estimate(bars, analysts, model, prices, kind)
        self.estimate.setText(f"{bars:,} bars with {kind} ({model}). Estimate: "
                              f"{est.describe()}.")

    # -- running --------------------------------------------------------------------------------
    def show_error(self, text: str) -> None:
        self.status.setText(text)
        set_look(self.status, "error")

    def _say(self, text: str) -> None:
        self.status.setText(text)
        set_look(self.status, "")

    def _cash(self) -> Decimal | None:
        try:
            cash = Decimal(self.cash.text().replace(",", "").strip())
        except InvalidOperation:
            cash = None
        if cash is None or not cash.is_finite() or cash <= 0:
            self.show_error(f"Cash must be a positive number, got {self.cash.text()!r}.")
            return None
        return cash

    def start_run(self) -> None:
        """Check the form and start the run in the background (the Start button)."""
        if self.progress_state is not None:
            return
        files = self.selected_files()
        if not files:
            self.show_error("Tick at least one usable data file.")
            return
        cash = self._cash()
        if cash is None:
            return
        start, end = self.range_ms()
        if end <= start:
            self.show_error("The end date must be after the start date.")
            return
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S-%f")
        out_dir = self.workspace.root / "backtests" / stamp
        if self.use_agents.isChecked():
            templates = self.selected_templates()
            if not templates:
                self.show_error("Tick at least one agent template (an analyst is needed).")
                return
            request: SmaRequest | AgentRequest = AgentRequest(
                files, start, end, cash, templates, out_dir, llm=self.settings.llm,
                blind=self.blind.isChecked())
            job: Any = run_agents
        else:
            request = SmaRequest(files, start, end, cash, self.fast.value(), self.slow.value(),
                                 out_dir)
            job = run_sma
        progress = self.progress_state = Progress()
        self.start_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setRange(0, 100)
        self.progress.setValue(0)
        self.eta.setText("starting…")
        self._say("Running…")
        self.timer.start()
        self.tasks.spawn(self._run(job, request, progress))

    async def _run(self, job: Any, request: SmaRequest | AgentRequest, progress: Progress) -> None:
        loop = asyncio.get_event_loop()
        try:
            outcome: RunOutcome = await loop.run_in_executor(None, job, request, progress)
        except asyncio.CancelledError:
            progress.cancel.set()
            raise
        except BacktestCancelled as exc:
            self._say(f"Stopped: {exc}. Nothing was reported for a partial run.")
            self.eta.setText("")
            return
        except DataFileError as exc:
            self.show_error(f"Bad data file: {exc}")
            return
        except (OperationalError, StrategyError, ValueError, OSError) as exc:
            self.show_error(str(exc))
            return
        finally:
            self.timer.stop()
            self.progress_state = None
            self.start_button.setEnabled(True)
            self.cancel_button.setEnabled(False)
        self._poll_once(progress)
        self.progress.setValue(self.progress.maximum())
        self.eta.setText("done")
        self.outcome = outcome
        files = price_files(request.out_dir, outcome.result.settings, self.known_data_files())
        self.report.show_result(outcome.result, outcome.title, outcome.note, files)
        self._say(f"Done: {outcome.result.time_ms.size:,} bars; report written to "
                  f"{request.out_dir}.")
        self.show_page("Summary")
        self.finished.emit(outcome)
        await self.refresh_runs()

    def cancel_run(self) -> None:
        if self.progress_state is not None:
            self.progress_state.cancel.set()
            self.cancel_button.setEnabled(False)
            self._say("Cancelling at the next bar…")

    def _poll(self) -> None:
        if self.progress_state is not None:
            self._poll_once(self.progress_state)

    def _poll_once(self, progress: Progress) -> None:
        done, total, left = progress.snapshot()
        if total > 0:
            self.progress.setRange(0, total)
            self.progress.setValue(min(done, total))
            self.eta.setText(f"{done:,} / {total:,} bars · {format_eta(left)}")

    def _task_failed(self, exc: BaseException) -> None:
        self.show_error(f"Unexpected error: {type(exc).__name__}: {exc}")

    def closeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        if self.progress_state is not None:
            self.progress_state.cancel.set()
        self.tasks.cancel_all()
        super().closeEvent(event)
