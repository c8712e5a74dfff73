"""The theme as a person sees it: every panel of the window, every label readable, in the dark
and the light theme, after a switch from Settings and back, and after a restart; check boxes
that can be seen before they are ticked.

The checks read screenshots of the real window (``QWidget.grab``): a panel's ground is measured
in its pixels, and a label's text colour is compared with the ground it is drawn on (WCAG's
contrast ratio; 3:1 is its floor for text a person must read at a glance).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from keyring.backends import fail
from PySide6.QtCore import QPoint, QRect, QSettings, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import (
    QCheckBox,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QStyle,
    QStyleOptionButton,
    QStyleOptionViewItem,
    QWidget,
)

from app.secrets import SecretStore
from app.ui.main_window import MainWindow
from app.ui.settings import SettingsDialog
from app.ui.settings.prefs import UiPrefs
from app.ui.theme import apply_theme, palette
from app.workspace import Workspace
from tests.helpers.eventually import eventually
from tests.ui.desk import Desk, on_screen

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")
MIN_CONTRAST = 3.0


def luminance(colour: QColor) -> float:
    def channel(value: float) -> float:
        return value / 12.92 if value <= 0.03928 else ((value + 0.055) / 1.055) ** 2.4

    return (0.2126 * channel(colour.redF()) + 0.7152 * channel(colour.greenF())
            + 0.0722 * channel(colour.blueF()))


def contrast(a: QColor, b: QColor) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def ground(image: QImage, rect: QRect) -> QColor:
    """The colour most pixels of ``rect`` have: what text in it is drawn on."""
    rect = rect.intersected(image.rect())
    step = max(1, min(rect.width(), rect.height()) // 12)
    counts = Counter(image.pixel(x, y) for x in range(rect.left(), rect.right() + 1, step)
                     for y in range(rect.top(), rect.bottom() + 1, step))
    return QColor.fromRgb(counts.most_common(1)[0][0])


def in_window(widget: QWidget, window: QWidget) -> QRect:
    return QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())


def assert_follows(window: MainWindow, theme: str, shots: Path) -> None:
    """Every panel on screen has the theme's ground, and every label on screen can be read."""
    image = window.grab().toImage()
    image.save(str(shots / f"window-{theme}.png"))
    light = theme == "light"
    parts = {key: dock.widget() for key, dock in window.docks.items() if on_screen(dock)}
    parts["chart"] = window.panels["chart"]
    parts["banner"] = window.banner
    for name, widget in parts.items():
        level = luminance(ground(image, in_window(widget, window)))
        assert (level > 0.6) if light else (level < 0.1), f"{name} is not {theme}: {level:.2f}"
    unreadable = []
    for label in window.findChildren(QLabel):
        if not label.text().strip() or not label.isVisible() or label.visibleRegion().isEmpty():
            continue
        rect = label.visibleRegion().boundingRect().translated(label.mapTo(window, QPoint(0, 0)))
        back = ground(image, rect)
        text = label.palette().color(label.foregroundRole())
        if contrast(text, back) < MIN_CONTRAST:
            unreadable.append(f"{label.objectName() or type(label).__name__} "
                              f"{label.text()[:30]!r}: {text.name()} on {back.name()}")
    assert not unreadable, "\n".join(unreadable)


def switch_in_settings(window: MainWindow, theme: str, qtbot) -> None:
    """Appearance → theme → Save, as a person does it."""
    window.open_settings()
    dialog = window.findChildren(SettingsDialog)[-1]
    dialog.appearance_page.buttons[theme].setChecked(True)
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert f"the {theme} theme" in dialog.banner.text()
    dialog.close()


def test_every_panel_follows_the_theme_switched_in_settings_and_after_a_restart(
    desk: Desk, qapp, qtbot, tmp_path: Path
) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        await eventually(lambda: window.panels["chart"].series is not None)
        assert_follows(window, "dark", tmp_path)

        switch_in_settings(window, "light", qtbot)
        await eventually(lambda: palette().name == "light")
        assert_follows(window, "light", tmp_path)

        switch_in_settings(window, "dark", qtbot)  # and back: no dark text left on dark
        assert_follows(window, "dark", tmp_path)

        switch_in_settings(window, "light", qtbot)
        await desk.close(window)
        apply_theme(qapp, "dark")  # a new process starts dark until it reads the preference
        prefs = UiPrefs(QSettings(desk.settings_file, QSettings.Format.IniFormat))
        apply_theme(qapp, prefs.theme)  # what app.ui.app does before the window is built
        again = await desk.open()
        await eventually(lambda: again.panels["chart"].series is not None)
        assert_follows(again, "light", tmp_path)

    desk.run(scenario)


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_an_unticked_check_box_can_be_seen(qapp, qtbot, tmp_path: Path, theme: str) -> None:
    apply_theme(qapp, theme)
    root = QWidget()
    qtbot.addWidget(root)
    box = QCheckBox("Send notifications by e-mail", root)
    items = QListWidget(root)
    item = QListWidgetItem("BTC/USD 1h")
    item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
    item.setCheckState(Qt.CheckState.Unchecked)
    items.addItem(item)
    box.setGeometry(10, 10, 260, 24)
    items.setGeometry(10, 50, 260, 60)
    root.resize(300, 120)
    root.show()
    qtbot.waitExposed(root)
    image = root.grab().toImage()
    image.save(str(tmp_path / f"check-boxes-{theme}.png"))
    option = QStyleOptionButton()
    box.initStyleOption(option)
    indicator = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, box)
    view_option = QStyleOptionViewItem()
    items.initViewItemOption(view_option)
    view_option.rect = items.visualItemRect(item)
    view_option.features |= QStyleOptionViewItem.ViewItemFeature.HasCheckIndicator
    item_indicator = items.style().subElementRect(
        QStyle.SubElement.SE_ItemViewItemCheckIndicator, view_option, items)
    for name, area in (
        ("check box", indicator.translated(box.pos())),
        ("list item's box", item_indicator.translated(items.viewport().mapTo(root, QPoint()))),
    ):
        back = ground(image, area.adjusted(-3, -3, 3, 3))
        strongest = max(contrast(QColor(image.pixel(x, y)), back)
                        for x in range(area.left(), area.right() + 1)
                        for y in range(area.top(), area.bottom() + 1))
        assert strongest >= MIN_CONTRAST, f"the {name}'s outline: {strongest:.2f}:1 in {theme}"


def test_a_window_built_in_the_light_theme_has_no_dark_panel(desk: Desk, qapp, tmp_path) -> None:
    apply_theme(qapp, "light")

    async def scenario() -> None:
        window = await desk.open()
        await eventually(lambda: window.panels["chart"].series is not None)
        assert_follows(window, "light", tmp_path)

    desk.run(scenario)


def test_the_settings_dialog_follows_the_theme(qapp, qtbot, tmp_path: Path) -> None:
    apply_theme(qapp, "light")
    prefs = UiPrefs(QSettings(str(tmp_path / "ui.ini"), QSettings.Format.IniFormat))
    dialog = SettingsDialog(Workspace(tmp_path / "ws").ensure(),
                            SecretStore(backend=fail.Keyring(), environ={}), prefs)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    for page in dialog.pages:
        dialog.nav.setCurrentRow(dialog.pages.index(page))
        image = dialog.grab().toImage()
        assert luminance(ground(image, dialog.stack.geometry())) > 0.6, page.title
        for label in page.findChildren(QLabel):
            if label.isVisible() and label.text().strip() and not label.visibleRegion().isEmpty():
                rect = label.visibleRegion().boundingRect().translated(
                    label.mapTo(dialog, QPoint(0, 0)))
                text = label.palette().color(label.foregroundRole())
                assert contrast(text, ground(image, rect)) >= MIN_CONTRAST, label.text()[:40]
    dialog.close()


def test_a_banner_look_given_after_the_label_was_shown_gets_its_padding(qapp, qtbot) -> None:
    from app.ui.theme import set_look

    root = QWidget()
    qtbot.addWidget(root)
    label = QLabel("Trading halted", root)
    label.setWordWrap(True)
    root.show()
    qtbot.waitExposed(root)
    assert label.contentsRect().left() == 0
    set_look(label, "error-banner")
    # the sheet's border (4 px) and padding (8 px): the text starts clear of the border
    assert label.contentsRect().left() == 12 and label.contentsRect().top() == 6
