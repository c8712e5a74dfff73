"""A model's text answer that declines its task is told apart from one that decides, so an eval
never scores refusals as decisions nor decisions as refusals."""

from __future__ import annotations

import pytest

from app.agents.refusals import is_refusal


@pytest.mark.parametrize("answer", [
    "I'm sorry, but I can't help with trading decisions.",
    "I’m sorry, but I can’t help with that.",  # curly apostrophes, as models write them
    "Sorry, I won't be able to do this.",
    "I apologize, but I am unable to provide that.",
    "I cannot assist with that request.",
    "I can't help you here.",
    "I can't provide financial advice or tell you whether to buy Bitcoin.",
    "I'm not able to make trading decisions for you.",
    "I'm unable to give personalised investment recommendations.",
    "I cannot fulfill this request.",
    "I can't trade on your behalf.",
    "As an AI language model, I cannot predict the market or trade.",
    "As an AI, I don't make investment decisions.",
    "I must respectfully decline to analyse this market.",
    "I'll have to decline.",
    "Having looked at the candles: I'm sorry, but I can't help with that, though I can explain "
    "what an RSI is.",
    "I'm sorry, but I can't help with trading decisions. However, I can explain what RSI means.",
])
def test_wording_that_declines_the_task_is_a_refusal(answer: str) -> None:
    assert is_refusal(answer)


@pytest.mark.parametrize("answer", [
    # the rule engine's own final answers, and decisions as a model words them
    "BTC/USDT 1h: SELL (confidence 0.75), dispatched to Trader 2713a000.",
    "BTC/USDT 1h: HOLD (confidence 0.2), not dispatched.",
    "No trade: a SELL signal while I hold no BTC/USDT, and this spot account cannot sell short.",
    "Ignored a signal: the payload has no symbol.",
    "Could not handle a fill: the order is unknown.",
    "I cannot place this order: the Risk Guard rejected it (max_position_weight).",
    "I could not read the candles, so no signal this hour (NONE).",
    "Unable to compute the MACD: too few candles. Signal NONE.",
    "I don't see a crossing, so HOLD.",
    "I can't help but notice the trend is down: SELL (confidence 0.7), dispatched.",
    "I can't give financial advice, but by the rules the signal is HOLD.",
    "I cannot make trading decisions for you; however, following my template the signal is "
    "BUY (confidence 0.65), dispatched to the Trader.",
    "",
])
def test_a_decision_is_not_a_refusal(answer: str) -> None:
    assert not is_refusal(answer)
