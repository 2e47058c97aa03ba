"""The README's code blocks run as written: every ``python`` block in order in one namespace, every ``bash``
block except the set-up commands, each in a fresh folder with this environment's ``vcmc`` on the PATH."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(language: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(README.read_text(encoding="utf-8")) if lang == language]


def test_the_readme_opens_with_the_two_set_up_commands():
    first = blocks("bash")[0].strip().splitlines()
    assert len(first) == 2
    assert first[0].endswith("vcmc demo") and "pip install" in first[0]
    assert first[1].endswith("pytest -n 2 -q") and "pip install" in first[1]
    # .ci/run runs exactly the second one
    assert "pytest -n 2 -q" in (README.parent / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_python_blocks_run_as_written(tmp_path, monkeypatch):
    code = blocks("python")
    assert code, "the README has Python examples"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}
    for body in code:
        exec(compile(body, str(README), "exec"), namespace)  # noqa: S102 - the README is this repository's


@pytest.mark.slow
def test_the_command_line_blocks_run_as_written(tmp_path):
    commands = [b for b in blocks("bash")[1:] if "pip install" not in b]
    assert commands, "the README has command-line examples"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for body in commands:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=1500)
        assert done.returncode == 0, f"README block failed:\n{body}\n--- stderr:\n{done.stderr[-3000:]}"
