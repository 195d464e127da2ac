"""The README's two fresh-machine commands, and .ci/run running the test one verbatim."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## On a fresh machine", 1)[1].split("\n## ", 1)[0]
    # Commands are the untagged fences; sample output is fenced as ```text.
    blocks = re.findall(r"^```(\w*)\n(.*?)\n```$", section, flags=re.S | re.M)
    return [body for tag, body in blocks if not tag]


def test_readme_has_exactly_two_commands():
    commands = _commands()
    assert len(commands) == 2, commands
    demo, tests = commands
    assert "gluon_cf.demo" in demo and "pytest" in tests


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _commands()[1] in ci
