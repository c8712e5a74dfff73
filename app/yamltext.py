"""YAML in and out, through libyaml when PyYAML was built with it.

The agents read and write their memory files as YAML every few steps, on the event loop; PyYAML's
pure-Python loader and dumper take 2-3 ms a document there, its libyaml ones (in the PyYAML
wheels) a tenth of that, for the same documents. The pure-Python ones remain the fallback.
Both are the *safe* variants: no YAML tag can construct a Python object.

``check`` validates a document without keeping it. The agents write back, as YAML memory files,
documents this module has just dumped, and each write is checked before it lands; the text of a
recent ``dump`` (or of a recent successful check) is known to parse, so it is not parsed again.

``dump`` writes plain JSON-shaped data (dicts, lists, strings, ints, bools, None: what the agents'
schemas dump to) itself when ``app.yamlblock`` can write it exactly as libyaml would: an agent
backtest dumps two documents a bar. Other plain data gets the node tree PyYAML's representer
would build, handed to the same emitter (the representer's generic dispatch was half the cost of
a dump); anything else (floats, other types, a list or dict appearing twice, which PyYAML writes
as an anchor and alias) goes through the representer.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from app.yamlblock import block_yaml

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
    text = block_yaml(data, width)
    if text is None:
        try:
            node = _plain_node(data, set())
        except _NotPlain:
            text = yaml.dump(
                data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True,
                default_flow_style=False, width=width,
            )
        else:
            text = _emit(node, width)
    _remember_valid(text)
    return text


_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class _NotPlain(Exception):
    """The data holds something only the representer writes as PyYAML would."""


def _plain_node(data: Any, containers: set[int]) -> Node:  # noqa: ANN401 - any plain data
    """The node SafeRepresenter builds for ``data`` (block style, no default scalar style)."""
    kind = type(data)
    if kind is str:
        return ScalarNode(_STR, data)
    if kind is dict or kind is list:
        if id(data) in containers:  # PyYAML would write an alias
            raise _NotPlain
        containers.add(id(data))
        if kind is dict:
            return MappingNode(_MAP, [
                (_plain_node(key, containers), _plain_node(value, containers))
                for key, value in data.items()
            ], flow_style=False)
        return SequenceNode(_SEQ, [_plain_node(item, containers) for item in data],
                            flow_style=False)
    if kind is bool:
        return ScalarNode(_BOOL, "true" if data else "false")
    if kind is int:
        return ScalarNode(_INT, str(data))
    if data is None:
        return ScalarNode(_NULL, "null")
    raise _NotPlain


def _emit(node: Node, width: int | None) -> str:
    stream = io.StringIO()
    dumper = _DUMPER(stream, default_flow_style=False, width=width, allow_unicode=True,
                     sort_keys=False)
    try:
        dumper.open()
        dumper.serialize(node)
        dumper.close()
    finally:
        dumper.dispose()
    return stream.getvalue()
