"""The agents' documents written without PyYAML are byte for byte what libyaml writes."""

from __future__ import annotations

import random

import pytest
import yaml

from app.yamlblock import block_yaml

LIBYAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def libyaml(document: object, width: int | None) -> str:
    return yaml.dump(document, Dumper=LIBYAML_DUMPER, sort_keys=False, allow_unicode=True,
                     default_flow_style=False, width=width)


ANALYSIS = {
    "time": "2017-07-04T01:00:00Z", "symbol": "BTC/USD", "interval": "1h", "signal": "HOLD",
    "confidence": "0.25",
    "indicators": {"RSI(14)": "59.85777064",
                   "MACD(12,26,9)": "macd 18.82203769, signal 19.088107, histogram -0.2660693086",
                   "EMA(50)": "2497.961311"},
    "observations": "last complete candle O 2542.41 H 2564 L 2542.18 C 2560.93 V 247.03; +0.73% "
                    "on the previous close; 10-candle range 2526.83-2576.45",
    "reasoning": "Trend Following rules (rule engine): trend UP (close 2560.93 vs EMA "
                 "2497.961311); no MACD cross on the last complete candle: HOLD",
    "dispatched_to": None,
}
STATE = {
    "schema_version": 1, "updated_at": "2017-07-04T01:00:00Z",
    "symbols": {"BTC/USD": {
        "trend": "UP", "support": ["2467.86", "2526.83"], "resistance": [],
        "summary": "trend UP (close 2560.93 vs EMA 2497.961311); no MACD cross on the last "
                   "complete candle: HOLD", "levels": [{"price": "1", "note": "it's 'quoted'"}],
        "nested": [["a", "b"], [], {}], "flags": [True, False, 0, -12, None, ""],
    }},
}


@pytest.mark.parametrize("width", [None, 100, 40])
@pytest.mark.parametrize("document", [ANALYSIS, STATE], ids=["analysis", "state"])
def test_an_agents_document_is_written_as_libyaml_writes_it(document: dict,
                                                              width: int | None) -> None:
    written = block_yaml(document, width)
    assert written == libyaml(document, width)
    assert yaml.safe_load(written) == document


# every character that changes how a string is written: indicators, quotes, a space (folding,
# leading, trailing, doubled), what reads back as another type, non-ASCII printable characters
ALPHABET = list(" -?:#,[]{}&*!|>'\"%@`.~0123456789aeEnNtTyYfFoOlux+_=<\u00e9\u00a0\u4e2d") + [
    "  ", "null", "true", "No", "---", "...", "0x1f", "1e3", "2017-07-04", "12:30", ": ", " #",
    "'", "word word word ",
]


def _random_document(rng: random.Random) -> object:
    def text(sizes: list[int]) -> str:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.choice(sizes)))

    def value(depth: int) -> object:
        roll = rng.random()
        if depth < 4 and roll < 0.15:
            return {text([0, 1, 2, 5, 20]): value(depth + 1) for _ in range(rng.choice([0, 1, 3]))}
        if depth < 4 and roll < 0.3:
            return [value(depth + 1) for _ in range(rng.choice([0, 1, 3]))]
        if roll < 0.35:
            return rng.choice([True, False, None, 0, -7, 10**30])
        return text([0, 1, 2, 5, 8, 20, 60, 140])

    return {text([0, 1, 2, 5, 20]): value(1) for _ in range(rng.choice([1, 2, 5]))}


def test_random_documents_are_written_as_libyaml_writes_them() -> None:
    rng = random.Random(20261129)
    written = 0
    for _ in range(3000):
        document = _random_document(rng)
        width = rng.choice([None, 100, 40, 20, 3])
        text = block_yaml(document, width)
        if text is not None:
            written += 1
            assert text == libyaml(document, width), document
    assert written > 2500  # these documents are what it is for, so it writes nearly all


@pytest.mark.parametrize("document", [
    {"notes": "line one\nline two"},  # a line break: libyaml escapes or writes a block scalar
    {"tab": "a\tb"},  # not printable for libyaml: double-quoted with an escape
    {"emoji": "\U0001f600"},  # outside the Basic Multilingual Plane: escaped
    {"bom": "\ufeffx"},
    {"price": 0.1},  # floats are the representer's
    {"k" * 129: 1},  # a long key is written as a complex one
    {1: "int key"},
    {},
    [],
    "a scalar document",
])
def test_what_it_does_not_write_exactly_is_left_to_pyyaml(document: object) -> None:
    assert block_yaml(document) is None


def test_a_list_met_twice_is_left_to_pyyaml_which_writes_an_alias() -> None:
    shared: list[str] = []
    assert block_yaml({"first": shared, "again": shared}) is None
    assert block_yaml({"first": [], "again": []}) == "first: []\nagain: []\n"
