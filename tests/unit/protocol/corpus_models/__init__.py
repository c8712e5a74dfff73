"""A corpus of answers in the styles of the model families people run Kestrel with.

One YAML file per family (``gpt4o.yaml``, ``claude.yaml``, ``deepseek.yaml``, ``llama3_8b.yaml``,
``qwen25_7b.yaml``). Each output carries its style, whether it is *well meant* (the model meant
exactly one call of an existing tool with every required parameter, or a plain answer, and a
person reading it would know which) and the expected outcome: the accepted call with the
parameters it must yield (``call``, ``params``, optionally ``commentary``), a plain text answer
(``text: true``), or the refusal with its exact error code (``refused``).

The judge runs each output through a real ``ToolExecutor`` over the app's real ToolSpecs with their
handlers replaced by one that records the validated arguments, so parsing, resolution,
permission and validation are all the product's own and nothing is executed. It only uses
interfaces that the parser had before issue 17 too, so the same corpus measures the parser of
an older checkout (``python -m tests.unit.protocol.corpus_models`` from that checkout's root, with
this folder copied in).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.protocol.render import el
from app.tools.registry import ToolRegistry
from app.tools.spec import ALL_PERMISSIONS, AgentContext, ToolSpec

FOLDER = Path(__file__).resolve().parent
FILES = ("gpt4o.yaml", "claude.yaml", "deepseek.yaml", "llama3_8b.yaml", "qwen25_7b.yaml")
CONTEXT = AgentContext(agent_id="corpus", permissions=ALL_PERMISSIONS, role="orchestrator")


@dataclass(frozen=True)
class Output:
    family: str
    index: int
    style: str
    well_meant: bool
    text: str
    expect: Mapping[str, Any]

    @property
    def name(self) -> str:
        return f"{self.family} #{self.index + 1}: {self.style}"

    @property
    def meant_call(self) -> bool:
        """A well-meant output whose intent is a tool call (not a text answer)."""
        return self.well_meant and not self.expect.get("text")


@dataclass(frozen=True)
class Outcome:
    """What the product made of one output."""

    kind: str  # "call", "text" or "refused"
    tool: str = ""
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    code: str = ""
    message: str = ""
    commentary: str | None = None


def load() -> list[Output]:
    outputs = []
    for name in FILES:
        document = yaml.safe_load((FOLDER / name).read_text(encoding="utf-8"))
        for index, item in enumerate(document["outputs"]):
            outputs.append(Output(
                document["family"], index, str(item["style"]), bool(item["well_meant"]),
                str(item["output"]), dict(item["expect"]),
            ))
    return outputs


class Judge:
    """An executor over ``specs`` whose handlers only record what they were called with."""

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        self.captured: list[dict[str, Any]] = []

        async def record(ctx: AgentContext, args: dict[str, Any]) -> Any:
            self.captured.append(args)
            return el("recorded")

        registry = ToolRegistry(dataclasses.replace(spec, handler=record) for spec in specs)
        self.executor = ToolExecutor(registry, MemoryRecorder())

    def outcome(self, output: Output) -> Outcome:
        parsed = self.executor.parse(output.text)
        if parsed.is_text:
            return Outcome("text")
        self.captured.clear()
        result = asyncio.run(self.executor.execute_parsed(CONTEXT, parsed))
        if result.status == "success":
            assert parsed.call is not None
            return Outcome("call", parsed.call.name, self.captured[-1],
                           commentary=getattr(parsed, "commentary", None))
        code = result.error_code.value if result.error_code is not None else result.status
        return Outcome("refused", parsed.tool_name, code=code, message=result.message)


def _same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected == actual
    if expected is None or actual is None:
        return expected is actual
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and set(expected) == set(actual) and all(
            _same(expected[k], actual[k]) for k in expected
        )
    if isinstance(expected, list):
        return isinstance(actual, list | tuple) and len(expected) == len(actual) and all(
            _same(e, a) for e, a in zip(expected, actual, strict=True)
        )
    if isinstance(actual, Decimal | int | float):
        return Decimal(str(expected)) == Decimal(str(actual))
    return str(expected) == str(actual)


def mismatch(output: Output, got: Outcome) -> str:
    """Why ``got`` is not what ``output`` expects, or '' when it is."""
    expect = output.expect
    if expect.get("text"):
        return "" if got.kind == "text" else f"expected a text answer, got {got}"
    if "refused" in expect:
        if got.kind == "refused" and got.code == expect["refused"]:
            return ""
        return f"expected refusal {expect['refused']}, got {got}"
    if got.kind != "call" or got.tool != expect["call"]:
        return f"expected the call {expect['call']}, got {got}"
    for key, value in (expect.get("params") or {}).items():
        if key not in got.params or not _same(value, got.params[key]):
            return f"parameter {key}: expected {value!r}, got {got.params.get(key, '(absent)')!r}"
    if "commentary" in expect and got.commentary != expect["commentary"]:
        return f"commentary: expected {expect['commentary']!r}, got {got.commentary!r}"
    return ""


@dataclass(frozen=True)
class Report:
    total: int
    meant_calls: int
    accepted: int  # well-meant calls accepted and validated
    by_family: Mapping[str, tuple[int, int]]  # family -> (accepted, meant calls)
    refused: Mapping[str, int]  # error code -> outputs refused with it
    refused_meant: Mapping[str, list[str]]  # error code -> well-meant calls refused with it

    @property
    def share(self) -> float:
        return self.accepted / self.meant_calls if self.meant_calls else 0.0

    def lines(self) -> list[str]:
        out = [f"{self.total} outputs, {self.meant_calls} well-meant calls, {self.accepted} "
               f"accepted ({self.share:.0%})"]
        for family, (accepted, meant) in self.by_family.items():
            out.append(f"  {family:<16} {accepted:>3}/{meant:<3} ({accepted / meant:.0%})")
        out.append("refused, by code: " + ", ".join(
            f"{code} {count}" for code, count in sorted(self.refused.items())))
        for code, styles in sorted(self.refused_meant.items()):
            out.append(f"  well-meant but refused with {code} ({len(styles)}): "
                       + "; ".join(styles))
        return out


def report(pairs: Iterable[tuple[Output, Outcome]]) -> Report:
    total = meant = accepted = 0
    families: dict[str, list[int]] = {}
    refused: Counter[str] = Counter()
    refused_meant: dict[str, list[str]] = {}
    for output, got in pairs:
        total += 1
        tally = families.setdefault(output.family, [0, 0])
        if got.kind == "refused":
            refused[got.code] += 1
        if not output.meant_call:
            continue
        meant += 1
        tally[1] += 1
        if got.kind == "call":
            accepted += 1
            tally[0] += 1
        elif got.kind == "refused":
            refused_meant.setdefault(got.code, []).append(f"{output.family}: {output.style}")
    return Report(total, meant, accepted, {k: (v[0], v[1]) for k, v in families.items()},
                  dict(refused), refused_meant)


def real_specs(folder: Path) -> list[ToolSpec]:
    """Every ToolSpec of the app's world (orchestration tools included), built in ``folder``."""
    from tests.helpers.agents import agent_world

    world = agent_world(folder)
    try:
        return list(world.registry)
    finally:
        asyncio.run(world.aclose())


def run_corpus(folder: Path) -> tuple[list[tuple[Output, Outcome]], Report]:
    judge = Judge(real_specs(folder))
    pairs = [(output, judge.outcome(output)) for output in load()]
    return pairs, report(pairs)
