"""Packaging: a license, a changelog, py.typed, one version, and a test extra without the
census compilers."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import nsys_tools

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


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
