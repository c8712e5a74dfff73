"""README's two commands stay true: CI runs exactly README's set-up and test commands."""

import re

from tests.helpers.paths import REPO


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    head = text.split("---", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", head)


def test_readme_starts_with_a_launch_and_a_test_command():
    launch, test = readme_commands()[:2]
    assert launch.startswith("bash scripts/bootstrap && ") and "kestrel" in launch
    assert test.startswith("bash scripts/bootstrap && ") and "pytest" in test


def test_ci_runs_the_readme_setup_and_test_commands():
    _, test = readme_commands()[:2]
    setup, command = test.split(" && ", 1)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert setup in ci
    assert command in ci
    assert ci.index(setup) < ci.index(command)
