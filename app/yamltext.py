"""YAML in and out, through libyaml when PyYAML was built with it.

The agents read and write their memory files as YAML every few steps, on the event loop; PyYAML's
pure-Python loader and dumper take 2-3 ms a document there, its libyaml ones (in the PyYAML
wheels) a tenth of that, for the same documents. The pure-Python ones remain the fallback.
Both are the *safe* variants: no YAML tag can construct a Python object.

``check`` validates a document without keeping it. The agents write back, as YAML memory files,
documents this module has just dumped, and each write is checked before it lands; the text of a
recent ``dump`` (or of a recent successful check) is known to parse, so it is not parsed again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import yaml

YAMLError = yaml.YAMLError
_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_KNOWN_VALID_SIZE = 32
_known_valid: OrderedDict[str, None] = OrderedDict()
_known_valid_lock = threading.Lock()


def _remember_valid(text: str) -> None:
    with _known_valid_lock:
        _known_valid[text] = None
        _known_valid.move_to_end(text)
        while len(_known_valid) > _KNOWN_VALID_SIZE:
            _known_valid.popitem(last=False)


def load(text: str | bytes) -> Any:  # noqa: ANN401 - whatever the document holds
    """Parse one YAML document (``None`` for an empty one).

    Raises:
        YAMLError: the text is not valid YAML.
    """
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader


def check(text: str) -> None:
    """Raise ``YAMLError`` unless ``text`` is valid YAML (recently dumped or checked text is
    known to be, and not parsed again)."""
    with _known_valid_lock:
        if text in _known_valid:
            _known_valid.move_to_end(text)
            return
    load(text)
    _remember_valid(text)


def dump(data: Any, *, width: int | None = None) -> str:  # noqa: ANN401 - any plain data
    """Serialise plain data (dicts, lists, strings, numbers) as block YAML, key order kept."""
    text: str = yaml.dump(
        data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, default_flow_style=False,
        width=width,
    )
    _remember_valid(text)
    return text
