"""The layers hold: import-linter's contracts in pyproject.toml pass, and no module imports itself
through others (function-level imports count: they run as soon as the function does)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]


def circles(graph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(graph.modules):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_the_import_contracts_hold():
    """On a graph that also holds the imports made under the installed names (tests/layers.py)."""
    from .layers import lint

    assert lint() == 0


def test_the_graph_holds_the_imports_made_under_the_installed_names(monkeypatch):
    from .layers import Graph

    monkeypatch.syspath_prepend(str(ROOT))
    graph = Graph().build(["nsys_tools", "capture", "kernels", "probes"], None, include_external_packages=True)
    # capture.explore imports the kernels as nsys_tools.kernels.*; grimp alone drops those imports
    assert {"kernels.cuda", "kernels.registry"} <= graph.find_modules_directly_imported_by("capture.explore")
    assert "nsys_tools.study.census" in graph.find_modules_directly_imported_by("probes.controls_census")


@pytest.mark.slow
def test_a_forbidden_import_under_the_installed_name_breaks_the_contracts(tmp_path):
    """In a copy of the tree, a kernel that imports the capture side (the layer above it) as
    ``nsys_tools.capture``, inside a function: the contracts fail on it, where plain lint-imports
    (grimp's graph alone) passes."""
    import shutil
    import subprocess

    for name in ("nsys_tools", "capture", "kernels", "probes"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.cubin"))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    shutil.copyfile(ROOT / "tests" / "layers.py", tmp_path / "tests" / "layers.py")
    shutil.copyfile(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")

    def run(*argv: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)

    assert run(sys.executable, "-m", "tests.layers").returncode == 0  # the copy holds, as the tree does
    cuda = tmp_path / "kernels" / "cuda.py"
    cuda.write_text(cuda.read_text() + "\n\ndef _upward():\n    from nsys_tools.capture import harness\n\n    return harness\n")
    broken = run(sys.executable, "-m", "tests.layers")
    assert broken.returncode == 1 and "kernels.cuda -> capture.harness" in broken.stdout, broken.stdout[-2000:]
    assert run(str(Path(sys.executable).with_name("lint-imports")), "--no-cache").returncode == 0  # grimp alone does not see it


def test_no_import_circle(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    graph = grimp.build_graph("nsys_tools", "capture", "kernels", cache_dir=None)
    assert {"nsys_tools.read.trace", "nsys_tools.views.ranges", "capture.harness", "kernels.cuda"} <= graph.modules
    assert circles(graph) == []


@pytest.mark.parametrize("lazy", [False, True])
def test_a_circle_is_found_even_through_a_function_level_import(tmp_path, monkeypatch, lazy):
    """The check above can fail: a two-module circle, the way trace.py and views/ had one."""
    pkg = tmp_path / "toy_circle"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n" if lazy else "from . import a\n")
    (pkg / "c.py").write_text("from . import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert circles(grimp.build_graph("toy_circle", cache_dir=None)) == [["toy_circle.a", "toy_circle.b"]]


def test_reports_hold_results_not_code():
    """Generated sources are data (``.py.txt``); the probe scripts are the package probes/, which
    the contracts read (on top of the layers)."""
    assert sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "reports").rglob("*.py")) == []
    assert not list((ROOT / "kernels").rglob("probes/*.py"))
