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

    assert not [r for r in expand("test") if r.startswith(heavy)]
    assert {r.split("=")[0] for r in extras["census"]} >= set(heavy)
    steps = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "pip install" in line]
    assert "'.[census]'" in steps[0] and "'.[test]'" in steps[1] and steps[1].endswith("pytest")
