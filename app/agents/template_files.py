"""Agent template files: reading ``resources/agents/*.yaml`` (and a workspace's own templates)
into ``AgentTemplate`` models.

Templates are checked strictly when loaded, because a typo in one (``permisions:``) would otherwise
silently grant or withhold tools: every problem is reported with the file, the field path and the
reason, and two files defining the same template id are both named.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from app import yamltext
from app.agents.templates import AgentTemplate, ConfigField, Limits, ProviderChoice, TaskData
from app.domain.errors import OperationalError
from app.resources import resource_path

_MODELS: dict[str, type[BaseModel]] = {
    "provider": ProviderChoice, "limits": Limits, "task_data": TaskData,
}


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed where an unknown key was found, for the error message."""
    parent = loc[:-1]
    if not parent:
        return list(AgentTemplate.model_fields)
    if parent[0] == "config" and len(parent) == 2:
        return list(ConfigField.model_fields)
    model = _MODELS.get(str(parent[0])) if len(parent) == 1 else None
    return list(model.model_fields) if model else []


def _describe(path: Path, error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        loc = tuple(item["loc"])
        field = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc) or "(document)"
        field = field.replace(".[", "[")
        reason = str(item["msg"]).removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            reason = f"unknown key; allowed here: {', '.join(_allowed_keys(loc))}"
        elif item["type"] != "value_error" and "input" in item:
            reason = f"{reason} (got {item['input']!r:.60})"
        lines.append(f"  - field '{field}': {reason}")
    return f"agent template {path} is invalid:\n" + "\n".join(lines)


def load_template(path: Path) -> AgentTemplate:
    """Load and check one template file.

    Raises:
        OperationalError: unreadable file, invalid YAML, or a template that breaks the format;
            the message names the file, each offending field path and the reason.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OperationalError(f"agent template {path}: cannot be read: {exc}") from exc
    try:
        data = yamltext.load(text)
    except yamltext.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise OperationalError(
            f"agent template {path} is invalid:\n  - field '(document)': not valid YAML{where}: "
            f"{problem}"
        ) from None
    if not isinstance(data, dict):
        raise OperationalError(
            f"agent template {path} is invalid:\n  - field '(document)': the file must hold a "
            f"mapping of template keys, not {type(data).__name__}"
        )
    try:
        template = AgentTemplate.model_validate(data)
    except ValidationError as exc:
        raise OperationalError(_describe(path, exc)) from None
    if template.template_id != path.stem:
        raise OperationalError(
            f"agent template {path} is invalid:\n  - field 'template_id': "
            f"{template.template_id!r} must match the file name ({path.stem!r}), so a template "
            "is found where its id says"
        )
    return template


def load_templates(
    folder: Path | None = None, *, extra_folders: Iterable[Path] = ()
) -> dict[str, AgentTemplate]:
    """Load every ``*.yaml`` template of ``folder`` (default: the bundled ``resources/agents``),
    then of each extra folder that exists (e.g. a workspace's own ``agents/``).

    Raises:
        OperationalError: the main folder is missing, a file is invalid, or two files define the
            same template id (both are named).
    """
    main = folder or resource_path("agents")
    if not main.is_dir():
        raise OperationalError(f"the agent templates folder {main} does not exist")
    templates: dict[str, AgentTemplate] = {}
    origin: dict[str, Path] = {}
    for directory in [main, *(f for f in extra_folders if f.is_dir())]:
        for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
            template = load_template(path)
            if template.template_id in templates:
                raise OperationalError(
                    f"agent template {template.template_id!r} is defined twice: in "
                    f"{origin[template.template_id]} and in {path}; rename one of them"
                )
            templates[template.template_id] = template
            origin[template.template_id] = path
    return templates
