"""The scheduled jobs of the selected agent: when each runs, in words, and a switch to turn it off.

Jobs fire on the market clock, so "next run" is market time (UTC) and moves as the replay does.
A person reads "every hour" faster than ``interval_s=3600`` or ``0 */4 * * *``, so schedules are
put in words; a cron expression too irregular to say briefly is shown as it is, marked UTC.
The pane only shows and toggles; the panel owns the scheduler and decides when to re-read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHeaderView,
    QLabel,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.domain.agents import Job
from app.domain.words import describe_cron, every
from app.ui.agents.agent_table import humanize_task
from app.ui.panels.record_model import Column, RecordTableModel
from app.ui.panels.style import COLORS, format_time
from app.ui.theme import set_look


def describe_schedule(job: Job) -> str:
    """A job's schedule in words (times in UTC, the market clock's zone)."""
    if job.interval_s is not None:
        return every(job.interval_s)
    return describe_cron(job.cron or "")


def _next_run(job: Job) -> str:
    if not job.enabled:
        return "— (disabled)"
    return format_time(job.next_run_ms, seconds=False)


def job_columns() -> list[Column[Job]]:
    return [
        Column("Enabled", lambda _j: "", key=lambda j: j.enabled),  # the checkbox's cell
        Column("Job", lambda j: j.name, tooltip=lambda j: f"id {j.job_id} · {j.job_type}"),
        Column("Schedule", describe_schedule,
               tooltip=lambda j: f"cron {j.cron} (UTC)" if j.cron else f"{j.interval_s} s"),
        Column("Next run (UTC)", _next_run, numeric=True,
               key=lambda j: j.next_run_ms if j.enabled and j.next_run_ms else -1,
               color=lambda j: None if j.enabled else COLORS["muted"]),
        Column("Last run (UTC)", lambda j: format_time(j.last_run_ms, seconds=False),
               numeric=True, key=lambda j: j.last_run_ms or -1,
               color=lambda _j: COLORS["muted"]),
        Column("Sends", lambda j: humanize_task(j.task_type), tooltip=lambda j: j.task_type),
    ]


class JobsPane(QWidget):
    """A title and the jobs table; ``toggled(job_id, enabled)`` is the panel's to handle."""

    def __init__(
        self, on_toggle: Callable[[str, bool], None], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._on_toggle = on_toggle
        self.jobs: list[Job] = []
        self.agent_name: str | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.setSpacing(4)
        self.title = QLabel()
        self.title.setStyleSheet("font-weight: bold;")
        set_look(self.title, "muted")
        layout.addWidget(self.title)
        self.model: RecordTableModel[Job] = RecordTableModel(job_columns())
        self.view = QTableView()
        self.view.setModel(self.model)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.view.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.view.setAlternatingRowColors(True)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setDefaultSectionSize(24)
        header = self.view.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        layout.addWidget(self.view, 1)
        self.show_jobs(None, [])

    def show_jobs(self, agent_name: str | None, jobs: Sequence[Job]) -> None:
        """Show ``jobs`` of the agent named; nothing is rebuilt when nothing changed."""
        jobs = list(jobs)
        if agent_name == self.agent_name and jobs == self.jobs and self.title.text():
            return
        self.agent_name = agent_name
        self.jobs = jobs
        if agent_name is None:
            self.title.setText("Scheduled jobs: select an agent")
        elif not jobs:
            self.title.setText(f"Scheduled jobs of {agent_name}: none")
        else:
            self.title.setText(f"Scheduled jobs of {agent_name} ({len(jobs)})")
        self.model.set_rows(jobs)
        for row, job in enumerate(jobs):
            # the words say the state too: a coloured square alone is easy to misread
            box = QCheckBox("on" if job.enabled else "off")
            box.setObjectName(f"job-enabled-{job.job_id}")
            box.setChecked(job.enabled)
            box.setToolTip("Untick to stop this job from running" if job.enabled
                           else "Tick to run this job on its schedule again")
            box.setStyleSheet("QCheckBox { margin-left: 8px; }")
            box.toggled.connect(lambda on, job_id=job.job_id: self._on_toggle(job_id, on))
            self.view.setIndexWidget(self.model.index(row, 0), box)

    def checkbox(self, job_id: str) -> QCheckBox | None:
        """The Enabled switch of a job's row (for the main window's shortcuts and tests)."""
        for row, job in enumerate(self.jobs):
            if job.job_id == job_id:
                widget = self.view.indexWidget(self.model.index(row, 0))
                return widget if isinstance(widget, QCheckBox) else None
        return None
