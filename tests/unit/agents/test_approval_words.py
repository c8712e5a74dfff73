"""How a typed answer to an approval question is read: plain words of consent approve."""

from __future__ import annotations

import pytest

from app.agents.approval_log import is_approval


@pytest.mark.parametrize("answer", ["Approve", "yes", " OK. ", "confirm!", "y"])
def test_plain_words_of_consent_approve(answer: str) -> None:
    assert is_approval(answer)


@pytest.mark.parametrize("answer", ["Refuse", "no", "not yet", "approve later", ""])
def test_anything_else_refuses(answer: str) -> None:
    assert not is_approval(answer)
