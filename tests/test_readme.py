"""The README is a door: short, its two commands work, its links lead somewhere, its Python runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def quick_start() -> list[str]:
    """The quick start's commands: the one shell block of its section."""
    section = README.split("## Quick start\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.S)
    return block.strip().splitlines()


def test_the_readme_is_a_door_not_the_manual():
    assert len(README.splitlines()) <= 400


@pytest.mark.slow  # the report in a fresh interpreter, about 2 s
def test_the_first_command_reports_a_bundled_capture():
    install, tests = quick_start()
    assert install.startswith("python3 -m venv .venv && .venv/bin/pip install . && ")
    # The main job, as the installed console script runs it (here from the checkout): a real capture, no GPU.
    argv = install.rsplit(" && ", 1)[1].split()
    assert argv[0] == ".venv/bin/nsys-tools"
    done = subprocess.run([sys.executable, "-m", "nsys_tools", *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("| range | kernel | instances |") and "sm80_xmma_gemm" in done.stdout.replace("\\", "")
    assert tests == "python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/pytest"


def test_ci_runs_the_readme_test_command_as_written(tmp_path):
    """``.ci/run`` takes its first step from the README itself: run its quick-start extraction on a
    README whose test command is different, and it finds that one."""
    script = (ROOT / ".ci" / "run").read_text()
    extract = next(line for line in script.splitlines() if line.startswith("test_command="))
    other = README.replace(".venv/bin/pytest\n", ".venv/bin/pytest -x tests/test_readme.py\n", 1)
    (tmp_path / "README.md").write_text(other)
    done = subprocess.run(["bash", "-c", f'{extract}\nprintf %s "$test_command"'], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/pytest -x tests/test_readme.py"


def test_every_relative_link_leads_to_a_file():
    links = re.findall(r"\]\(([^)#\s]+)\)", README)
    local = [link for link in links if "://" not in link]
    assert local
    assert [link for link in local if not (ROOT / link).exists()] == []


def test_the_python_example_runs(monkeypatch):
    (code,) = re.findall(r"```python\n(.*?)```", README, re.S)
    monkeypatch.chdir(ROOT)
    names: dict = {}
    exec(compile(code, "README.md", "exec"), names)
    assert names["kernels"].height == 78
    assert set(names["ranges"]["gpu_id"]) == {0, 1}
