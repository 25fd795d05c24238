"""The README: the quick start is two commands and CI runs the second; the Python API example runs."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start\n", 1)[1].split("\n## ", 1)[0]
    usage, fresh = (b.strip().splitlines() for b in re.findall(r"```sh\n(.*?)```", section, re.S))
    # It begins with a report of one's own export, then the views, then the sweep.
    assert usage[0].startswith("nsys-tools report my.sqlite ")
    assert "--view" in usage[1] and "--demo --issue" in usage[2]
    # On a fresh machine: two commands, the main job on a bundled real capture, then the tests.
    assert len(fresh) == 2
    capture = fresh[0].rsplit(" ", 1)[1]
    assert "nsys-tools report " in fresh[0] and capture.endswith(".sqlite") and (ROOT / capture).is_file()
    assert "pytest" in fresh[1] and fresh[1] in (ROOT / ".ci" / "run").read_text().splitlines()


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
