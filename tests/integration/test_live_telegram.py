"""A live order approved from the phone: the world on a real account of the fake Binance, the
bot against the fake Bot API, both on 127.0.0.1.

A Trader's LIVE order waits for the person; the approval arrives on Telegram saying LIVE and the
exchange first, the owner taps Approve, and the order goes through the Risk Guard to the
exchange once, the journal equal to the exchange's state. A stranger's tap places nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.config.telegram import BOT_TOKEN_KEY, TelegramSettings
from app.domain.agents import QuestionKind
from app.secrets import SecretStore, env_var_name
from app.telegram.outbox import Outbox
from app.telegram.start import start_telegram
from tests.helpers.agents import settle
from tests.helpers.eventually import PATIENCE_S, eventually
from tests.helpers.fake_exchange import FakeExchangeServer
from tests.helpers.fake_exchange.broker import assert_journal_matches_exchange
from tests.helpers.fake_exchange.live import (
    decided,
    grant,
    live_world,
    send_buy_signal,
    trader,
)
from tests.helpers.fake_telegram import FakeTelegram
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    fake_exchange_fixture,
    server_fixture,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
OWNER = 4242
STRANGER = 31337


def test_a_live_order_approved_on_telegram_says_live_and_reaches_the_exchange_once(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        with FakeTelegram() as bot_api:
            world = await live_world(tmp_path, server)
            bot = None
            try:
                await world.start(decided(None))
                secrets = SecretStore(environ={env_var_name(BOT_TOKEN_KEY): bot_api.token})
                bot = await start_telegram(
                    world, TelegramSettings(enabled=True, allowed_user_ids=(OWNER,),
                                            api_base_url=bot_api.base_url),
                    secrets, poll_timeout_s=1.0,
                    outbox=lambda send: Outbox(send, first_delay_s=0.2, max_delay_s=0.5))
                assert bot is not None and await bot.wait_connected(PATIENCE_S), bot
                agent = await trader(world)
                grant(world, agent)
                await send_buy_signal(world, agent)
                await settle(world)
                (question,) = world.agents.questions.pending()
                assert question.kind is QuestionKind.APPROVAL

                def asking() -> list[Any]:
                    return [s for s in bot_api.sent if s.chat_id == OWNER and s.buttons]

                await eventually(asking)
                message = asking()[-1]
                assert message.text.startswith(
                    "🔴 LIVE binance (real money) · Approval needed · T"), message.text
                assert "Order: BUY BTC/USDT MARKET" in message.text
                approve = message.buttons[0][0][1]
                bot_api.push_button(STRANGER, OWNER, message.message_id, approve)
                await asyncio.sleep(1.0)
                assert server.count("binance", "order.create") == 0  # a stranger places nothing
                bot_api.push_button(OWNER, OWNER, message.message_id, approve)
                tapped = {message.message_id}
                # the rule Trader may size again on the exchange's amount step and ask again:
                # each new approval is tapped on the phone too, once the last one is answered
                for _ in range(3):
                    await eventually(lambda: all(
                        not bot_api.message(OWNER, m).buttons for m in tapped))
                    await settle(world)
                    if not world.agents.questions.pending():
                        break
                    await eventually(lambda: [m for m in asking() if m.message_id not in tapped])
                    again = next(m for m in asking() if m.message_id not in tapped)
                    assert again.text.startswith("🔴 LIVE binance (real money) · Approval")
                    bot_api.push_button(OWNER, OWNER, again.message_id, again.buttons[0][0][1])
                    tapped.add(again.message_id)
                await eventually(lambda: server.count("binance", "order.create") >= 1)
                await world.venue.driver.round()
                records = world.agents.approvals.all()
                assert all(r.decision == "approved" for r in records) and records[-1].order_id
                assert server.binance_account.total("BTC") > 0
                # once per approval that placed an order: none twice, none without the person
                placed = [r for r in records if r.order_id]
                assert server.count("binance", "order.create") == len(placed)
                assert_journal_matches_exchange(world.venue.broker, server)
            finally:
                if bot is not None:
                    await bot.aclose()
                await world.aclose()

    asyncio.run(scenario())
