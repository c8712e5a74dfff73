"""Fit every request into the model server's context, or refuse it before it is sent.

Why: a server has a fixed context for the prompt and the answer together. The first request of
an analyst is ~8k tokens with its task data, plus the 2,048 kept for its answer; a server with an
8k context (LM Studio's and llama.cpp's common default, vLLM ``--max-model-len 8192``) refuses
it, and Ollama silently keeps only the end of the prompt, so the system prompt is lost and the
model answers without its instructions. ``[llm] context_tokens`` says how large the server's
context is and ``max_output_tokens`` how much of it each answer keeps; what is left is the
prompt's limit.

Past that limit, what gives way, in this order (each step only as far as needed):

1. the results in the task's data block, then older tool results, oldest first, are summarised
   (``context_budget.summarise``: the tool, what it held, "call it again");
2. the task's data block is left out (a note in its place says so);
3. earlier steps of the task (a call and its result) are left out, oldest first;
4. the newest result is summarised.

The task message itself stays readable as a task: the note about its data stands inside an empty
data block, so whatever reads the task (the rule engine, the chat) reads it as before.

The system prompt is never touched: it carries the agent's instructions, and it is what a server
that cuts prompts loses first. When even the system prompt, the task and its latest step do not
fit, the request is refused before it is sent (``ContextWindowError``), with the numbers.

Counting: cl100k_base (``app.agents.llm.tokens``), with the chat template's overhead per message,
times ``Window.scale``: how many tokens the server counted for each one Kestrel counted, learned
from the usage it reports (a model whose tokenizer splits numbers into digits counts more than
cl100k). The fitting is a pure function of its inputs, so a replayed run sends the same requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.agents.context_budget import Fitted, summarise
from app.agents.llm.port import ChatMessage, PermanentLLMError, ToolSchema
from app.agents.llm.tokens import count_tokens, message_tokens, prompt_tokens, tools_text
from app.agents.task_data import CLOSE, OPEN, SEPARATOR, data_results, split_task_data

_RESULT = "<tool_result"
MAX_SCALE = 2.0
# the server's prompt count may differ from cl100k's by this much before it is learned
_SCALE_STEP = 1.02
# a server that reports this share of the prompt Kestrel counted, or less, kept only part of it
CUT_RATIO = 0.8
_CUT_MIN_TOKENS = 256
DATA_LEFT_OUT = (
    "(The results this task carried were left out to fit the model's context; call the tools "
    "for the data you need.)"
)
PROMPT_CUT_NOTICE = "The model's server cut the prompt"


@dataclass(frozen=True, slots=True)
class Window:
    """A server's context: ``context_tokens`` for the prompt and the answer together, of which
    ``output_tokens`` are kept for the answer; ``scale`` as learned (see the module docstring)."""

    context_tokens: int
    output_tokens: int
    scale: float = 1.0

    @property
    def prompt_limit(self) -> int:
        return self.context_tokens - self.output_tokens

    def learned(self, reported: int, counted: int) -> Window:
        """This window after the server reported ``reported`` prompt tokens for a prompt Kestrel
        counted at ``counted`` (a prompt the server did not cut)."""
        if counted <= 0 or reported <= counted * self.scale * _SCALE_STEP:
            return self
        return replace(self, scale=min(MAX_SCALE, round(reported / counted, 3)))


class ContextWindowError(PermanentLLMError):
    """A request that cannot fit the server's context even with everything that may give way
    left out; it was not sent."""


def fit_window(
    system: str, messages: Sequence[ChatMessage], window: Window, provider: str,
    tools: tuple[ToolSchema, ...] = (),
) -> Fitted:
    """``messages`` made to fit ``window`` with ``system`` and ``tools`` (the module docstring's
    order); ``Fitted.tokens`` is the prompt as counted, scaled.

    Raises:
        ContextWindowError: nothing more may give way and it still does not fit; the message
            says how many tokens what is left needs and what to change.
    """
    fitter = _Fitter(system, list(messages), window, tools)
    if fitter.total() <= window.prompt_limit:
        return Fitted(fitter.messages, fitter.total(), 0)
    for step in (fitter.summarise_data, fitter.summarise_older, fitter.leave_out_data,
                 fitter.leave_out_steps, fitter.summarise_newest):
        step()
        if fitter.total() <= window.prompt_limit:
            return Fitted(fitter.messages, fitter.total(), fitter.changed)
    raise ContextWindowError(provider, fitter.refusal())


class _Fitter:
    """The messages being fitted and their scaled size."""

    def __init__(self, system: str, messages: list[ChatMessage], window: Window,
                 tools: tuple[ToolSchema, ...]) -> None:
        self.window = window
        self.messages = messages
        self.changed = 0
        self.fixed = prompt_tokens(system, (), tools)
        self.system_tokens = count_tokens(system)
        self.tools_tokens = count_tokens(tools_text(tools)) if tools else 0

    def scaled(self, tokens: int) -> int:
        return math.ceil(tokens * self.window.scale)

    def total(self) -> int:
        return self.scaled(self.fixed + sum(message_tokens(m) for m in self.messages))

    def _results(self) -> list[int]:
        """Indexes of the tool results after the task message, oldest first."""
        return [i for i, m in enumerate(self.messages) if i > 0 and m.role == "user"
                and m.content.lstrip().startswith(_RESULT)]

    def _set(self, index: int, content: str) -> None:
        if content != self.messages[index].content:
            self.messages[index] = replace(self.messages[index], content=content)
            self.changed += 1

    def summarise_data(self) -> None:
        if not self.messages:
            return
        task, block = split_task_data(self.messages[0].content)
        if block is None:
            return
        head = block[: block.index(">") + 1] if block.startswith(OPEN) else OPEN + ">"
        shorter = [_shorter(r) for r in data_results(block)]
        self._set(0, f"{task}{SEPARATOR}{head}\n" + "\n".join(shorter) + f"\n{CLOSE}")

    def summarise_older(self) -> None:
        for index in self._results()[:-1]:
            if self.total() <= self.window.prompt_limit:
                return
            self._summarise(index)

    def leave_out_data(self) -> None:
        if not self.messages:
            return
        task, block = split_task_data(self.messages[0].content)
        if block is not None:
            head = block[: block.index(">") + 1] if block.startswith(OPEN) else OPEN + ">"
            self._set(0, f"{task}{SEPARATOR}{head}\n{DATA_LEFT_OUT}\n{CLOSE}")

    def leave_out_steps(self) -> None:
        """Drop (call, result) pairs after the task message, oldest first, keeping the last."""
        while len(self.messages) > 3 and self.total() > self.window.prompt_limit:
            del self.messages[1:3]
            self.changed += 1

    def summarise_newest(self) -> None:
        for index in self._results()[-1:]:
            self._summarise(index)

    def _summarise(self, index: int) -> None:
        self._set(index, _shorter(self.messages[index].content))

    def refusal(self) -> str:
        window = self.window
        room = (f"the server's context is {window.context_tokens:,} tokens with "
                f"{window.output_tokens:,} kept for the answer: raise context_tokens or lower "
                "max_output_tokens ([llm] in settings.toml, or Settings > LLM)")
        system = self.scaled(self.system_tokens)
        if system > window.prompt_limit:
            return f"the system prompt alone is {system:,} tokens; {room}"
        if self.tools_tokens and self.scaled(self.system_tokens + self.tools_tokens) > (
                window.prompt_limit):
            return (f"the system prompt ({system:,} tokens) and the tools offered natively "
                    f"({self.scaled(self.tools_tokens):,}) are "
                    f"{self.scaled(self.system_tokens + self.tools_tokens):,} tokens; {room}")
        return (f"the request needs {self.total():,} tokens even with the task's data and its "
                f"earlier steps left out (the system prompt {system:,}); {room}")


def _shorter(result: str) -> str:
    """A result's summary, or the result itself when that is no longer than its summary."""
    tokens = count_tokens(result)
    short = summarise(result, tokens)
    return short if count_tokens(short) < tokens else result


def prompt_was_cut(reported: int, counted: int) -> bool:
    """The server reported far fewer prompt tokens than Kestrel counted: it kept only part of
    the prompt. (Tokenizers differ by far less than ``CUT_RATIO``; a server that leaves out of
    its count the tokens it had cached, as Ollama did before 0.30, can look the same.)"""
    return reported > 0 and reported < counted * CUT_RATIO and counted - reported >= (
        _CUT_MIN_TOKENS)


def prompt_cut_notice(where: str, reported: int, counted: int, context_tokens: int) -> str:
    """What the person reads when a server cut a prompt, and what to do about it."""
    return (
        f"{PROMPT_CUT_NOTICE}: {where} reported {reported:,} prompt tokens for a request "
        f"Kestrel counted at {counted:,}, so it kept only part of the prompt (a server cuts the "
        "start, where the system prompt with the agent's instructions is). Its context is "
        f"smaller than [llm] context_tokens ({context_tokens:,}): set context_tokens to the "
        "server's context, or give the server a larger one (Ollama: start it with "
        "OLLAMA_CONTEXT_LENGTH=16384, or set PARAMETER num_ctx in a Modelfile; LM Studio, "
        "llama.cpp, vLLM: the model's context length)."
    )
