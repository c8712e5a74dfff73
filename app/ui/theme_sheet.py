"""The application style sheet of a theme: every widget's look, in one sheet set on the app.

Why one sheet on the application rather than sheets on panels: a sheet set on a widget keeps the
colours it was written with, so a theme switch left those panels in the old theme (and light
labels on a light ground). Here every rule reads the theme it is built for and ``apply_theme``
sets the whole sheet again. Widgets are styled by type, by object name (the chat's cards) or by a
``look`` property (``set_look``: ``muted``, ``up``, ``down``, ``error-banner``…), never by a
colour of their own. Qt indexes rules by type and object name, so a long sheet costs little per
widget. Combo and spin boxes keep the Fusion style (styling them would mean drawing their
arrows); scroll bars, check boxes and radio buttons are styled because Fusion's own, on a dark
ground, are faint outlines.
"""

from __future__ import annotations

from app.ui.theme_colors import Theme


def style_sheet(t: Theme) -> str:
    return _base(t) + _looks(t) + _panels(t) + _chat(t) + _chat_cards(t) + _chat_controls(t)


def _base(t: Theme) -> str:
    return f"""
QMainWindow, QDialog {{ background: {t.background}; }}
QToolTip {{ background: {t.raised}; color: {t.text}; border: 1px solid {t.border}; }}
QDockWidget {{ color: {t.text}; }}
QDockWidget::title {{ background: {t.panel}; padding: 4px 8px;
    border-bottom: 1px solid {t.border}; }}
QMenuBar {{ background: {t.background}; color: {t.text}; }}
QMenuBar::item:selected {{ background: {t.selection}; }}
QMenu {{ background: {t.panel_alt}; color: {t.text}; border: 1px solid {t.border}; }}
QMenu::item {{ padding: 4px 18px; }}
QMenu::item:selected {{ background: {t.selection}; }}
QMenu::item:disabled {{ color: {t.muted}; }}
QMenu::separator {{ height: 1px; background: {t.border}; margin: 3px 6px; }}
QToolBar {{ background: {t.panel}; border-bottom: 1px solid {t.border}; spacing: 6px; }}
QStatusBar {{ background: {t.panel}; color: {t.text}; border-top: 1px solid {t.border}; }}
QTableView, QTreeView, QListView, QTextBrowser, QPlainTextEdit, QTextEdit, QLineEdit {{
    background: {t.panel}; color: {t.text}; border: 1px solid {t.border};
    selection-background-color: {t.selection}; selection-color: {t.text};
}}
QTableView, QListView, QTreeView {{ alternate-background-color: {t.panel_alt}; }}
QTableView {{ gridline-color: {t.grid}; }}
QHeaderView {{ background: {t.panel_alt}; }}
QHeaderView::section {{ background: {t.panel_alt}; color: {t.muted}; border: 0;
    border-right: 1px solid {t.border}; padding: 3px 6px; }}
QTableCornerButton::section {{ background: {t.panel_alt}; border: 0; }}
QPushButton {{ background: {t.raised}; color: {t.text}; border: 1px solid {t.border};
    border-radius: 4px; padding: 4px 10px; }}
QPushButton:hover {{ border-color: {t.accent}; }}
QPushButton:disabled {{ color: {t.muted}; }}
QToolButton {{ background: {t.panel_alt}; color: {t.text}; border: 1px solid {t.border};
    border-radius: 3px; padding: 3px 8px; }}
QToolButton:hover {{ border-color: {t.accent}; }}
QToolButton:disabled {{ color: {t.muted}; background: {t.panel}; }}
QToolButton#qt_toolbar_ext_button {{ padding: 0; min-width: 16px; }}
QTabBar QToolButton {{ padding: 0; }}
QToolBar::separator {{ background: {t.border}; width: 1px; margin: 4px 4px; }}
QTabBar::tab {{ background: {t.panel}; color: {t.muted}; padding: 4px 12px;
    border: 1px solid {t.border}; border-bottom: 0; }}
QTabBar::tab:selected {{ background: {t.raised}; color: {t.text};
    border-top: 2px solid {t.accent}; }}
QTabWidget::pane {{ border: 1px solid {t.border}; }}
QSplitter::handle {{ background: {t.border}; }}
QGroupBox {{ color: {t.text}; border: 1px solid {t.border}; border-radius: 4px;
    margin-top: 14px; padding-top: 6px; }}
QGroupBox::title {{ subcontrol-origin: margin; left: 8px; padding: 0 4px; }}
QProgressBar {{ background: {t.panel}; color: {t.text}; border: 1px solid {t.border};
    border-radius: 3px; text-align: center; }}
QProgressBar::chunk {{ background: {t.accent}; }}
QScrollBar {{ background: {t.panel}; border: 0; }}
QScrollBar:vertical {{ width: 10px; margin: 0; }}
QScrollBar:horizontal {{ height: 10px; margin: 0; }}
QScrollBar::handle {{ background: {t.border}; border-radius: 4px; margin: 2px; }}
QScrollBar::handle:hover {{ background: {t.muted}; }}
QScrollBar::handle:vertical {{ min-height: 24px; }}
QScrollBar::handle:horizontal {{ min-width: 24px; }}
QScrollBar::add-line, QScrollBar::sub-line {{ width: 0; height: 0; }}
QScrollBar::add-page, QScrollBar::sub-page {{ background: none; }}
QCheckBox, QRadioButton {{ color: {t.text}; spacing: 6px; }}
QCheckBox::indicator, QAbstractItemView::indicator {{
    width: 12px; height: 12px; border: 1px solid {t.muted}; border-radius: 2px;
    background: {t.panel};
}}
QRadioButton::indicator {{ width: 12px; height: 12px; border: 1px solid {t.muted};
    border-radius: 7px; background: {t.panel}; }}
QCheckBox::indicator:hover, QRadioButton::indicator:hover,
QAbstractItemView::indicator:hover {{ border-color: {t.accent}; }}
QCheckBox::indicator:checked, QAbstractItemView::indicator:checked {{
    background: {t.accent}; border-color: {t.accent};
}}
QRadioButton::indicator:checked {{ background: {t.accent}; border-color: {t.accent}; }}
QCheckBox::indicator:disabled, QRadioButton::indicator:disabled {{
    border-color: {t.border}; background: {t.panel_alt}; }}
QListWidget#settings_nav {{ font-size: 13px; }}
QListWidget#settings_nav::item {{ padding: 6px 8px; }}
"""


def _looks(t: Theme) -> str:
    """The ``look`` property's values: a word for a text colour, ``<kind>-banner`` for a strip."""
    colours = {"muted": t.muted, "text": t.text, "up": t.up, "down": t.down, "error": t.down,
               "ok": t.up, "warning": t.warning, "accent": t.accent}
    rules = [f'*[look="{name}"] {{ color: {colour}; }}' for name, colour in colours.items()]
    banners = {"error": (t.error_bg, t.down), "warning": (t.warning_bg, t.warning),
               "info": (t.info_bg, t.accent), "ok": (t.ok_bg, t.up)}
    rules += [
        f'QLabel[look="{kind}-banner"] {{ background: {back}; color: {t.text}; '
        f"border-left: 4px solid {edge}; padding: 6px 8px; }}"
        for kind, (back, edge) in banners.items()
    ]
    return "\n".join(rules) + "\n"


def _panels(t: Theme) -> str:
    """Named parts of the panels (the desk's banner, the account's cards, buttons with a role)."""
    return f"""
QLabel#banner {{ background: {t.raised}; color: {t.text}; padding: 6px 10px;
    border-bottom: 1px solid {t.border}; }}
QLabel#estimate {{ background: {t.raised}; color: {t.text}; padding: 6px 8px;
    border-left: 3px solid {t.accent}; }}
QFrame#card, QFrame#about {{ background: {t.panel}; border: 1px solid {t.border};
    border-radius: 4px; }}
QFrame#card QLabel, QFrame#about QLabel {{ border: 0; background: transparent; }}
QToolButton#delete:enabled {{ color: {t.down}; }}
QToolButton#killSwitch {{ background: {t.down}; color: #ffffff; border: 1px solid {t.down};
    font-weight: bold; padding: 3px 12px; }}
QToolButton#killSwitch:hover {{ border-color: {t.text}; }}
QToolButton#killSwitch[look="tripped"] {{ background: {t.error_bg}; color: {t.text};
    border: 2px solid {t.down}; }}
QFrame#killBanner {{ background: {t.error_bg}; border-top: 2px solid {t.down};
    border-bottom: 2px solid {t.down}; }}
QFrame#killBanner QLabel {{ background: transparent; color: {t.text}; }}
QFrame#killBanner QLabel#killBannerTitle {{ color: {t.down}; font-weight: bold;
    font-size: 11pt; }}
QFrame#alertBanner {{ background: {t.error_bg}; border-bottom: 2px solid {t.down}; }}
QFrame#alertBanner QLabel {{ background: transparent; color: {t.text}; }}
QFrame#alertBanner QLabel#alertBannerTitle {{ color: {t.down}; font-weight: bold; }}
QLabel#statusHalted {{ background: {t.down}; color: #ffffff; font-weight: bold;
    border-radius: 3px; }}
QLabel#killDialogTitle {{ font-weight: bold; font-size: 12pt; }}
QPushButton#killConfirm, QPushButton#killResetConfirm:enabled {{ background: {t.down};
    color: #ffffff; border: 1px solid {t.down}; font-weight: bold; }}
QPushButton#tradeConfirm {{ background: {t.down}; color: #ffffff; border: 1px solid {t.down};
    font-weight: bold; }}
QPushButton#ticketBuy, QPushButton#ticketSell {{ min-height: 22px; font-weight: bold; }}
QPushButton#ticketBuy:checked {{ background: {t.up}; color: #ffffff; border-color: {t.up}; }}
QPushButton#ticketSell:checked {{ background: {t.down}; color: #ffffff; border-color: {t.down}; }}
QPushButton#ticketGo {{ font-weight: bold; min-width: 90px; }}
"""


def _chat(t: Theme) -> str:
    """The chat's cards, by object name and a ``tone`` property (see ``app.ui.chat.style``)."""
    return f"""
QWidget#chatPanel {{ background: {t.background}; color: {t.text}; }}
QWidget#chatPanel QLabel {{ background: transparent; }}
QScrollArea#transcript, QWidget#transcriptBody {{ background: {t.background}; border: 0; }}
QFrame#header {{ background: {t.panel}; border-bottom: 1px solid {t.border}; }}
QComboBox#agentPicker {{
    background: transparent; border: 1px solid transparent; border-radius: 4px;
    padding: 2px 6px; min-height: 22px; font-size: 12pt; font-weight: bold; color: {t.text};
}}
QComboBox#agentPicker:hover, QComboBox#agentPicker:on {{
    background: {t.panel_alt}; border-color: {t.border};
}}
QComboBox#agentPicker::drop-down {{ border: 0; width: 22px; }}
QComboBox#agentPicker::down-arrow {{ image: none; width: 0; height: 0; border: 0; }}
QComboBox#agentPicker:hover {{ border-color: {t.accent}; }}
QComboBox#agentPicker QAbstractItemView {{
    background: {t.panel}; border: 1px solid {t.border};
    selection-background-color: {t.selection}; font-size: 10pt; font-weight: normal;
}}
QLabel#muted, QLabel#meta, QLabel#who, QLabel#typingText {{ color: {t.muted}; }}
QLabel#who {{ font-weight: bold; }}
QLabel#answerText, QLabel#questionText {{ color: {t.text}; }}
QLabel#personText {{ color: {t.person_text}; }}
QLabel#thinking {{ color: {t.muted}; font-style: italic; padding: 2px 0 2px 8px;
    border-left: 2px solid {t.border}; }}
QLabel#notice {{ color: {t.muted}; font-style: italic; }}
QLabel#toolName {{ font-weight: bold; color: {t.text}; }}
QLabel#chip {{ background: {t.panel_alt}; border: 1px solid {t.border};
    border-radius: 3px; padding: 1px 5px; color: {t.text}; }}
QLabel#taskType {{ font-weight: bold; color: {t.accent}; }}
QLabel#questionTitle {{ font-weight: bold; color: {t.accent}; }}
QFrame#question[tone="approval"] QLabel#questionTitle {{ color: {t.warning}; }}
QFrame#question[tone="answered"] QLabel#questionTitle {{ color: {t.muted}; }}
QWidget#chatPanel QLabel#liveTag {{ background: {t.down}; color: #ffffff; font-weight: bold;
    padding: 0 5px; }}
QLabel#glyph {{ font-weight: bold; color: {t.muted}; }}
QLabel#glyph[tone="success"] {{ color: {t.up}; }}
QLabel#glyph[tone="error"] {{ color: {t.down}; }}
QLabel#glyph[tone="rejected"] {{ color: {t.rejected}; }}
QLabel#glyph[tone="awaiting approval"] {{ color: {t.warning}; }}
QLabel#problemTitle {{ font-weight: bold; color: {t.down}; }}
QLabel#problemTitle[tone="rejected"] {{ color: {t.rejected}; }}
QLabel#stateDot, QLabel#state {{ color: {t.muted}; }}
QLabel#state {{ font-weight: bold; }}
QLabel#stateDot[tone="running"], QLabel#state[tone="running"] {{ color: {t.up}; }}
QLabel#stateDot[tone="paused"], QLabel#state[tone="paused"] {{ color: {t.warning}; }}
QLabel#stateDot[tone="waiting_for_user"], QLabel#state[tone="waiting_for_user"] {{
    color: {t.accent}; }}
QLabel#stateDot[tone="faulted"], QLabel#state[tone="faulted"] {{ color: {t.down}; }}
QLabel#faultReason {{ color: {t.down}; }}
QWidget#chatPanel QScrollBar {{ background: {t.background}; }}
QLabel#meta {{ font-size: 8pt; }}
QLabel#divider {{ color: {t.muted}; font-size: 8pt; }}
QFrame#rule {{ background: {t.border}; max-height: 1px; min-height: 1px; border: 0; }}
"""


def _chat_cards(t: Theme) -> str:
    """The chat's bubbles and cards: the person's, the answers, tasks, tool calls, fills,
    problems and questions, each toned by its ``tone`` property."""
    return f"""
QFrame#person {{ background: {t.person_bubble}; border-radius: 10px; }}
QFrame#answer {{
    background: {t.panel_alt}; border: 1px solid {t.border}; border-radius: 10px;
}}
QFrame#typing {{
    background: {t.panel_alt}; border: 1px dashed {t.border}; border-radius: 10px;
}}
QFrame#taskCard {{
    background: {t.panel}; border: 1px solid {t.border}; border-radius: 6px;
}}
QFrame#toolCard {{
    background: {t.panel}; border: 1px solid {t.border}; border-radius: 6px;
    border-left: 3px solid {t.muted};
}}
QFrame#toolCard[tone="success"] {{ border-left-color: {t.up}; }}
QFrame#toolCard[tone="error"] {{ border-left-color: {t.down}; }}
QFrame#toolCard[tone="awaiting approval"] {{ border-left-color: {t.warning}; }}
QFrame#toolCard[tone="rejected"] {{
    background: {t.rejected_bg}; border: 1px solid {t.rejected_border};
    border-left: 3px solid {t.rejected};
}}
QFrame#fillCard {{
    background: {t.panel}; border: 1px solid {t.border}; border-radius: 6px;
    border-left: 3px solid {t.accent};
}}
QFrame#fillCard[tone="buy"] {{ border-left-color: {t.up}; }}
QFrame#fillCard[tone="sell"] {{ border-left-color: {t.down}; }}
QLabel#fillGlyph[tone="buy"] {{ color: {t.up}; }}
QLabel#fillGlyph[tone="sell"] {{ color: {t.down}; }}
QLabel#fillTitle {{ font-weight: bold; color: {t.text}; }}
QLabel#fillLine {{ color: {t.text}; }}
QLabel#fillPnl {{ font-weight: bold; color: {t.text}; }}
QLabel#fillPnl[tone="up"] {{ color: {t.up}; }}
QLabel#fillPnl[tone="down"] {{ color: {t.down}; }}
QFrame#problem {{ background: {t.error_bg}; border-radius: 4px; }}
QFrame#problem[tone="rejected"] {{ background: {t.rejected_problem_bg}; }}
QFrame#question {{
    background: {t.info_bg}; border: 1px solid {t.accent}; border-radius: 8px;
}}
QFrame#question[tone="approval"] {{ background: {t.warning_bg}; border-color: {t.warning}; }}
QFrame#question[tone="answered"] {{ background: {t.panel}; border-color: {t.border}; }}
QPlainTextEdit#rawXml {{
    background: {t.background}; border: 1px solid {t.border}; border-radius: 4px;
    color: {t.text};
}}
"""


def _chat_controls(t: Theme) -> str:
    """The chat's buttons and its composer."""
    return f"""
QToolButton#toggle {{
    background: transparent; border: 0; color: {t.muted}; padding: 0 2px; font-size: 8pt;
}}
QToolButton#toggle:hover {{ color: {t.text}; }}
QPushButton#reply {{
    background: {t.panel_alt}; border: 1px solid {t.accent}; border-radius: 12px;
    padding: 4px 12px; color: {t.text};
}}
QPushButton#reply:hover {{ background: {t.selection}; }}
QPushButton#reply:disabled {{ border-color: {t.border}; color: {t.muted}; }}
QPushButton#reply:checked {{
    background: {t.accent}; border-color: {t.accent}; color: #ffffff;
}}
QPushButton#loadEarlier {{
    background: {t.panel}; border: 1px solid {t.border}; border-radius: 10px;
    padding: 3px 14px; color: {t.muted};
}}
QPushButton#loadEarlier:hover {{ color: {t.text}; border-color: {t.accent}; }}

QFrame#composer {{ background: {t.panel}; border-top: 1px solid {t.border}; }}
QPlainTextEdit#chatInput {{
    background: {t.panel_alt}; border: 1px solid {t.border}; border-radius: 6px;
    padding: 4px 6px; color: {t.text};
}}
QPlainTextEdit#chatInput:focus {{ border-color: {t.accent}; }}
QPushButton#send {{
    background: {t.accent}; border: 0; border-radius: 6px; color: #ffffff;
    padding: 6px 16px; font-weight: bold;
}}
QPushButton#send:disabled {{ background: {t.panel_alt}; color: {t.muted}; }}
QLabel#inputError {{
    background: {t.error_bg}; color: {t.text}; border-left: 3px solid {t.down};
    padding: 4px 8px;
}}
"""
