"""The kill switch as the person meets it in the window: the red toolbar button and Ctrl+Shift+K
ask first and trip it; while tripped the banner, the status bar and the account say so, readable
in both themes and on a small screen; the reset dialog only resets once RESET is typed, and the
agents stay paused; a trip made elsewhere (Telegram, a halt) shows at once, and after a restart."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox

from app.domain.agents import AgentState
from app.ui.chat.bubbles import AnswerBubble, PersonBubble
from app.ui.kill_switch import ResetDialog, TripDialog
from app.ui.main_window import MainWindow
from app.ui.theme import apply_theme
from tests.helpers.eventually import eventually, settled
from tests.ui.desk import Desk, on_screen
from tests.ui.test_theme import MIN_CONTRAST, contrast, ground

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")


def agents_states(window: MainWindow) -> set[AgentState]:
    assert window.world is not None
    return {a.state for a in window.world.agents.manager.list_agents()}


async def dialog_of(window: MainWindow, kind: type) -> object:
    await eventually(lambda: isinstance(window.kill_controls.dialog, kind)
                and window.kill_controls.dialog.isVisible())
    return window.kill_controls.dialog


def test_the_toolbar_button_asks_then_trips_and_every_view_shows_it(desk: Desk, qtbot) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        world = window.world
        assert world is not None and agents_states(window) == {AgentState.RUNNING}
        controls = window.kill_controls
        assert controls.button.text() == "Kill switch" and not controls.banner.isVisible()
        assert controls.toolbar.isVisible() and window.statusBar().halted_label.isHidden()

        qtbot.mouseClick(controls.button, Qt.MouseButton.LeftButton)
        dialog = await dialog_of(window, TripDialog)
        assert "pauses 3 running agents" in " ".join(
            label.text() for label in dialog.findChildren(QLabel))
        dialog.cancel_button.click()  # second thoughts: nothing happens
        await eventually(lambda: controls.dialog is None)
        assert not world.agents.kill_switch.is_tripped()

        controls.button.click()
        controls.trip_action.trigger()  # pressed twice in a hurry: still one question
        dialog = await dialog_of(window, TripDialog)
        assert len([d for d in window.findChildren(TripDialog) if d.isVisible()]) == 1
        dialog.reason.setText("the trader is buying every dip")
        qtbot.mouseClick(dialog.trip_button, Qt.MouseButton.LeftButton)
        await eventually(world.agents.kill_switch.is_tripped)
        await eventually(lambda: agents_states(window) == {AgentState.PAUSED})
        trip = world.agents.kill_switch.active()
        assert trip.reason == "the trader is buying every dip"
        assert trip.by == "the person in the Kestrel window"
        assert controls.banner.isVisible()
        assert "the trader is buying every dip" in controls.banner.text.text()
        assert controls.button.text() == "Kill switch TRIPPED"
        assert window.statusBar().halted_label.isVisible()
        account = window.panels["account"]
        assert account.halt.isVisible() and "Trading halted" in account.halt.text()
        assert not controls.trip_action.isEnabled() and controls.reset_action.isEnabled()
        assert not window.errors.reports

    desk.run(scenario)


def test_ctrl_shift_k_then_enter_trips_it(desk: Desk, qtbot) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        window.activateWindow()
        qtbot.keyClick(window, Qt.Key.Key_K,
                       Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        dialog = await dialog_of(window, TripDialog)
        qtbot.keyClick(dialog, Qt.Key.Key_Return)  # the default button trips
        await eventually(window.world.agents.kill_switch.is_tripped)
        trip = window.world.agents.kill_switch.active()
        assert trip.reason == "tripped by hand (shortcut or menu)"
        window.show_shortcuts()  # F1's list names it
        shown = window.findChildren(QMessageBox)[-1]
        assert "Ctrl+Shift+K  Trip the kill switch" in shown.text()

    desk.run(scenario)


def test_the_reset_dialog_resets_only_once_reset_is_typed_and_agents_stay_paused(
    desk: Desk, qtbot,
) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        world = window.world
        await world.agents.kill_switch.trip("a test", "the test")
        controls = window.kill_controls
        await eventually(controls.banner.isVisible)

        qtbot.mouseClick(controls.banner.reset_button, Qt.MouseButton.LeftButton)
        dialog = await dialog_of(window, ResetDialog)
        text = " ".join(label.text() for label in dialog.findChildren(QLabel))
        assert "a test" in text and "Paused agents stay paused" in text
        assert not dialog.reset_button.isEnabled()
        qtbot.keyClick(dialog.word, Qt.Key.Key_Return)  # Enter alone never resets
        dialog.word.setText("reset")  # not the word asked for
        assert not dialog.reset_button.isEnabled()
        dialog.accept()
        assert world.agents.kill_switch.is_tripped() and dialog.isVisible()
        dialog.word.setText("RESET")
        qtbot.mouseClick(dialog.reset_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: not world.agents.kill_switch.is_tripped())
        await eventually(lambda: not controls.banner.isVisible())
        assert controls.button.text() == "Kill switch"
        assert window.panels["account"].halt.isHidden()
        window.statusBar().refresh()
        assert window.statusBar().halted_label.isHidden()
        assert agents_states(window) == {AgentState.PAUSED}, "the person resumes them"
        assert world.agents.kill_switch.history()[0].reset_by == "the person in the Kestrel window"

    desk.run(scenario)


def test_a_trip_made_elsewhere_shows_at_once_and_again_after_a_restart(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        await window.world.agents.kill_switch.trip("tripped from Telegram", "Telegram user 4242")
        assert window.kill_controls.banner.isVisible()
        assert window.panels["account"].halt.isVisible()
        await desk.close(window)
        again = await desk.open()
        await eventually(again.kill_controls.banner.isVisible)
        assert "Telegram user 4242" in again.kill_controls.banner.text.text()
        assert again.panels["account"].halt.isVisible()
        assert agents_states(again) == {AgentState.PAUSED}

    desk.run(scenario)


@pytest.mark.parametrize("theme", ["dark", "light"])
@pytest.mark.parametrize("size", [QSize(1280, 720), QSize(1366, 768)], ids=str)
def test_the_tripped_window_is_readable_and_fits_a_small_screen(
    desk: Desk, theme: str, size: QSize, tmp_path,
) -> None:
    apply_theme(QApplication.instance(), theme)

    async def scenario() -> None:
        window = await desk.open(size=size)
        await desk.settle(window)
        await window.world.agents.kill_switch.trip("the model misbehaves", "the person")
        await eventually(lambda: on_screen(window.docks["account"]))
        await settled(lambda: (window.size(), [d.geometry() for d in window.docks.values()],
                               window.kill_controls.banner.geometry()))
        image = window.grab().toImage()
        image.save(str(tmp_path / f"tripped-{theme}-{size.width()}.png"))
        assert window.size() == size
        inside = QRect(0, 0, size.width(), size.height())
        controls = window.kill_controls
        for widget in (controls.banner, controls.button, window.statusBar().halted_label,
                       controls.banner.reset_button):
            assert widget.isVisible()
            where = QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())
            assert inside.contains(where), widget.objectName()
        assert window.panels["chart"].view.height() >= 200
        for label in (controls.banner.title, controls.banner.text, window.statusBar().halted_label,
                      window.panels["account"].halt):
            if label.visibleRegion().isEmpty():
                continue
            rect = label.visibleRegion().boundingRect().translated(
                label.mapTo(window, QPoint(0, 0)))
            text = label.palette().color(label.foregroundRole())
            assert contrast(text, ground(image, rect)) >= MIN_CONTRAST, label.objectName()

    desk.run(scenario)


def test_after_a_reset_the_chat_says_the_orchestrator_is_paused_and_resume_runs_it(
    desk, qtbot
) -> None:
    """After a reset the Orchestrator stayed paused, and a message to it only said "queued"."""
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        world = window.world
        await window.kill_controls.trip("testing")
        await window.kill_controls.reset()
        chat = window.panels["chat"]
        orchestrator = world.orchestrator()
        assert world.agents.store.get(orchestrator.agent_id).state is AgentState.PAUSED
        header = chat.header
        await eventually(lambda: header.paused_row.isVisible())
        assert "Orchestrator is paused: what you send waits in its inbox" in header.status_text()
        qtbot.keyClicks(chat.composer.input, "status")
        qtbot.keyClick(chat.composer.input, Qt.Key.Key_Return)
        await eventually(lambda: any(isinstance(c, PersonBubble) and c.text.text() == "status"
                                for c in chat.transcript.cards))
        answers = len([c for c in chat.transcript.cards if isinstance(c, AnswerBubble)])
        qtbot.mouseClick(header.resume_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: world.agents.store.get(orchestrator.agent_id).state
                    is AgentState.RUNNING)
        await desk.settle(window)
        await eventually(lambda: len([c for c in chat.transcript.cards
                                 if isinstance(c, AnswerBubble)]) > answers)
        await eventually(lambda: not header.paused_row.isVisible())

    desk.run(scenario)
