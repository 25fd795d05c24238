"""Packaging: a license, a changelog, py.typed, one version, a test extra without the census
compilers, and no numpy at run time."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import nsys_tools

from . import torch_train
from .conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"


def make_deep(folder: Path, levels: int) -> Path:
    """An export with ``levels`` nested ranges (tests/fixtures/deep-nesting/make.py)."""
    spec = importlib.util.spec_from_file_location("deep_nesting_make", FIXTURES / "deep-nesting" / "make.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    return make.deep(folder, levels)


def test_license_changelog_and_py_typed():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "nsys-tools authors" in text
    assert PYPROJECT["project"]["license"] == "MIT" and PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert "## [Unreleased]" in (ROOT / "CHANGELOG.md").read_text()
    assert (ROOT / "nsys_tools" / "py.typed").is_file()
    assert "nsys_tools" in PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]


def test_the_version_is_in_one_place():
    project = PYPROJECT["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    source = PYPROJECT["tool"]["hatch"]["version"]["path"]
    assert source == "nsys_tools/__init__.py"
    found = re.findall(r'^__version__ = "([^"]+)"$', (ROOT / source).read_text(), re.M)
    assert found == [nsys_tools.__version__]
    assert f'"{nsys_tools.__version__}"' not in (ROOT / "pyproject.toml").read_text()


def test_the_test_extra_needs_no_census_compilers_and_ci_installs_them():
    extras = PYPROJECT["project"]["optional-dependencies"]
    heavy = ("triton", "cuda-bindings", "nvidia-cuda-nvrtc")

    def expand(name: str) -> list[str]:
        out = []
        for req in extras[name]:
            inner = re.fullmatch(r"nsys-tools\[(.+)\]", req)
            out += [r for e in inner.group(1).split(",") for r in expand(e)] if inner else [req]
        return out

    def installs(line: str) -> list[str]:  # every requirement a "pip install '.[a,b]'" on the line brings
        return [
            r for spec in re.findall(r"pip install [^;&|]*?'\.\[([^\]]+)\]'", line) for e in spec.split(",") for r in expand(e)
        ]

    def heavy_in(line: str) -> set[str]:
        return {r.split("=")[0] for r in installs(line) if r.startswith(heavy)}

    assert not [r for r in expand("test") if r.startswith(heavy)]
    assert {r.split("=")[0] for r in extras["census"]} >= set(heavy)
    # CI runs the README's test command first: the test extra alone, then the whole suite.
    quick = (ROOT / "README.md").read_text().split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    readme_command = next(line for line in quick.splitlines() if ".venv/bin/pytest" in line)
    assert installs(readme_command) and not heavy_in(readme_command) and readme_command.endswith("pytest")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    first = next(i for i, line in enumerate(ci) if line.startswith("step "))
    assert "$test_command" in ci[first] and "README.md" in next(line for line in ci if line.startswith("test_command="))
    # Then it installs the census compilers, by whatever spelling of the extras, before the census tests.
    census_install = next(i for i, line in enumerate(ci) if heavy_in(line) == set(heavy))
    census_tests = next(i for i, line in enumerate(ci) if re.search(r"pytest -m census\b", line))
    assert first < census_install < census_tests


@pytest.mark.slow
def test_reading_comparing_and_charts_run_without_numpy(tmp_path):
    """numpy is no dependency: report (kernels, hist, ranges nested deeper than the fast path's
    threshold), compare (runs of a program; two sweeps: the bootstrap by rounds) and a chart run
    where importing it fails."""
    assert not [r for r in PYPROJECT["project"]["dependencies"] if r.startswith("numpy")]
    deep = make_deep(tmp_path, 40)
    runs = torch_train.exports(tmp_path)
    sweeps = ROOT / "reports" / "sweeps"
    commands = [
        ["report", str(MULTI)],
        ["report", str(MULTI), "--view", "hist", "--chart", str(tmp_path / "hist.png")],
        ["report", str(deep), "--view", "ranges", "--format", "csv"],
        ["compare", str(runs["a"]), str(runs["slow"]), "--names", "op"],
        ["compare", str(sweeps / "20261129-183449-quiet"), str(sweeps / "20261129-202628-quiet")],
    ]
    code = (
        "import json, sys\n"
        "sys.modules['numpy'] = None  # import numpy fails\n"
        "from tests.cli import CliRunner\n"
        "from nsys_tools.cli import app\n"
        "results = [CliRunner().invoke(app, args) for args in json.loads(sys.argv[1])]\n"
        "print(json.dumps([[r.exit_code, r.stdout, repr(r.exception)] for r in results]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"NSYS_TOOLS_CACHE": "0"}
    done = subprocess.run([sys.executable, "-c", code, json.dumps(commands)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert [code for code, _, _ in results] == [0] * len(commands), results
    assert (tmp_path / "hist.png").stat().st_size > 0
    assert len(results[2][1].splitlines()) == 1 + 40 + 3  # the header, deep/0 .. deep/39 and the export's own ranges
    assert "Rows: 37 not distinguishable, 2 slower, 2 faster." in results[3][1]
    assert "Rows: 15 not distinguishable, 1 faster." in results[4][1]
