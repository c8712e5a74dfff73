"""The settings form of the "create agent" dialog, generated from a template's config schema.

Templates declare their settings (``ConfigField``: type, label, default, bounds, choices,
description) so that no form is written by hand: a new template in ``resources/agents`` gets its
form for free. Each field becomes one input widget suited to its type, its description is shown
under it, and it is checked as the person types with the very rule the manager applies
(``coerce_value``), so a mistake is pointed out at the field before anything is sent; the
manager's own check (cross-field constraints) still has the last word and is shown the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.agents.templates import AgentTemplate, ConfigField, coerce_value
from app.domain.agents import AgentInfo, AgentRole
from app.domain.numbers import plain
from app.ui.theme import set_look

_INT32 = 2**31 - 1
_AGENT_SUFFIX = "_agent_id"
NO_AGENT = "(none)"


def field_label(name: str, field: ConfigField) -> str:
    return field.label or name.replace("_", " ").capitalize()


def bounds_text(field: ConfigField) -> str:
    """The field's limits in words, e.g. ``2 to 100`` or ``up to 20 symbols``."""
    low, high = field.minimum, field.maximum
    if field.type in ("string", "symbols"):
        unit = "symbols" if field.type == "symbols" else "characters"
        if high is not None:
            return f"up to {plain(high)} {unit}"
        return f"at least {plain(low)} {unit}" if low is not None else ""
    if low is not None and high is not None:
        return f"{plain(low)} to {plain(high)}"
    if low is not None:
        return f"at least {plain(low)}"
    return f"at most {plain(high)}" if high is not None else ""


def _default_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    return plain(value) if isinstance(value, Decimal) else str(value)


class FieldEditor:
    """One setting: its label, the input widget its type calls for, and a help/error line."""

    def __init__(
        self,
        name: str,
        field: ConfigField,
        agents: Sequence[AgentInfo],
        symbols: Sequence[str],
    ) -> None:
        self.name = name
        self.field = field
        self._symbols = tuple(symbols)
        self.label = QLabel(field_label(name, field))
        self.widget = self._make_widget(agents)
        self.widget.setObjectName(f"field-{name}")
        self.label.setBuddy(self.widget)
        limits = "" if isinstance(self.widget, QComboBox) else bounds_text(field)
        self.help_text = field.description + (f" ({limits})" if limits else "")
        self.help = QLabel(self.help_text)
        self.help.setWordWrap(True)
        self.error: str | None = None
        for widget in (self.label, self.widget):
            widget.setToolTip(field.description)
        self.show_error(None)
        self._connect(lambda *_: self.validate())

    def _make_widget(self, agents: Sequence[AgentInfo]) -> QWidget:
        field = self.field
        if field.type == "boolean":
            box = QCheckBox()
            box.setChecked(bool(field.default))
            return box
        if field.type == "choice":
            combo = QComboBox()
            combo.addItems(list(field.choices or ()))
            combo.setCurrentText(str(field.default))
            return combo
        if field.type == "string" and self.name.endswith(_AGENT_SUFFIX):
            return self._agent_picker(agents)
        if field.type == "integer" and field.default is not None:
            spin = QSpinBox()
            low = int(field.minimum) if field.minimum is not None else -_INT32
            high = int(field.maximum) if field.maximum is not None else _INT32
            spin.setRange(max(low, -_INT32), min(high, _INT32))
            spin.setValue(int(field.default))
            spin.setGroupSeparatorShown(True)
            spin.setAlignment(Qt.AlignmentFlag.AlignRight)
            return spin
        edit = QLineEdit(_default_text(field.default))
        if field.type == "symbols":
            shown = ", ".join(self._symbols[:6]) + (" …" if len(self._symbols) > 6 else "")
            edit.setPlaceholderText(f"e.g. {shown}" if shown else "e.g. BTC/USDT, ETH/USDT")
        elif field.type == "string" and field.maximum is not None:
            edit.setMaxLength(int(field.maximum))
        elif field.type == "decimal":
            edit.setAlignment(Qt.AlignmentFlag.AlignRight)
        return edit

    def _agent_picker(self, agents: Sequence[AgentInfo]) -> QComboBox:
        """A field holding an agent id offers the existing agents of the role its name says
        (``trader_agent_id``: traders only; any other ``*_agent_id``: every agent), so the
        person picks one instead of copying an id."""
        role = self.name.removesuffix(_AGENT_SUFFIX)
        if role in {r.value for r in AgentRole}:
            agents = [a for a in agents if a.role.value == role]
        combo = QComboBox()
        combo.addItem(NO_AGENT, None)
        for info in agents:
            combo.addItem(f"{info.name} ({info.agent_id[:8]})", info.agent_id)
        index = combo.findData(self.field.default)
        combo.setCurrentIndex(max(index, 0))
        return combo

    def _connect(self, changed: Callable[..., object]) -> None:
        widget = self.widget
        if isinstance(widget, QCheckBox):
            widget.toggled.connect(changed)
        elif isinstance(widget, QComboBox):
            widget.currentIndexChanged.connect(changed)
        elif isinstance(widget, QSpinBox):
            widget.valueChanged.connect(changed)
        elif isinstance(widget, QLineEdit):
            widget.textChanged.connect(changed)

    def value(self) -> Any:
        """What the person entered, in the form the manager's validation accepts."""
        widget = self.widget
        if isinstance(widget, QCheckBox):
            return widget.isChecked()
        if isinstance(widget, QSpinBox):
            return widget.value()
        if isinstance(widget, QComboBox):
            picks_agent = self.name.endswith(_AGENT_SUFFIX)
            return widget.currentData() if picks_agent else widget.currentText()
        text = widget.text().strip() if isinstance(widget, QLineEdit) else ""
        if not text and self.field.default is None:
            return None  # an optional field left empty stays unset
        return text

    def set_value(self, value: Any) -> None:
        """Fill the widget as a person would have (for presets and tests)."""
        widget = self.widget
        if isinstance(widget, QCheckBox):
            widget.setChecked(bool(value))
        elif isinstance(widget, QSpinBox):
            widget.setValue(int(value))
        elif isinstance(widget, QComboBox):
            index = widget.findData(value) if self.name.endswith(_AGENT_SUFFIX) else -1
            widget.setCurrentIndex(index if index >= 0 else widget.findText(str(value)))
        elif isinstance(widget, QLineEdit):
            widget.setText(_default_text(value))

    def check(self) -> str | None:
        """Why the value is refused (in the manager's words), or None when it is acceptable."""
        try:
            value = coerce_value(self.field, self.value())
        except ValueError as exc:
            return str(exc)
        if self.field.type == "symbols" and self._symbols and value:
            unknown = [s for s in value if s not in self._symbols]
            if unknown:
                return (f"lists {', '.join(unknown)}, which the market data does not have; "
                        f"available: {', '.join(self._symbols)}")
        return None

    def validate(self) -> str | None:
        """Check the value and mark the field; returns the sentence shown (None when valid)."""
        reason = self.check()
        self.show_error(None if reason is None else f"{self.label.text()} {reason}")
        return self.error

    def show_error(self, sentence: str | None) -> None:
        """Show ``sentence`` in red under the field, or its help text again when None."""
        self.error = sentence
        if sentence is None:
            self.help.setText(self.help_text)
            set_look(self.help, "muted")
            set_look(self.label, "")
        else:
            self.help.setText(sentence)
            set_look(self.help, "error")
            set_look(self.label, "error")
        font = self.label.font()
        font.setBold(sentence is not None)
        self.label.setFont(font)


class ConfigForm(QWidget):
    """One editor per config field of ``template``, in the template's order."""

    def __init__(
        self,
        template: AgentTemplate,
        agents: Sequence[AgentInfo] = (),
        symbols: Sequence[str] = (),
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.template = template
        layout = QFormLayout(self)
        layout.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        layout.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        layout.setVerticalSpacing(8)
        self.editors: dict[str, FieldEditor] = {}
        for name, field in template.config.items():
            editor = FieldEditor(name, field, agents, symbols)
            cell = QWidget()
            column = QVBoxLayout(cell)
            column.setContentsMargins(0, 0, 0, 0)
            column.setSpacing(2)
            column.addWidget(editor.widget)
            column.addWidget(editor.help)
            layout.addRow(editor.label, cell)
            self.editors[name] = editor
        if not self.editors:
            layout.addRow(QLabel("This template has no settings."))

    def values(self) -> dict[str, Any]:
        """Every field's value as entered (unset optional fields included as None)."""
        return {name: editor.value() for name, editor in self.editors.items()}

    def set_value(self, name: str, value: Any) -> None:
        self.editors[name].set_value(value)

    def first_problem(self) -> FieldEditor | None:
        """Check every field; mark each refused one and return the first (to focus it)."""
        first: FieldEditor | None = None
        for editor in self.editors.values():
            if editor.validate() is not None and first is None:
                first = editor
        return first

    def show_error(self, name: str, sentence: str) -> None:
        editor = self.editors.get(name)
        if editor is not None:
            editor.show_error(sentence)
            editor.widget.setFocus()
