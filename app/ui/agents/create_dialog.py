"""The "create agent" dialog: pick a template, name the agent, fill the generated settings form.

The dialog never decides what a valid agent is: it hands the person's input to the manager's
``create_agent`` (the same call the Orchestrator's tool makes) and shows a refusal next to the
field it names, keeping the dialog open with everything the person typed. It is opened with
``open()`` (window-modal, not a nested event loop), because ``exec()`` would block the one asyncio
loop the agents run on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFrame,
    QGridLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.agents.templates import AgentTemplate
from app.domain.agents import AgentInfo
from app.domain.errors import InvalidParameterError, KestrelError
from app.ui.agents.config_form import ConfigForm
from app.ui.agents.lifecycle import engine_text
from app.ui.panels.style import set_banner
from app.ui.panels.widget_tasks import TaskSet
from app.ui.theme import set_look

CreateAgent = Callable[[str, str, dict[str, Any], bool], Awaitable[AgentInfo]]
_CONFIG_PREFIX = "initial_config_json "


class CreateAgentDialog(QDialog):
    """Create one agent; ``created`` carries it once the manager has made it."""

    created = Signal(object)  # AgentInfo

    def __init__(
        self,
        templates: Mapping[str, AgentTemplate],
        agents: Sequence[AgentInfo],
        create: CreateAgent,
        engine_for: Callable[[AgentTemplate], tuple[str, str]],
        symbols: Sequence[str] = (),
        parent: QWidget | None = None,
    ) -> None:
        """``engine_for``: the provider and model a new agent of a template gets (the manager's
        ``engine_for``, which follows the ``[llm]`` settings)."""
        super().__init__(parent)
        self.setWindowTitle("Create agent")
        self.templates = dict(templates)
        self._agents = list(agents)
        self._symbols = list(symbols)
        self._create = create
        self._engine_for = engine_for
        self._suggested_name = ""
        self.tasks = TaskSet(on_error=lambda exc: self.show_message(
            f"Not created: something unexpected went wrong ({type(exc).__name__}: {exc})."))
        self.tasks.attach(self)
        self._build()
        if self.templates:
            self.select_template(next(iter(self.templates)))
        else:
            self.ok_button.setEnabled(False)
            self.show_message("No agent template can be created here: none is installed.")
        self.resize(620, 680)

    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setSpacing(8)
        head = QGridLayout()  # a form layout mis-sizes the wrapped description card below
        head.setHorizontalSpacing(10)
        head.setColumnStretch(1, 1)
        self.template_box = QComboBox()
        for template_id, template in self.templates.items():
            self.template_box.addItem(f"{template.display_name}  ·  {template.role.value}",
                                      template_id)
        self.template_box.currentIndexChanged.connect(
            lambda _i: self.select_template(self.template_box.currentData()))
        head.addWidget(QLabel("Template"), 0, 0)
        head.addWidget(self.template_box, 0, 1)
        about = QFrame()
        about.setObjectName("about")
        card = QVBoxLayout(about)
        card.setContentsMargins(10, 8, 10, 8)
        card.setSpacing(4)
        self.description = QLabel()
        self.description.setWordWrap(True)
        card.addWidget(self.description)
        self.engine = QLabel()
        set_look(self.engine, "muted")
        card.addWidget(self.engine)
        head.addWidget(about, 1, 1)
        self.name_edit = QLineEdit()
        self.name_edit.setObjectName("agent-name")
        self.name_edit.setMaxLength(120)
        self.name_edit.setPlaceholderText("How the agent is called in lists and the chat")
        name = QLabel("Name")
        name.setBuddy(self.name_edit)
        head.addWidget(name, 2, 0)
        head.addWidget(self.name_edit, 2, 1)
        root.addLayout(head)

        settings = QLabel("SETTINGS")
        settings.setStyleSheet("font-size: 8pt; font-weight: bold;")
        set_look(settings, "muted")
        root.addWidget(settings)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        root.addWidget(self.scroll, 1)

        self.start_box = QCheckBox("Start immediately")
        self.start_box.setChecked(True)
        self.start_box.setToolTip("Unticked, the agent is created but not started; Start runs it.")
        root.addWidget(self.start_box)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()
        root.addWidget(self.message)
        self.buttons = QDialogButtonBox()
        self.ok_button: QPushButton = self.buttons.addButton(
            "Create agent", QDialogButtonBox.ButtonRole.AcceptRole)
        self.ok_button.setDefault(True)
        self.cancel_button: QPushButton = self.buttons.addButton(
            QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self._ok_clicked)
        self.buttons.rejected.connect(self.reject)
        root.addWidget(self.buttons)

    # ------------------------------------------------------------------ the person's input

    @property
    def template_id(self) -> str:
        return str(self.template_box.currentData())

    def select_template(self, template_id: str) -> None:
        """Show ``template_id``'s description and a fresh form of its settings."""
        index = self.template_box.findData(template_id)
        if index != self.template_box.currentIndex():
            self.template_box.setCurrentIndex(index)  # comes back here through the signal
            return
        template = self.templates[template_id]
        self.description.setText(template.description)
        engine = engine_text(*self._engine_for(template), with_policy=True)
        self.engine.setText(f"{template.role.value.capitalize()} · engine: {engine}")
        if self.name_edit.text() in ("", self._suggested_name):
            self._suggested_name = template.display_name
            self.name_edit.setText(template.display_name)
        self.form = ConfigForm(template, self._agents, self._symbols)
        self.scroll.setWidget(self.form)
        self.message.hide()

    def fill(self, name: str | None = None, **values: Any) -> None:
        """Type a name and settings into the form, as a person would (presets, tests)."""
        if name is not None:
            self.name_edit.setText(name)
        for field, value in values.items():
            self.form.set_value(field, value)

    def show_message(self, text: str) -> None:
        set_banner(self.message, "error")
        self.message.setText(text)
        self.message.show()

    # ------------------------------------------------------------------ submit

    def _ok_clicked(self) -> None:
        self.tasks.spawn(self.submit())

    async def submit(self) -> AgentInfo | None:
        """Create the agent; on a refusal show why, keep the dialog open and return None."""
        self.message.hide()
        name = self.name_edit.text().strip()
        if not name:
            self.show_message("Not created: give the agent a name.")
            self.name_edit.setFocus()
            return None
        problem = self.form.first_problem()
        if problem is not None:
            self.show_message(f"Not created: {problem.error}.")
            problem.widget.setFocus()
            return None
        self.ok_button.setEnabled(False)
        self.ok_button.setText("Creating…")
        try:
            info = await self._create(
                self.template_id, name, self.form.values(), self.start_box.isChecked())
        except InvalidParameterError as exc:
            self._refused(exc)
            return None
        except KestrelError as exc:
            self.show_message(f"Not created: {getattr(exc, 'message', None) or exc}")
            return None
        finally:
            self.ok_button.setEnabled(True)
            self.ok_button.setText("Create agent")
        self.created.emit(info)
        self.accept()
        return info

    def _refused(self, exc: InvalidParameterError) -> None:
        """Put the manager's reason next to the field it names (or the name)."""
        field = exc.details.get("field")
        reason = exc.message.removeprefix(_CONFIG_PREFIX).rstrip(".")
        if isinstance(field, str) and field in self.form.editors:
            editor = self.form.editors[field]
            self.form.show_error(field, reason)
            self.show_message(f"Not created: {editor.label.text()}: {reason}.")
        else:
            if exc.details.get("parameter") == "agent_name_label":
                self.name_edit.setFocus()
            self.show_message(f"Not created: {reason}.")
