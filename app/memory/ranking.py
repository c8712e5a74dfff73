"""Okapi BM25 over the candidate chunks FTS5 found, computed here rather than by FTS5's ``bm25()``.

FTS5's ``bm25()`` re-counts, on every query, how many rows of the *whole* table hold each phrase;
with trigram phrases over 100,000 chunks that alone costs tens of milliseconds, however few rows
are ranked. Here the index hands over a bounded set of candidates (their text), the number of
chunks visible at the market time and each term's document frequency (exact when small, estimated
from a sample of recent chunks when large, where the precise value hardly moves the ranking), and
the standard formula (k1 = 1.2, b = 0.75, the non-negative idf of Lucene) is applied to them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from functools import lru_cache

K1 = 1.2
B = 0.75
_CJK_CHAR = re.compile(
    "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)


@lru_cache(maxsize=512)
def _word_pattern(term: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![^\W_]){re.escape(term)}(?![^\W_])")


def term_frequency(term: str, body: str, whole_word: bool) -> int:
    """How often ``term`` occurs in lower-cased ``body`` (as a whole word for short words)."""
    if whole_word and not _CJK_CHAR.search(term):
        return len(_word_pattern(term).findall(body))
    return body.count(term)


def idf(total: int, df: int) -> float:
    return math.log(1.0 + (total - df + 0.5) / (df + 0.5))


def bm25_rank(
    candidates: Iterable[tuple[int, str]],
    terms: tuple[str, ...],
    short: frozenset[str],
    dfs: dict[str, int],
    total: int,
    limit: int,
) -> list[tuple[int, float]]:
    """Score candidates ``(rowid, body)``; return the best ``(rowid, score)``, most recent first
    among equal scores (row ids grow with market time)."""
    rows = [(rowid, body.lower()) for rowid, body in candidates]
    if not rows:
        return []
    average = sum(len(body) for _, body in rows) / len(rows) or 1.0
    weights = {term: idf(max(total, dfs.get(term, 0)), dfs.get(term, 0)) for term in terms}
    scored = []
    for rowid, body in rows:
        norm = K1 * (1 - B + B * len(body) / average)
        score = 0.0
        for term in terms:
            tf = term_frequency(term, body, term in short)
            if tf:
                score += weights[term] * tf * (K1 + 1) / (tf + norm)
        if score > 0:
            scored.append((rowid, score))
    scored.sort(key=lambda item: (-item[1], -item[0]))
    return scored[:limit]
