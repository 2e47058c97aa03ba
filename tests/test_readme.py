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
    """As a user types them after the first command: in one shell, in the folder holding ``.venv`` (here a
    link to this environment), with nothing of vcmc on the PATH until the README says how to get it."""
    commands = [b for b in blocks("bash")[1:] if "pip install" not in b]
    assert commands, "the README has command-line examples"
    venv = Path(sys.prefix)
    if not (venv / "bin" / "activate").is_file():
        pytest.skip("this interpreter is not a virtual environment's (no bin/activate)")
    (tmp_path / ".venv").symlink_to(venv, target_is_directory=True)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not (Path(p) / "vcmc").exists())
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {"PATH": path}
    script = "".join(f"echo '### block {i}' >&2\n{body}\n" for i, body in enumerate(commands))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=3000)
    failed = done.stderr.rpartition("### block ")[2].partition("\n")[0]
    assert done.returncode == 0, (f"README block {failed} failed:\n{commands[int(failed or 0)]}\n--- stderr:\n"
                                  f"{done.stderr[-3000:]}")


def test_the_command_line_sections_get_vcmc_on_the_path_first():
    """`vcmc: command not found` after the first command: the first command-line block says how."""
    commands = [b for b in blocks("bash")[1:] if "pip install" not in b]
    first = commands[0].strip().splitlines()[0]
    assert first == "source .venv/bin/activate"
