"""The command line stays thin: no function in nsys_tools/cli/ is over 80 lines (decorators included)."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "nsys_tools" / "cli"
LIMIT = 80


def lengths() -> dict[str, int]:
    found = {}
    for file in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found[f"{file.name}:{node.name}"] = node.end_lineno - first + 1
    return found


def test_no_function_in_the_cli_is_over_80_lines():
    found = lengths()
    assert len(found) > 50  # every module was read
    assert {name: n for name, n in found.items() if n > LIMIT} == {}


def test_the_measure_counts_decorators_and_bodies(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    source = f"@app.command()\ndef long():\n{body}\n"
    node = ast.parse(source).body[0]
    assert node.end_lineno - node.decorator_list[0].lineno + 1 == LIMIT + 2
