"""The layers hold: import-linter's contracts in pyproject.toml pass, and no module imports itself
through others (function-level imports count: they run as soon as the function does)."""

from __future__ import annotations

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


def test_the_import_contracts_hold(monkeypatch):
    from importlinter.cli import lint_imports

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0


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
    """Generated sources are data (``.py.txt``), probe scripts live beside their study (kernels/probes)."""
    assert sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "reports").rglob("*.py")) == []
    assert (ROOT / "kernels" / "probes" / "dispatcher_now.py").is_file()
