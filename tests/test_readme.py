"""The README: the quick start is two commands and CI runs the second; the Python API example runs."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start\n\n```sh\n(.*?)```", readme, re.S).group(1).strip().splitlines()
    assert len(block) == 2
    assert "nsys-tools report --demo" in block[0] and "pytest" in block[1]
    assert block[1] in (ROOT / ".ci" / "run").read_text().splitlines()


def test_python_api_example_runs(monkeypatch, capsys):
    """The README's Python API example, run as it is written, from the repository root."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(ROOT)
    names: dict = {}
    exec(compile(code, "README.md", "exec"), names)
    printed = capsys.readouterr().out
    assert names["kernels"].height == 78 and "NVIDIA H200" in printed
    assert set(names["per_range"]["gpu_id"]) == {0, 1}
    ranges = names["ranges"]
    assert ranges.height == 14 and set(ranges.filter(pl.col("range") == "forward")["instances"]) == {4}
