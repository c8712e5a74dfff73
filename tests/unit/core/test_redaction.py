"""The redactor: a secret leaves no trace, whole, in pieces or masked; other text is untouched."""

from __future__ import annotations

import base64
import io
import logging
import urllib.parse

import pytest

from app.agents.llm.port import PermanentLLMError
from app.redaction import MARKER, REDACTOR, RedactingStream, Redactor
from app.secrets import SecretStore, mask
from tests.helpers.leaks import encoded_leaks, leaks

KEY = "sk-proj-Q7ZJXW9PVKmtrNBcdHgfwxyz"


@pytest.fixture
def redactor() -> Redactor:
    r = Redactor()
    r.add_secret(KEY)
    return r


@pytest.mark.parametrize("echo", [
    f"Incorrect API key provided: {KEY}.",  # a proxy echoing the header
    f"Incorrect API key provided: {KEY[:8]}{'*' * 20}{KEY[-4:]}.",  # OpenAI's masked form
    f"key {KEY[:12]}****",  # a start and a mask
    "key ****************wxyz",  # a mask and the end
    "key sk-...wxyz and sk-…wxyz",  # short masked forms
    f"the app's own mask: {mask(KEY)}",
    f"a piece from the middle: {KEY[9:19]}",
    f"the start {KEY[:9]} and the end {KEY[-10:]}",
    f"url?api_key={KEY}&x=1",
    f"Chat not found (post /bot{KEY.lower()}/sendmessage)",  # a library re-cased the message
    f"INVALID KEY {KEY[5:20].upper()}",
    f"key {KEY[:10].upper()}****",
])
def test_a_secret_is_redacted_whole_in_pieces_and_masked(redactor: Redactor, echo: str) -> None:
    redacted = redactor.redact(echo)
    assert MARKER in redacted
    assert leaks(redacted.encode(), KEY) == [], redacted


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("echo", [
    f"key {_b64(KEY.encode())}",  # base64, padded
    f"key {_b64(KEY.encode()).rstrip('=')}.",  # without its padding
    f"Authorization: Basic {_b64(b'me:' + KEY.encode())}",  # inside base64, byte offset 0
    f"Authorization: Basic {_b64(b'bot:' + KEY.encode())}",  # byte offset 1
    f"Authorization: Basic {_b64(b'agent:' + KEY.encode() + b':x')}",  # byte offset 2
    f"url-safe {base64.urlsafe_b64encode(b'ab' + KEY.encode() + b'?>?').decode()}",
    f"reversed {KEY[::-1]}",
    f"hex {KEY.encode().hex()} and HEX {KEY.encode().hex().upper()}",
    f"url {urllib.parse.quote(KEY, safe='')}",
    f"a piece of the base64: {_b64(KEY.encode())[8:20]}",
])
def test_a_secret_is_redacted_in_its_common_encodings(redactor: Redactor, echo: str) -> None:
    redacted = redactor.redact(echo)
    assert MARKER in redacted
    assert encoded_leaks(redacted.encode(), KEY) == [], redacted
    assert leaks(redacted.encode(), KEY) == [], redacted


def test_a_secret_learnt_as_an_encoding_of_another_is_still_masked_when_added() -> None:
    redactor = Redactor()
    redactor.add_secret(KEY)
    redactor.add_secret(KEY[::-1])  # someone's key that is another key reversed
    assert redactor.redact(f"{KEY[::-1][:6]}****{KEY[::-1][-4:]}") == MARKER


def test_text_without_a_secret_is_returned_unchanged(redactor: Redactor) -> None:
    for text in ("risk-sized orders, RSI 71.3 ... **bold** ***", "wxyz alone", "sk-proj-",
                 "a1b2c3d4e5f6a7b8c9d0a1b2c3d4e5f6a7b8c9d0 hash", ""):
        assert redactor.redact(text) == text


def test_display_text_also_loses_unregistered_key_shaped_strings() -> None:
    redactor = Redactor()
    line = "openai=sk-abcdefghijklmnop exchange=" + "ab12" * 10
    assert redactor.redact(line) == line  # stored data keeps what may be a hash
    assert redactor.redact(line, display=True) == f"openai={MARKER} exchange={MARKER}"


def test_re_cased_text_keeps_every_other_character_where_it_was(redactor: Redactor) -> None:
    """A character that lower-cases to two ("İ") must not shift where the key is found."""
    text = f"İstanbul says: {KEY.upper()} (retry)"
    assert redactor.redact(text) == f"İstanbul says: {MARKER} (retry)"


def test_short_values_are_not_secrets_and_nested_data_is_redacted(redactor: Redactor) -> None:
    redactor.add_secret("12345")
    assert redactor.redact("order 12345") == "order 12345"
    data = {"errors": [f"bad key {KEY}"], "count": 2, "pair": ("x", KEY)}
    assert redactor.redact_data(data) == {
        "errors": [f"bad key {MARKER}"], "count": 2, "pair": ("x", MARKER)}


def test_every_kestrel_environment_variable_is_a_secret_once_a_store_exists() -> None:
    value = "smtp-pass-Zq8rTt5vW"
    SecretStore(environ={"KESTREL_EMAIL_PASSWORD": value, "HOME": "/home/somebody-else"})
    assert REDACTOR.redact(f"login failed for {value}") == f"login failed for {MARKER}"
    assert REDACTOR.redact("/home/somebody-else") == "/home/somebody-else"


def test_a_provider_error_quoting_the_key_is_redacted_when_it_is_made() -> None:
    SecretStore(environ={"KESTREL_LLM_API_KEY": KEY})
    error = PermanentLLMError("openai-compatible", f"Incorrect API key provided: {KEY}")
    assert KEY[:8] not in str(error) and MARKER in str(error)


def test_log_records_and_their_tracebacks_are_redacted(redactor: Redactor) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(redactor)
    log = logging.getLogger("tests.redaction")
    log.addHandler(handler)
    log.propagate = False
    try:
        try:
            raise RuntimeError(f"the server said: {KEY}")
        except RuntimeError:
            log.exception("call failed with %s", KEY[:10])
    finally:
        log.removeHandler(handler)
        log.propagate = True
    written = stream.getvalue()
    assert "RuntimeError" in written and "call failed with" in written
    assert leaks(written.encode(), KEY) == [], written


def test_a_redacting_stream_writes_what_it_is_given_without_the_secret(redactor: Redactor) -> None:
    target = io.StringIO()
    stream = RedactingStream(target, redactor)
    print(f"fault: {KEY}", file=stream)  # type: ignore[arg-type]
    assert target.getvalue() == f"fault: {MARKER}\n"
    assert stream.getvalue() == target.getvalue()  # everything else is the wrapped stream's
