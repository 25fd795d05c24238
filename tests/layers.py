"""The import contracts of pyproject.toml, checked on a graph that sees every import.

``capture/`` and ``kernels/`` stay top-level folders in a checkout and are installed inside the package
(``nsys_tools.capture``, ``nsys_tools.kernels``), so their code imports them under the package's names.
grimp, which import-linter reads the tree with, finds no module ``nsys_tools.kernels.cuda`` in a checkout
and drops such an import: ``capture.explore``'s imports of the kernels, or a kernel importing the capture
side, would go unchecked. ``Graph`` builds grimp's graph and adds each of those imports under the name the
checkout gives the module (``kernels.cuda``), so every contract sees it.

``python -m tests.layers`` runs the contracts on that graph (``lint-imports`` alone would miss those imports).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from importlinter.adapters.building import GraphBuilder

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ("capture", "kernels")  # installed as nsys_tools.capture and nsys_tools.kernels


def bundled_imports(graph, root: Path) -> list[tuple[str, str, int, str]]:
    """Every import of ``nsys_tools.capture.*`` / ``nsys_tools.kernels.*`` in the modules of ``graph``
    (read from their files under ``root``), function-level ones too: (importer, imported as the checkout
    names it, line number, line)."""
    found = []
    for module in sorted(graph.modules):
        parts = module.split(".")
        path = root.joinpath(*parts).with_suffix(".py")
        if not path.is_file():
            path = root.joinpath(*parts, "__init__.py")
        if not path.is_file():
            continue  # an external package
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # ``from nsys_tools.kernels import cuda`` (a module) or ``... import OP`` (a name in the package)
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in filter(_bundled, names):
                found.append((module, _resolve(graph, name), node.lineno, lines[node.lineno - 1].strip()))
    return list(dict.fromkeys(found))


def _bundled(name: str) -> bool:
    return any(name == f"nsys_tools.{b}" or name.startswith(f"nsys_tools.{b}.") for b in BUNDLED)


def _resolve(graph, name: str) -> str:
    """``nsys_tools.kernels.cuda`` as the checkout's module ``kernels.cuda``; a name that is no module
    (``nsys_tools.kernels.layernorm.OP``) as the nearest module that holds it."""
    local = name.removeprefix("nsys_tools.")
    while local not in graph.modules and "." in local:
        local = local.rpartition(".")[0]
    return local


class Graph(GraphBuilder):
    """grimp's graph of the checkout at ``root``, with the imports made under the package's names."""

    def __init__(self, root: Path = ROOT):
        self.root = root

    def build(self, root_package_names, cache_dir, include_external_packages=False, exclude_type_checking_imports=False):
        graph = super().build(root_package_names, None, include_external_packages, exclude_type_checking_imports)
        for importer, imported, line, text in bundled_imports(graph, self.root):
            if importer != imported:
                graph.add_import(importer=importer, imported=imported, line_number=line, line_contents=text)
        return graph


def lint(root: Path = ROOT, builder: GraphBuilder | None = None) -> int:
    """import-linter's contracts in ``root``'s pyproject.toml on ``builder``'s graph (``Graph``): 0 when
    all hold. The packages are those Python finds first (``root`` goes first on ``sys.path``; a package
    imported already is the one read)."""
    import os

    from importlinter import configuration
    from importlinter.application import use_cases
    from importlinter.application.app_config import settings

    configuration.configure()
    settings.configure(GRAPH_BUILDER=builder or Graph(root))
    cwd, path = os.getcwd(), list(sys.path)
    os.chdir(root)
    sys.path.insert(0, str(root))
    try:
        passed = use_cases.lint_imports(config_filename=str(root / "pyproject.toml"), cache_dir=None)
        return 0 if passed else 1
    finally:
        os.chdir(cwd)
        sys.path[:] = path
        configuration.configure()


if __name__ == "__main__":
    sys.exit(lint())
