"""A form generated from a pydantic model: one widget per field, its description, its error line.

Why generated: the risk limits, the approval policy and the other sections are defined once, with
their types, bounds and descriptions, in the pydantic models the app validates with. A form built
from those models cannot drift from them: a new risk rule appears in the dialog by itself, and the
bounds the dialog enforces are exactly the ones ``load_settings`` enforces. The form does not
validate by itself; it hands back raw values (text as typed) and shows the model's own errors
next to the field they name.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Mapping
from decimal import Decimal
from enum import Enum
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from app.ui.theme import set_look

_WORDS = {"pct": "%", "usd": "(USD)", "s": "(s)", "url": "URL", "llm": "LLM", "api": "API",
          "id": "ID", "bps": "(bps)"}
_ATTRIBUTE = re.compile(r"^\s{4,}(\w+):\s*(.+)$")


def human_name(field: str) -> str:
    """``limit_pct`` -> ``Limit %``; ``timeout_s`` -> ``Timeout (s)``."""
    words = [_WORDS.get(w, w) for w in field.split("_")]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """The ``Attributes:`` section of a model's docstring, as field -> sentence."""
    found: dict[str, str] = {}
    inside = False
    last = ""
    for line in inspect.cleandoc(model.__doc__ or "").splitlines():
        if line.strip() == "Attributes:":
            inside = True
            continue
        if not inside:
            continue
        match = _ATTRIBUTE.match(line)
        if match and not line.startswith(" " * 8):
            last = match.group(1)
            found[last] = match.group(2).strip()
        elif line.startswith(" " * 8) and last:
            found[last] += " " + line.strip()
        elif line.strip():
            inside = False
    return found


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            return args[0], True
    return annotation, False


def _model_class(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) \
        else None


def _describe(
    name: str, info: FieldInfo, docs: Mapping[str, str], explicit: Mapping[str, str]
) -> str:
    """The field's description; for a nested model, its own docstring, then the parent's note."""
    if name in explicit:
        return explicit[name]
    if info.description:
        return info.description
    parts = []
    nested = _model_class(_strip_optional(info.annotation)[0])
    own = nested.__dict__.get("__doc__") if nested is not None else None
    if own:
        parts.append(inspect.cleandoc(own).split("\n\n")[0].replace("\n", " "))
    if name in docs:
        parts.append(docs[name] if not parts else f"Default: {docs[name]}")
    return " ".join(parts)


def _bounds(info: FieldInfo) -> str:
    parts = []
    for item in info.metadata:
        for attr, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(f"{sign} {value}")
    return ", ".join(parts)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, list | tuple):
        return ", ".join(_text(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_text(v)}" for k, v in value.items())
    return str(value)


class _Field:
    """One leaf field: its widget, how to read it, and its error label."""

    def __init__(self, name: str, annotation: Any, widget: QWidget, error: QLabel) -> None:
        self.name = name
        self.annotation, self.optional = _strip_optional(annotation)
        self.widget = widget
        self.error = error

    def raw(self) -> Any:
        w = self.widget
        if isinstance(w, QCheckBox):
            return w.isChecked()
        if isinstance(w, QComboBox):
            return w.currentData()
        assert isinstance(w, QLineEdit)
        text = w.text().strip()
        origin = typing.get_origin(self.annotation)
        if origin in (tuple, list, set, frozenset):
            return [part.strip() for part in text.split(",") if part.strip()]
        if origin in (dict, Mapping):
            out: dict[str, str] = {}
            for part in (p.strip() for p in text.split(",") if p.strip()):
                key, sep, value = part.partition("=")
                out[key.strip()] = value.strip() if sep else ""
            return out
        if not text and self.optional:
            return None
        return text


class ModelForm(QWidget):
    """Widgets for every field of ``model``; nested models become titled groups.

    Args:
        model: the pydantic model class (e.g. ``RiskConfig``).
        value: the current instance, or ``None`` for the model's defaults (a section not set yet
            uses no defaults for required fields: the boxes start empty).
        docs: extra descriptions by field name (e.g. each risk rule's own docstring).
    """

    def __init__(
        self, model: type[BaseModel], value: BaseModel | None = None,
        parent: QWidget | None = None, *, nested_level: int = 0,
        docs: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(parent)
        self.model = model
        self._fields: dict[str, _Field] = {}
        self._children: dict[str, ModelForm] = {}
        explicit = dict(docs or {})
        docs = attribute_docs(model)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        outer.addLayout(form)
        for name, info in model.model_fields.items():
            annotation, optional = _strip_optional(info.annotation)
            current = getattr(value, name) if value is not None else (
                None if info.is_required() else info.get_default(call_default_factory=True))
            description = _describe(name, info, docs, explicit)
            nested = _model_class(annotation)
            if nested is not None and not optional:
                box = QGroupBox(human_name(name))
                box.setObjectName(f"group_{name}")
                inner = QVBoxLayout(box)
                if description:
                    note = QLabel(description)
                    note.setWordWrap(True)
                    set_look(note, "muted")
                    inner.addWidget(note)
                child = ModelForm(nested, current, box, nested_level=nested_level + 1)
                inner.addWidget(child)
                outer.addWidget(box)
                self._children[name] = child
                continue
            widget = self._widget_for(name, annotation, optional, current, info)
            error = QLabel()
            error.setObjectName(f"error_{name}")
            error.setWordWrap(True)
            set_look(error, "error")
            error.hide()
            cell = QWidget()
            column = QVBoxLayout(cell)
            column.setContentsMargins(0, 0, 0, 4)
            column.setSpacing(2)
            column.addWidget(widget)
            hint = " ".join(x for x in (description, f"({_bounds(info)})" if _bounds(info)
                                        else "") if x)
            if hint:
                note = QLabel(hint)
                note.setWordWrap(True)
                note.setStyleSheet("font-size: 11px;")
                set_look(note, "muted")
                column.addWidget(note)
                widget.setToolTip(hint)
            column.addWidget(error)
            form.addRow(human_name(name), cell)
            self._fields[name] = _Field(name, info.annotation, widget, error)
        if nested_level == 0:
            outer.addStretch(1)

    def _widget_for(
        self, name: str, annotation: Any, optional: bool, current: Any, info: FieldInfo
    ) -> QWidget:
        widget: QWidget
        if annotation is bool:
            box = QCheckBox()
            box.setChecked(bool(current))
            widget = box
        elif typing.get_origin(annotation) is typing.Literal or (
            isinstance(annotation, type) and issubclass(annotation, Enum)
        ):
            combo = QComboBox()
            choices = typing.get_args(annotation) if typing.get_origin(annotation) \
                is typing.Literal else [m.value for m in annotation]
            for choice in choices:
                combo.addItem(str(choice), choice)
            index = combo.findData(current.value if isinstance(current, Enum) else current)
            combo.setCurrentIndex(max(index, 0))
            widget = combo
        else:
            edit = QLineEdit(_text(current))
            origin = typing.get_origin(annotation)
            if origin in (tuple, list, set, frozenset):
                edit.setPlaceholderText("comma-separated; empty for none")
            elif origin in (dict, Mapping):
                edit.setPlaceholderText("name=value, name=value")
            elif optional:
                edit.setPlaceholderText("empty: not set")
            widget = edit
        widget.setObjectName(f"field_{name}")
        return widget

    # -- reading and errors --------------------------------------------------------------------
    def raw(self) -> dict[str, Any]:
        """The values as entered (text for numbers), nested models as mappings."""
        out: dict[str, Any] = {name: field.raw() for name, field in self._fields.items()}
        for name, child in self._children.items():
            out[name] = child.raw()
        return out

    def widget(self, path: str) -> QWidget:
        """The editor of a field by dotted path (``max_position_weight.limit_pct``)."""
        head, _, rest = path.partition(".")
        if rest:
            return self._children[head].widget(rest)
        return self._fields[head].widget

    def error_label(self, path: str) -> QLabel:
        head, _, rest = path.partition(".")
        if rest:
            return self._children[head].error_label(rest)
        return self._fields[head].error

    def clear_errors(self) -> None:
        for field in self._fields.values():
            field.error.clear()
            field.error.hide()
        for child in self._children.values():
            child.clear_errors()

    def show_error(self, loc: tuple[str | int, ...], message: str) -> bool:
        """Put ``message`` under the field ``loc`` names (or its nearest parent field)."""
        if not loc:
            return False
        head = str(loc[0])
        if head in self._children:
            return self._children[head].show_error(loc[1:], message)
        field = self._fields.get(head)
        if field is None:
            return False
        text = field.error.text()
        field.error.setText(f"{text}\n{message}" if text else message)
        field.error.show()
        return True

    def error_texts(self) -> list[str]:
        found = [f.error.text() for f in self._fields.values() if f.error.text()]
        for child in self._children.values():
            found.extend(child.error_texts())
        return found
