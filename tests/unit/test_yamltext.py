"""YAML through libyaml reads and writes exactly what PyYAML's safe pure-Python path does."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from app import yamltext

DOCUMENTS = [
    {"symbol": "BTC/USDT", "price": "43000.5", "signal": "BUY", "confidence": 0.7},
    {"notes": "line one\nline two\n", "tags": ["trend", "ema"], "empty": None, "flag": True},
    {"reason": "EMA(20) crossed above EMA(50) while RSI(14) rose from 41 to 58; " * 4},
    {"unicode": "比特币 · €", "nested": {"a": [1, 2, {"b": "c"}], "d": {}}, "list": []},
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_dump_writes_what_the_pure_python_safe_dumper_writes(document: dict) -> None:
    expected = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
    assert yamltext.dump(document, width=100) == expected
    assert yamltext.load(yamltext.dump(document)) == document


def test_key_order_is_kept_not_sorted() -> None:
    assert yamltext.dump({"z": 1, "a": 2}) == "z: 1\na: 2\n"


def test_an_empty_document_loads_as_none() -> None:
    assert yamltext.load("") is None
    assert yamltext.load(b"# only a comment\n") is None


def test_a_python_tag_is_refused_not_constructed() -> None:
    with pytest.raises(yamltext.YAMLError):
        yamltext.load("!!python/object/apply:os.system ['true']")


def test_invalid_yaml_raises_yaml_error_with_the_line() -> None:
    with pytest.raises(yamltext.YAMLError) as caught:
        yamltext.load("a: 1\nb: [unclosed\n")
    mark = caught.value.problem_mark  # type: ignore[attr-defined]
    assert mark is not None and mark.line >= 1


def test_check_refuses_invalid_yaml_however_many_valid_documents_came_before() -> None:
    for document in DOCUMENTS * 20:
        yamltext.check(yamltext.dump(document))
    with pytest.raises(yamltext.YAMLError):
        yamltext.check("a: [unclosed\n")
    with pytest.raises(yamltext.YAMLError):  # a refusal is not remembered as valid
        yamltext.check("a: [unclosed\n")


def test_a_document_just_dumped_is_checked_without_parsing_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = yamltext.dump({"assessed_at": "2019-10-11T01:00:00Z", "bias": "BUY"})
    parsed: list[str] = []
    real_load = yamltext.load
    monkeypatch.setattr(yamltext, "load", lambda t: parsed.append(t) or real_load(t))
    yamltext.check(text)
    assert parsed == []
    yamltext.check("other: 1\n")  # a text never seen is parsed, once
    yamltext.check("other: 1\n")
    assert parsed == ["other: 1\n"]

LIBYAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_SCALARS = st.one_of(
    st.text(max_size=140),
    st.sampled_from(["123", "0.5", "1e3", "yes", "No", "null", "~", "true", "- item", "a: b",
                     "#hash", "  padded ", "2019-10-11T01:00:00Z", "0o17", "'", '"', ""]),
    st.integers(), st.booleans(), st.none(),
)
_PLAIN = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=20), st.integers(), st.booleans()),
                        children, max_size=4),
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(document=_PLAIN, width=st.sampled_from([None, 20, 100]))
def test_dump_of_plain_data_is_byte_for_byte_what_pyyaml_writes(document: object,
                                                                  width: int | None) -> None:
    """Against the representer with libyaml's emitter, the dumper used before: the emitter is
    the same either way, the node tree is what is built differently."""
    expected = yaml.dump(document, Dumper=LIBYAML_DUMPER, sort_keys=False, allow_unicode=True,
                         default_flow_style=False, width=width)
    assert yamltext.dump(document, width=width) == expected


def test_data_only_the_representer_writes_is_still_written_as_pyyaml_writes() -> None:
    shared = ["a", "b"]
    for document in ({"first": shared, "again": shared}, {"price": 0.1, "n": float("inf")}):
        expected = yaml.dump(document, Dumper=LIBYAML_DUMPER, sort_keys=False, allow_unicode=True)
        assert yamltext.dump(document) == expected
    assert "&id001" in yamltext.dump({"first": shared, "again": shared})
