"""Validate the names an agent gives for memory files before any of them reaches the filesystem.

An agent's path is untrusted text from a language model. It is checked here as *text* (traversal in
every spelling: ``..``, absolute, drive and UNC forms, backslashes, percent-encoding, malformed
UTF-8, Unicode look-alike dots and slashes, Windows device names, control characters, over-long
names and deep nesting). Whatever passes is a tuple of plain components that ``fsops`` then opens
one by one relative to directory file descriptors with no-follow semantics, so a symlink or a hard
link on disk is caught at use time as well. Two codes: ``ACCESS_DENIED`` when the text tries to
leave the agent's folder (or disguises itself), ``INVALID_PARAMETER`` when it is merely a name no
platform can store.
"""

from __future__ import annotations

import re
import unicodedata

from app.domain.errors import AccessDeniedError, InvalidParameterError

MAX_COMPONENT_BYTES = 255
MAX_DEPTH = 16
MAX_PATH_CHARS = 4096

# Characters that render like a dot or a slash (or a backslash) but are not one. Most are changed
# by NFKC; the ones it leaves alone are listed so they are refused all the same.
LOOKALIKE_SEPARATORS = frozenset(
    "\u2024\u2025\u2026\ufe52\uff0e\u3002\uff61\u0701\u0702\u2e33\u2e34"  # dots
    "\u2215\u2044\u29f8\u29f5\u29f9\u2216\uff0f\ufe68\uff3c\u2571\u2572\u27cb\u27cd"  # slashes
    "\u0338\u0337\u20e5\u02f8\u2cf9\ua6f5"  # combining overlays and other solidus forms
)
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_DRIVE = re.compile(r"^[A-Za-z]:")
_WINDOWS_RESERVED_CHARS = frozenset('<>:"|?*')
_DEVICE_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "CLOCK$"}
    | {f"COM{c}" for c in "0123456789¹²³"}
    | {f"LPT{c}" for c in "0123456789¹²³"}
)
_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_NOTE_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,120}$")


def _deny(message: str, value: str, reason: str) -> AccessDeniedError:
    return AccessDeniedError(message, details={"path": value[:200], "reason": reason})


def _invalid(message: str, value: str, reason: str) -> InvalidParameterError:
    return InvalidParameterError(message, details={"path": value[:200], "reason": reason})


def _check_characters(text: str) -> None:
    """Refuse malformed, encoded, invisible and look-alike characters anywhere in the text."""
    if any("\ud800" <= ch <= "\udfff" for ch in text) or "\ufffd" in text:
        raise _deny(
            f"Path {text[:80]!r} holds malformed UTF-8 (e.g. an overlong encoding of '.' or '/'); "
            "write the path in plain UTF-8.",
            text,
            "malformed_utf8",
        )
    for ch in text:
        code = ord(ch)
        if code < 0x20 or 0x7F <= code <= 0x9F:
            raise _invalid(
                f"Path {text[:80]!r} contains the control character U+{code:04X}; memory paths "
                "may only hold printable characters.",
                text,
                "control_character",
            )
    if _PERCENT_ESCAPE.search(text):
        raise _deny(
            f"Path {text[:80]!r} contains a percent-encoded sequence; memory paths are not "
            "URL-decoded, so write the characters themselves (e.g. 'notes/plan.md').",
            text,
            "percent_encoding",
        )
    for ch in text:
        if ch in LOOKALIKE_SEPARATORS or unicodedata.category(ch) in ("Cf", "Zl", "Zp"):
            raise _deny(
                f"Path {text[:80]!r} contains U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')}), "
                "which looks like a dot or slash or is invisible; use plain '.' and '/'.",
                text,
                "unicode_lookalike",
            )
    normal = unicodedata.normalize("NFKC", text)
    if normal != text:
        escaping = any(normal.count(sep) > text.count(sep) for sep in "./\\")
        maker = _deny if escaping else _invalid
        raise maker(
            f"Path {text[:80]!r} uses compatibility or full-width characters that Unicode "
            f"normalisation turns into {normal[:80]!r}; write the plain form.",
            text,
            "unicode_lookalike" if escaping else "not_normalised",
        )
    if "\\" in text:
        raise _deny(
            f"Path {text[:80]!r} contains a backslash; backslashes are not path separators here "
            "(use '/'), and are refused so no path can escape on Windows.",
            text,
            "backslash",
        )


def _check_component(component: str, whole: str) -> None:
    if component == "":
        raise _invalid(
            f"Path {whole[:80]!r} has an empty segment ('//' or a trailing '/'); name a file "
            "like 'notes/plan.md'.",
            whole,
            "empty_segment",
        )
    if set(component) <= {".", " "} and component.count(".") >= 2:
        raise _deny(
            f"Path {whole[:80]!r} contains '..'; a memory path cannot leave the agent's own "
            "folder. Name a file inside it, e.g. 'notes/plan.md'.",
            whole,
            "traversal",
        )
    if component == ".":
        raise _invalid(
            f"Path {whole[:80]!r} contains a '.' segment; write the path without it.",
            whole,
            "dot_segment",
        )
    if component.startswith("."):
        raise _invalid(
            f"Name {component[:80]!r} starts with '.'; such names are reserved for the memory "
            "bank's own hidden files. Choose a name starting with a letter or digit.",
            whole,
            "hidden_name",
        )
    if component[-1] in ". " or component[0] == " ":
        raise _invalid(
            f"Name {component[:80]!r} starts or ends with a space or ends with a dot, which "
            "Windows silently strips; remove it.",
            whole,
            "trailing_dot_or_space",
        )
    bad = sorted(set(component) & _WINDOWS_RESERVED_CHARS)
    if bad:
        raise _invalid(
            f"Name {component[:80]!r} contains {' '.join(bad)}, which cannot be stored on every "
            "platform; use letters, digits, '-', '_' and '.'.",
            whole,
            "reserved_character",
        )
    stem = component.split(".", 1)[0].rstrip(" ").upper()
    if stem in _DEVICE_NAMES:
        raise _invalid(
            f"Name {component!r} is a reserved Windows device name ({stem}); choose another name.",
            whole,
            "device_name",
        )
    size = len(component.encode("utf-8"))
    if size > MAX_COMPONENT_BYTES:
        raise _invalid(
            f"Name {component[:40]!r}… is {size} bytes long; the limit is "
            f"{MAX_COMPONENT_BYTES} bytes per name.",
            whole,
            "name_too_long",
        )


def split_memory_path(text: str, *, allow_empty: bool = False) -> tuple[str, ...]:
    """Validate an agent-given relative path and return its components.

    Args:
        text: the path as the agent wrote it, e.g. ``"notes/BTCUSDT_plan.md"``.
        allow_empty: accept ``""`` (the agent's root folder) and a trailing ``/``; for folders.

    Raises:
        AccessDeniedError: the path tries to leave (or disguises) the agent's folder.
        InvalidParameterError: the path is not a name that can be stored safely.
    """
    if len(text) > MAX_PATH_CHARS:
        raise _invalid(
            f"Path is {len(text)} characters long; the limit is {MAX_PATH_CHARS}.", text, "too_long"
        )
    _check_characters(text)
    if text.startswith("/"):
        raise _deny(
            f"Path {text[:80]!r} is absolute (or a UNC path); give a path relative to your "
            "memory folder, e.g. 'notes/plan.md'.",
            text,
            "absolute",
        )
    if _DRIVE.match(text):
        raise _deny(
            f"Path {text[:80]!r} names a drive; give a path relative to your memory folder.",
            text,
            "drive_letter",
        )
    if text.startswith("~"):
        raise _deny(
            f"Path {text[:80]!r} starts with '~' (a home folder); give a path relative to your "
            "memory folder.",
            text,
            "home_folder",
        )
    if allow_empty:
        if text in ("", "/"):
            return ()
        if text.endswith("/"):
            text = text[:-1]
    elif text == "":
        raise _invalid("Path is empty; name a file such as 'notes/plan.md'.", text, "empty")
    components = tuple(text.split("/"))
    for component in components:
        _check_component(component, text)
    if len(components) > MAX_DEPTH:
        raise _invalid(
            f"Path {text[:80]!r} is {len(components)} levels deep; the limit is {MAX_DEPTH}.",
            text,
            "too_deep",
        )
    return components


def check_agent_id(agent_id: str) -> str:
    """Return ``agent_id`` if it can name a memory folder.

    Raises:
        AccessDeniedError: the id is not 1–64 letters, digits, ``_ - .`` (starting with a letter
            or digit, not ending with a dot) or is a device name.
    """
    if not _AGENT_ID.match(agent_id) or agent_id.endswith("."):
        raise AccessDeniedError(
            f"Agent id {agent_id[:80]!r} cannot name a memory folder: it must be 1-64 letters, "
            "digits, '_', '-' or '.', starting with a letter or digit.",
            details={"agent_id": agent_id[:80], "reason": "invalid_agent_id"},
        )
    if agent_id.split(".", 1)[0].upper() in _DEVICE_NAMES:
        raise AccessDeniedError(
            f"Agent id {agent_id!r} is a reserved device name and cannot name a folder.",
            details={"agent_id": agent_id, "reason": "device_name"},
        )
    return agent_id


def note_path(key: str) -> str:
    """Return ``notes/{key}.md`` for a valid note key.

    Raises:
        InvalidParameterError: the key is not 1–120 letters, digits, ``_ - .``.
    """
    if not _NOTE_KEY.match(key):
        raise InvalidParameterError(
            f"Note key {key[:80]!r} is invalid: use 1-120 letters, digits, '_', '-' or '.', "
            "e.g. 'position_BTCUSDT' or 'market-regime'.",
            details={"parameter": "key", "reason": "invalid_key"},
        )
    path = f"notes/{key}.md"
    try:
        split_memory_path(path)
    except (AccessDeniedError, InvalidParameterError) as exc:
        raise InvalidParameterError(
            f"Note key {key!r} is invalid: {exc.message}",
            details={"parameter": "key", "reason": exc.details.get("reason", "invalid_key")},
        ) from None
    return path
