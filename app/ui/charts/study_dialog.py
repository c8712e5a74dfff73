"""The dialog that edits an indicator's parameters on the chart.

One field per parameter, with its range and meaning beside it. The text typed is read by the
catalogue's own ``bind_params``, the very check an agent's ``calculate_technical_indicator`` call
passes, so a value the chart takes is one the tools take, and a wrong one is refused with the same
words (named, the field marked, the dialog left open); nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from app.domain.errors import InvalidParameterError
from app.indicators.model import IndicatorDef, bind_params, format_number
from app.ui.panels.style import set_banner
from app.ui.theme import set_look


class StudyDialog(QDialog):
    """Edit ``indicator``'s parameters, starting from ``params``; ``values`` once accepted."""

    def __init__(
        self, indicator: IndicatorDef, params: Mapping[str, int | float],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("studyDialog")
        self.indicator = indicator
        self.values: dict[str, int | float] = dict(params)
        self.setWindowTitle(f"{indicator.name} parameters")
        root = QVBoxLayout(self)
        about = QLabel(indicator.description)
        about.setWordWrap(True)
        set_look(about, "muted")
        root.addWidget(about)
        form = QFormLayout()
        self.fields: dict[str, QLineEdit] = {}
        for param in indicator.params:
            edit = QLineEdit(format_number(params.get(param.name, param.default)))
            edit.setObjectName(f"study_{param.name}")
            kind = "a whole number" if param.kind is int else "a number"
            edit.setToolTip(f"{param.description} ({kind} from {format_number(param.minimum)} "
                            f"to {format_number(param.maximum)}; default "
                            f"{format_number(param.default)})")
            edit.setPlaceholderText(f"{format_number(param.minimum)} to "
                                    f"{format_number(param.maximum)}")
            edit.textEdited.connect(lambda _text: self.error.hide())
            self.fields[param.name] = edit
            form.addRow(param.name, edit)
        if not indicator.params:
            form.addRow(QLabel(f"{indicator.name} has no parameters."))
        root.addLayout(form)
        self.error = QLabel("")
        self.error.setObjectName("studyError")
        self.error.setWordWrap(True)
        self.error.hide()
        root.addWidget(self.error)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.apply)
        buttons.rejected.connect(self.reject)
        root.addWidget(buttons)
        self.setMinimumWidth(360)

    def apply(self) -> None:
        """Read the fields through the catalogue; accept, or say what is wrong and stay."""
        for edit in self.fields.values():
            set_look(edit, "")
        try:
            self.values = bind_params(
                self.indicator, {name: edit.text() for name, edit in self.fields.items()})
        except InvalidParameterError as exc:
            set_banner(self.error, "error")
            self.error.setText(exc.message)
            self.error.show()
            name = str(exc.details.get("parameter", ""))
            edit = self.fields.get(name)
            if edit is not None:
                set_look(edit, "error")
                edit.setFocus()
            return
        self.accept()
