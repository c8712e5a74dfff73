"""Whether a model's text answer declines its task: the wording models refuse in.

Why: a refusal reaches Kestrel as a plain text answer, which the tool protocol takes as a task's
final answer, exactly like a decision ("No trade: the signal is too weak"). ``kestrel eval``
must not score a model that declines every task as one that decided every task, so the answer's
wording is read. (A provider may also say so itself: Anthropic ends such an answer with the stop
reason ``refusal``, which ``app.agents.llm.port.REFUSAL`` names; that needs no reading.)

What counts as declining, matched case-insensitively in the answer's first ``WINDOW`` characters
(curly apostrophes read as straight ones, runs of white space as one space); "I can't" stands for
every way of saying it: "I cannot", "I'm unable to", "I won't (be able to)", "I'm not able to",
"I'm not comfortable", "I don't", "I must not"...:

1. an apology and "I can't" in the same sentence: "I'm sorry, but I can't ...", "Sorry, I won't
   ...", "I apologise, but I am unable to ...";
2. "I can't help" or "I can't assist", with or without an object ("I cannot assist with that");
3. "I can't" provide, give, offer or make advice or decisions of the kind Kestrel asks for:
   "I can't provide financial advice", "I'm not able to make trading decisions";
4. "I can't" about the request itself, or about acting for the person: "I cannot fulfil this
   request", "I can't comply", "I won't participate in ...", "I can't trade on your behalf";
5. a model speaking of itself as an AI that may not: "As an AI language model, I cannot ...",
   "As an AI, I don't ...";
6. an explicit decline: "I must decline", "I'll have to respectfully decline", "I decline to".

What does not count, because it is a decision in the protocol's own words: an inability that
gives a market or tool reason ("I cannot place this order: the Risk Guard rejected it",
"Unable to read the candles: the data has a gap", "No trade: a SELL signal while I hold no
BTC"), and a disclaimer followed by the decision: a match followed by "but" or "however" and
then BUY, SELL, HOLD, "no trade", "placed" or "dispatched" ("I can't give financial advice, but
by the rules the signal is HOLD"). An apology before a market reason is read as declining (rare
in a decision, and the eval errs towards not counting an unclear answer as a decision).
"""

from __future__ import annotations

import re

WINDOW = 4_000  # a refusal says so at once; a decision is one line (the prompts ask for it)

_I_CANNOT = (  # "I can't", "I'm unable to", "I won't be able to", "I'm not comfortable"
    r"(?:\bi\s?(?:am|'m)\s(?:not\s(?:able|allowed|permitted|going)|unable)\sto"
    r"|\bi\s(?:can\s?not|can't|won't|will\snot|must\snot|should\s?n[o']t|do\s?n[o']t|may\snot)"
    r"(?:\sbe\sable\sto)?"
    r"|\bi\s?(?:am|'m)\snot\scomfortable)"
)
_ADVICE = (
    r"(?:financial|investment|investing|trading|personali[sz]ed|crypto(?:currency)?)\s"
    r"(?:advice|decisions?|recommendations?|guidance)"
)
_AS_AN_AI = (
    r"\bas\san?\s(?:ai|artificial\sintelligence|(?:large\s)?language\smodel|llm"
    r"|ai\s(?:language\s)?model|ai\sassistant)\b"
)
_PATTERNS = (
    # 1. an apology, then "I can't ..." in the same sentence
    re.compile(rf"\b(?:sorry|apologi[sz]e)\b[^.!?\n]{{0,60}}?{_I_CANNOT}"),
    # 2. "I can't help" / "I cannot assist" (not "can't help but notice")
    re.compile(rf"{_I_CANNOT}\s(?:help|assist)\b(?!\sbut\b)"),
    # 3. "I can't give financial advice", "I'm unable to make trading decisions"
    re.compile(rf"{_I_CANNOT}\s(?:provide|give|offer|make|do|generate|act\son)\b"
               rf"[^.!?\n]{{0,30}}?{_ADVICE}"),
    # 4. "I cannot fulfil this request", "I can't comply", "I can't trade on your behalf"
    re.compile(rf"{_I_CANNOT}\s(?:(?:fulfil+|complete|process|honou?r)\s"
               r"(?:that|this|your|the|such\sa)\s(?:request|task)"
               r"|comply\b|engage\sin\b|participate\sin\b|take\spart\sin\b"
               r"|(?:trade|act|decide|place\strades)\son\syour\sbehalf)"),
    # 5. "As an AI language model, I cannot ..."
    re.compile(rf"{_AS_AN_AI}[^.!?\n]{{0,40}}?{_I_CANNOT}"),
    # 6. "I must decline", "I'll have to respectfully decline", "I decline to"
    re.compile(r"\bi(?:\s(?:must|have\sto|need\sto|will)|'ll(?:\shave\sto)?)\s"
               r"(?:respectfully\s|politely\s)?decline\b|\bi\s(?:respectfully\s)?decline\sto\b"),
)
# after a disclaimer, the decision it prefaces: a signal, a trade or its absence
_DISCLAIMED = re.compile(
    r"\b(?:but|however)\b.{0,300}?\b(?:buy|sell|hold|no\strade|placed|dispatched)\b",
    re.DOTALL,
)


def _normal(text: str) -> str:
    return " ".join(text[:WINDOW].replace("\u2019", "'").replace("\u2018", "'").split()).lower()


def is_refusal(text: str) -> bool:
    """True when the answer declines its task (see the module's documentation for the wording),
    False for a decision, a disclaimer followed by a decision, and an empty answer."""
    normal = _normal(text)
    for pattern in _PATTERNS:
        match = pattern.search(normal)
        if match is not None and _DISCLAIMED.search(normal, match.end()) is None:
            return True
    return False
