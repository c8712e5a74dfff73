"""YAML in and out, through libyaml when PyYAML was built with it.

The agents read and write their memory files as YAML every few steps, on the event loop; PyYAML's
pure-Python loader and dumper take 2-3 ms a document there, its libyaml ones (in the PyYAML
wheels) a tenth of that, for the same documents. The pure-Python ones remain the fallback.
Both are the *safe* variants: no YAML tag can construct a Python object.
"""

from __future__ import annotations

from typing import Any

import yaml

YAMLError = yaml.YAMLError
_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str | bytes) -> Any:  # noqa: ANN401 - whatever the document holds
    """Parse one YAML document (``None`` for an empty one).

    Raises:
        YAMLError: the text is not valid YAML.
    """
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader


def dump(data: Any, *, width: int | None = None) -> str:  # noqa: ANN401 - any plain data
    """Serialise plain data (dicts, lists, strings, numbers) as block YAML, key order kept."""
    return yaml.dump(
        data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, default_flow_style=False,
        width=width,
    )
