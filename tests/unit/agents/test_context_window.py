"""Every request fits the server's context with the system prompt whole: the task's data, then the
older steps give way, oldest first; what cannot fit is refused before it is sent, with the
numbers; a server that counts more than cl100k teaches the fit to leave more room, and one that
reports far fewer prompt tokens than were sent has cut the prompt."""

from __future__ import annotations

import pytest

from app.agents.context_window import (
    ContextWindowError,
    Window,
    fit_window,
    prompt_was_cut,
)
from app.agents.llm.port import ChatMessage
from app.agents.llm.tokens import count_tokens, prompt_tokens
from app.tools.protocol.render import el, render_success

SYSTEM = "You are a trader. Follow the rules below exactly. " * 80


def klines(n: int, tool: str = "get_historical_klines") -> str:
    bars = [el("kline", None, timestamp_ms=1_700_000_000_000 + i * 3_600_000, open="43000.5",
               high="43100", low="42900", close="43050.25", volume="12.5") for i in range(n)]
    return render_success(tool, el("klines_data", None, *bars, symbol="BTC/USDT",
                                   interval="1h")).xml


def task(with_data: bool = True) -> ChatMessage:
    text = '<task task_id="t" task_type="RUN_ANALYSIS">{}</task>'
    if with_data:
        text += ('\n\n<task_data market_time="2019-10-05T00:00:00Z">\n'
                 f"{klines(60, 'get_market_snapshot')}\n</task_data>")
    return ChatMessage("user", text)


def steps(n: int) -> list[ChatMessage]:
    messages = []
    for i in range(n):
        messages.append(ChatMessage("assistant", f"<get_historical_klines><limit>{i}</limit>"
                                                 "</get_historical_klines>"))
        messages.append(ChatMessage("user", klines(40)))
    return messages


def size(messages: list[ChatMessage]) -> int:
    return prompt_tokens(SYSTEM, messages)


def test_a_request_within_the_context_is_sent_unchanged() -> None:
    messages = [task(), *steps(2)]
    fitted = fit_window(SYSTEM, messages, Window(1_000_000, 2_048), "p")
    assert fitted.messages == messages and fitted.summarised == 0


def test_the_tasks_data_gives_way_first_and_stays_a_data_block() -> None:
    messages = [task(), *steps(1)]
    limit = size(messages) - 200
    fitted = fit_window(SYSTEM, messages, Window(limit + 1_000, 1_000), "p")
    first = fitted.messages[0].content
    assert fitted.tokens <= limit
    assert first.startswith('<task task_id="t"') and first.endswith("</task_data>")
    assert "call the tool again" in first  # its results summarised
    assert fitted.messages[1:] == messages[1:]  # the steps untouched


def test_then_older_results_then_the_data_then_older_steps_give_way_oldest_first() -> None:
    messages = [task(), *steps(6)]
    just_system = count_tokens(SYSTEM) + 300
    fitted = fit_window(SYSTEM, messages, Window(just_system + 900 + 1_000, 1_000), "p")
    kept = fitted.messages
    assert kept[0].content.startswith('<task task_id="t"')
    assert "were left out to fit the model's context" in kept[0].content  # no data, a note
    assert len(kept) < len(messages) and len(kept) % 2 == 1  # whole steps left out
    assert kept[-2:] == [messages[-2], ChatMessage("user", kept[-1].content)]
    assert kept[-1].content == messages[-1].content or "summarised" in kept[-1].content


def test_when_only_cutting_the_system_prompt_would_fit_the_request_is_refused() -> None:
    messages = [task(), *steps(4)]
    room = count_tokens(SYSTEM) + 50  # the system prompt fits, the task and its last step not
    with pytest.raises(ContextWindowError, match="even with the task's data and its earlier "
                                                 "steps left out"):
        fit_window(SYSTEM, messages, Window(room + 512, 512), "p")


def test_a_system_prompt_larger_than_the_context_is_refused_with_the_numbers() -> None:
    system_tokens = count_tokens(SYSTEM)
    with pytest.raises(ContextWindowError) as refused:
        fit_window(SYSTEM, [task()], Window(system_tokens + 1_000, 2_048), "openai-compatible")
    assert str(refused.value) == (
        f"openai-compatible: the system prompt alone is {system_tokens:,} tokens; the server's "
        f"context is {system_tokens + 1_000:,} tokens with 2,048 kept for the answer: raise "
        "context_tokens or lower max_output_tokens ([llm] in settings.toml, or Settings > LLM)")


def test_a_task_that_cannot_fit_even_cut_down_says_what_it_needs() -> None:
    huge = ChatMessage("user", "<task>" + "word " * 5_000 + "</task>")
    limit = count_tokens(SYSTEM) + 500
    with pytest.raises(ContextWindowError, match=r"the request needs [\d,]+ tokens even with the "
                       r"task's data and its earlier steps left out \(the system prompt [\d,]+\)"):
        fit_window(SYSTEM, [huge], Window(limit + 1_024, 1_024), "p")


def test_a_server_that_counts_more_than_cl100k_makes_the_fit_leave_room_for_it() -> None:
    messages = [task(), *steps(3)]
    window = Window(size(messages) + 2_048 + 10, 2_048)
    assert fit_window(SYSTEM, messages, window, "p").messages == messages
    learned = window.learned(reported=int(size(messages) * 1.3), counted=size(messages))
    assert learned.scale == pytest.approx(1.3, abs=0.01)
    assert fit_window(SYSTEM, messages, learned, "p").messages != messages
    assert window.learned(reported=size(messages), counted=size(messages)) == window


@pytest.mark.parametrize(("reported", "counted", "cut"), [
    (4_050, 9_800, True),  # Ollama kept its 4k context of a 9.8k prompt
    (9_500, 9_800, False),  # another tokenizer
    (0, 9_800, False),  # no usage: counted instead, not a cut
    (300, 500, False),  # too small to tell
])
def test_a_prompt_reported_far_below_its_count_was_cut(reported: int, counted: int,
                                                       cut: bool) -> None:
    assert prompt_was_cut(reported, counted) is cut
