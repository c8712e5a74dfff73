"""The agent panel's and dialog's style sheet: the panels' dark desk look plus what they add.

``panel_stylesheet`` styles every ``QWidget``'s background, and once a widget has a style sheet Qt
draws its scroll bars and check boxes through it too; left unstyled they come out as white outlines
or a bare tick on the dark background. (Spin boxes keep the application style: styling them would
also mean drawing their arrows.) The toolbar's buttons and the destructive Delete are styled here
as well, all from the shared ``COLORS``.
"""

from __future__ import annotations

from app.ui.panels.style import COLORS, panel_stylesheet


def agents_stylesheet() -> str:
    c = COLORS
    return panel_stylesheet() + f"""
    QToolBar {{ border: 0; spacing: 4px; background: transparent; }}
    QToolBar::separator {{ background: {c['border']}; width: 1px; margin: 4px 4px; }}
    QToolButton {{
        background: {c['panel_alt']}; border: 1px solid {c['border']};
        border-radius: 3px; padding: 3px 10px;
    }}
    QToolButton:hover {{ border-color: {c['accent']}; }}
    QToolButton:disabled {{ color: {c['muted']}; background: {c['panel']}; }}
    QToolButton#delete:enabled {{ color: {c['down']}; }}
    QToolButton#qt_toolbar_ext_button {{ padding: 0; min-width: 16px; }}
    QScrollBar {{ background: {c['panel']}; border: 0; }}
    QScrollBar:vertical {{ width: 10px; }}
    QScrollBar:horizontal {{ height: 10px; }}
    QScrollBar::handle {{ background: {c['border']}; border-radius: 4px; margin: 2px; }}
    QScrollBar::handle:hover {{ background: {c['muted']}; }}
    QScrollBar::handle:vertical {{ min-height: 24px; }}
    QScrollBar::handle:horizontal {{ min-width: 24px; }}
    QScrollBar::add-line, QScrollBar::sub-line {{ width: 0; height: 0; }}
    QScrollBar::add-page, QScrollBar::sub-page {{ background: none; }}
    QCheckBox {{ background: transparent; spacing: 6px; }}
    QCheckBox::indicator {{
        width: 12px; height: 12px; border: 1px solid {c['muted']}; border-radius: 2px;
        background: {c['panel']};
    }}
    QCheckBox::indicator:hover {{ border-color: {c['accent']}; }}
    QCheckBox::indicator:checked {{
        background: {c['accent']}; border-color: {c['accent']};
    }}
    QLineEdit, QComboBox {{ padding: 2px 4px; }}
    QMenu {{ background: {c['panel_alt']}; border: 1px solid {c['border']}; }}
    QMenu::item {{ padding: 4px 18px; }}
    QMenu::item:selected {{ background: {c['selection']}; }}
    QMenu::item:disabled {{ color: {c['muted']}; }}
    QMenu::separator {{ height: 1px; background: {c['border']}; margin: 3px 6px; }}
    """
