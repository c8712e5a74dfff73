"""What real models write, and what Kestrel makes of it (issue 17).

The corpus (``corpus_models/``, 219 outputs in the styles of GPT-4o-class models, Claude,
DeepSeek V3 and R1, Llama 3 8B and Qwen 2.5 7B) runs through the product's own executor over its
real ToolSpecs. Every output must meet its expectation exactly: the call and the parameters it
yields, a text answer, or the refusal with its exact error code.

Measured on the same corpus (``python -m tests.unit.protocol.corpus_models``):

    well-meant calls accepted   before (main at a5e3f89)   after
    all families                42/172  (24%)               126/172  (73%)
    GPT-4o-class                14/36   (39%)                32/36   (89%)
    Claude                       9/33   (27%)                30/33   (91%)
    DeepSeek                     2/30    (7%)                25/30   (83%)
    Llama 3 8B                   8/36   (22%)                18/36   (50%)
    Qwen 2.5 7B                  9/37   (24%)                21/37   (57%)

Before, four well-meant calls in a model's native syntax (a fenced JSON call, Llama's
``<|python_tag|>``, Qwen's Hermes call after a sentence, a tag written with spaces) were taken as
the task's final text answer; now each is refused with PARSE_ERROR and the XML form.

Still refused, on purpose (46 well-meant calls): another tool-call syntax (JSON, Hermes
``<tool_call>``, Llama's ``<function=...>``, function-call text), a call cut off or with a
missing or misspelt closing tag, a free-text value holding something that reads as a tag, a
wrapper element or a tool name in another case or with hyphens, attributes instead of
parameters, and values of the wrong shape (units, commas, words for enums).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.protocol.corpus_models import (
    FILES,
    Judge,
    Output,
    load,
    mismatch,
    real_specs,
    report,
)

OUTPUTS = load()
BEFORE = (42, 172)  # well-meant calls accepted by the parser before issue 17, measured as above


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Judge:
    return Judge(real_specs(Path(tmp_path_factory.mktemp("corpus"))))


def test_the_corpus_holds_over_200_outputs_from_every_family() -> None:
    assert len(OUTPUTS) >= 200
    families = {output.family for output in OUTPUTS}
    assert len(families) == len(FILES) == 5
    for family in families:
        mine = [o for o in OUTPUTS if o.family == family]
        assert len(mine) >= 40, family
        assert any(not o.well_meant for o in mine), f"{family} has no really wrong output"
    assert len({output.name for output in OUTPUTS}) == len(OUTPUTS)


@pytest.mark.parametrize("output", OUTPUTS, ids=[output.name for output in OUTPUTS])
def test_each_output_gets_exactly_its_expected_outcome(judge: Judge, output: Output) -> None:
    problem = mismatch(output, judge.outcome(output))
    assert not problem, problem


def test_what_is_really_wrong_is_always_refused_never_run(judge: Judge) -> None:
    for output in OUTPUTS:
        if output.well_meant:
            continue
        got = judge.outcome(output)
        assert got.kind == "refused", output.name
        assert got.code in ("MULTIPLE_TOOL_CALLS", "UNKNOWN_TOOL", "MISSING_PARAMETER",
                            "PARSE_ERROR", "INVALID_PARAMETER"), output.name


def test_the_share_of_well_meant_calls_accepted_is_reported_and_beats_the_old_parser(
    judge: Judge, capsys: pytest.CaptureFixture[str]
) -> None:
    result = report((output, judge.outcome(output)) for output in OUTPUTS)
    with capsys.disabled():
        print()
        for line in result.lines():
            print(line)
        print(f"before issue 17: {BEFORE[0]}/{BEFORE[1]} ({BEFORE[0] / BEFORE[1]:.0%})")
    assert result.meant_calls == BEFORE[1]
    assert result.accepted >= 3 * BEFORE[0]
    assert result.share >= 0.7
    assert all(accepted / meant >= 0.5 for accepted, meant in result.by_family.values())
