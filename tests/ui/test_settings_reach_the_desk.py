"""Settings saved in the window reach the running desk: a risk limit changed in the dialog judges
the very next order, a new fee is charged on the next fill, a language model chosen for new agents
is named in the banner with its training-cutoff warning, and the dialog says plainly what waits
for the next start."""

from __future__ import annotations

from decimal import Decimal

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel

from app.tools.spec import AgentContext
from app.ui.settings import SettingsDialog
from tests.helpers.eventually import eventually
from tests.ui.desk import Desk

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")
BUY = ("<create_order><symbol>{symbol}</symbol><side>BUY</side><quote_amount>{amount}"
       "</quote_amount></create_order>")


def _dialog() -> SettingsDialog:
    (dialog,) = [w for w in QApplication.topLevelWidgets()
                 if isinstance(w, SettingsDialog) and w.isVisible()]
    return dialog


def _type(qtbot, form, path: str, text: str) -> None:
    form.widget(path).clear()
    qtbot.keyClicks(form.widget(path), text)


def test_a_max_position_weight_saved_in_the_dialog_judges_the_next_order(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open()
        world = window.world
        assert world is not None
        symbol = world.venue.market.symbols()[0]
        equity = (await world.venue.broker.account()).equity
        # about 10% of the account: within the default 20% limit, beyond a 5% one
        order = BUY.format(symbol=symbol, amount=(equity / 10).quantize(Decimal(1)))
        trader = AgentContext("settings-test-trader")
        window.open_settings()
        dialog = _dialog()
        _type(desk.qtbot, dialog.risk_page.forms["risk"], "max_position_weight.limit_pct", "5")
        desk.qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        assert "Applied now: risk limits" in dialog.banner.text()
        result = await world.executor.execute_text(trader, order)
        assert result is not None and result.status == "rejected", result.xml if result else ""
        assert result.rule == "max_position_weight"
        assert "limit 5" in result.xml
        _type(desk.qtbot, dialog.risk_page.forms["risk"], "max_position_weight.limit_pct", "50")
        desk.qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: "Applied now: risk limits" in dialog.banner.text())
        again = await world.executor.execute_text(trader, order)
        assert again is not None and again.status == "success", again.xml if again else ""
        dialog.close()

    desk.run(scenario)


def test_the_dialog_says_which_changes_wait_for_the_next_start(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open()
        assert window.world is not None
        broker = window.world.venue.broker
        window.open_settings()
        dialog = _dialog()
        paper = dialog.paper_page.forms["paper"]
        _type(desk.qtbot, paper, "fee_rate", "0.002")
        _type(desk.qtbot, paper, "initial_cash", "5000")
        desk.qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        text = dialog.banner.text()
        assert "Applied now: paper fees and slippage" in text
        assert "Applies at the next start: the paper account's starting cash" in text
        assert broker.fee_taker == Decimal("0.002")  # the next fill pays it
        dialog.close()

    desk.run(scenario)


def test_a_replay_speed_saved_in_the_dialog_moves_the_clock_and_the_toolbar(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open()
        assert window.world is not None and window.replay_bar is not None
        driver, bar = window.world.venue.driver, window.replay_bar
        bar.speed.setCurrentIndex(bar.speed.findData(10.0))  # the person picks 10x first
        assert driver.speed == 10.0
        workspace = window.world.workspace
        # kept in the file
        await eventually(lambda: workspace.settings().agents.replay_speed == 10.0)
        window.open_settings()
        dialog = _dialog()
        _type(desk.qtbot, dialog.risk_page.forms["risk"], "max_position_weight.limit_pct", "30")
        desk.qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        assert "Applied now: risk limits." in dialog.banner.text(), "the speed did not change"
        assert driver.speed == 10.0
        _type(desk.qtbot, dialog.agents_page.forms["agents"], "replay_speed", "600")
        desk.qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        assert "Applied now: replay speed and run budget." in dialog.banner.text()
        assert driver.speed == 600.0 and bar.speed.currentData() == 600.0
        _type(desk.qtbot, dialog.agents_page.forms["agents"], "replay_speed", "120")
        desk.qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        assert driver.speed == 120.0, dialog.banner.text()
        assert bar.speed.currentText() == "120x"
        dialog.close()

    desk.run(scenario)


def test_closing_settings_with_edits_not_saved_asks_naming_the_pages(desk: Desk) -> None:
    """Settings closed without a word, and the edits were gone."""
    async def scenario() -> None:
        window = await desk.open()
        window.open_settings()
        dialog = _dialog()
        assert dialog.unsaved() == [], "nothing edited: nothing to ask"
        form = dialog.risk_page.forms["risk"]
        _type(desk.qtbot, form, "max_position_weight.limit_pct", "7")
        desk.qtbot.keyClick(dialog, Qt.Key.Key_Escape)
        await eventually(lambda: dialog.unsaved_box is not None and dialog.unsaved_box.isVisible())
        box = dialog.unsaved_box
        assert box.informativeText() == "Changed and not saved: Risk limits."
        box.button(box.StandardButton.Cancel).click()  # back to the dialog, edit kept
        await eventually(lambda: dialog.unsaved_box is None)
        assert dialog.isVisible() and form.widget("max_position_weight.limit_pct").text() == "7"

        dialog.reject()  # Close again: this time save
        box = dialog.unsaved_box
        (save,) = [b for b in box.buttons() if b.text() == "Save"]
        save.click()
        await eventually(lambda: not dialog.isVisible())
        assert desk.workspace.settings().risk.max_position_weight.limit_pct == 7

        window.open_settings()
        dialog = _dialog()
        _type(desk.qtbot, dialog.risk_page.forms["risk"], "max_position_weight.limit_pct", "9")
        dialog.reject()
        (discard,) = [b for b in dialog.unsaved_box.buttons() if b.text() == "Discard"]
        discard.click()
        await eventually(lambda: not dialog.isVisible())
        assert desk.workspace.settings().risk.max_position_weight.limit_pct == 7

    desk.run(scenario)


def test_the_logging_page_sets_the_workspaces_log_and_applies_at_once(desk: Desk) -> None:
    """[logging] had no page: its level and rotation could only be set by editing the file."""
    async def scenario() -> None:
        import logging

        before = logging.getLogger().level
        window = await desk.open()
        window.open_settings()
        dialog = _dialog()
        titles = [dialog.nav.item(i).text() for i in range(dialog.nav.count())]
        assert "Logging" in titles
        dialog.nav.setCurrentRow(titles.index("Logging"))
        page = dialog.logging_page
        assert "logs/kestrel.log" in " ".join(
            label.text() for label in page.findChildren(type(dialog.banner)))
        level = page.forms["logging"].widget("level")
        level.setCurrentText("DEBUG")
        _type(desk.qtbot, page.forms["logging"], "backups", "5")
        desk.qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        assert "Applied now: logging" in dialog.banner.text(), dialog.banner.text()
        saved = desk.workspace.settings().logging
        assert (saved.level, saved.backups) == ("DEBUG", 5)
        assert logging.getLogger().getEffectiveLevel() == logging.DEBUG
        logging.getLogger().setLevel(before)  # the next tests log as before
        dialog.close()

    desk.run(scenario)


def test_a_language_model_saved_for_new_agents_is_named_and_warned_of_in_the_banner(
    desk: Desk,
) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        assert "Training cutoff" not in window.banner.text()  # the demo's rule engine
        window.open_settings()
        dialog = _dialog()
        form = dialog.llm_page.forms["llm"]
        form.widget("provider").setCurrentText("openai-compatible")
        _type(desk.qtbot, form, "model", "gpt-4o-mini")
        desk.qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: "new agents on" in window.banner.text())
        banner = window.banner.text()
        assert "new agents on <b>openai-compatible:gpt-4o-mini</b>" in banner
        assert "before gpt-4o-mini's training cutoff (2023-10-31" in banner
        dialog.close()

    desk.run(scenario)


def test_settings_exchanges_in_the_window_offers_replay_or_paper_as_default_never_live(
    desk: Desk,
) -> None:
    """The page said live trading was not built while the window opened ``--venue live``."""
    async def scenario() -> None:
        window = await desk.open()
        window.open_settings()
        dialog = _dialog()
        titles = [dialog.nav.item(i).text() for i in range(dialog.nav.count())]
        dialog.nav.setCurrentRow(titles.index("Exchanges"))
        page = dialog.exchange_page
        words = page.findChild(QLabel, "venues_in_words")
        await eventually(lambda: words.isVisible())
        assert "LIVE is never a default" in words.text() and "--venue live" in words.text()
        assert "not built" not in " ".join(label.text() for label in page.findChildren(QLabel))
        kind = page.forms["venue"].widget("kind")
        assert [kind.itemText(i) for i in range(kind.count())] == ["replay", "live-paper"]
        kind.setCurrentText("live-paper")
        desk.qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        assert dialog.banner.text().startswith("Saved"), dialog.banner.text()
        assert desk.workspace.settings().venue.kind == "live-paper"
        assert window.world is not None and window.world.venue.kind == "replay"  # opened next
        dialog.close()

    desk.run(scenario)
