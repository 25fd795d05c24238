"""Every example in docs/ runs, and prints what the page says it prints.

A fenced ``console`` block is a terminal: each ``$ `` line (with its ``\\`` continuations) is a
command, run by bash from a working folder that holds the repository's ``tests``, ``examples``
and ``reports`` (so paths read as they do from the repository root), with ``nsys-tools`` this
checkout; it must exit 0, and every other line of the block must be a line of what it printed
(``...`` stands for lines left out). A ``python`` block runs in one namespace per page, in order.
A block of either kind, or ``bash``/``sh``, whose first line is ``# not run: REASON`` is an
example that needs what CI has not (a GPU, nsys, a cluster) and says so; every other ``bash`` or
``sh`` block is an error, so no example escapes unrun. The reference pages are made from the
registries (``docs/reference.py``): one per command and per view.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
SKIP = re.compile(r"# not run: \S")


def blocks(page: Path) -> list[tuple[str, str]]:
    """The fenced blocks of ``page``: (language, text)."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text(encoding="utf-8"))]


def runnable(page: Path, language: str) -> list[str]:
    return [text for lang, text in blocks(page) if lang == language and not SKIP.match(text)]


def commands(block: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of a console block."""
    out: list[tuple[str, list[str]]] = []
    lines = iter(block.splitlines())
    for line in lines:
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\"):
                command = command[:-1] + next(lines).strip()
            out.append((command, []))
        elif out and line.strip() not in ("", "..."):
            out[-1][1].append(line.rstrip())
    return out


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    """A working folder laid out as the repository root, and ``nsys-tools`` on PATH."""
    work = tmp_path_factory.mktemp("docs")
    for name in ("tests", "examples", "reports"):
        (work / name).symlink_to(ROOT / name)
    bin_ = tmp_path_factory.mktemp("bin")
    (bin_ / "nsys-tools").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m nsys_tools "$@"\n')
    (bin_ / "nsys-tools").chmod(0o755)
    (bin_ / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return work, env


def test_every_shell_block_runs_or_says_why_not():
    for page in PAGES:
        for language, text in blocks(page):
            if language in ("bash", "sh", "shell"):
                assert SKIP.match(text), (
                    f"{page.relative_to(ROOT)}: a {language} block is never run; make it console, or say why not"
                )
            if language == "console":
                assert SKIP.match(text) or commands(text), f"{page.relative_to(ROOT)}: a console block with no $ command"


def test_every_file_a_page_names_is_in_the_repository():
    named = re.compile(r"`((?:nsys_tools|capture|kernels|tests|examples|reports|docs|benchmarks)/[^`\s<>*]*)`")
    missing = [(p.name, m) for p in [*PAGES, ROOT / "README.md"] for m in named.findall(p.read_text()) if not (ROOT / m).exists()]
    assert missing == []


CONSOLE = [p for p in PAGES if runnable(p, "console")]
PYTHON = [p for p in PAGES if runnable(p, "python")]


@pytest.mark.slow
@pytest.mark.parametrize("page", CONSOLE, ids=[str(p.relative_to(DOCS)) for p in CONSOLE])
def test_console_examples_run_and_print_what_the_page_shows(page, shell):
    work, env = shell
    for block in runnable(page, "console"):
        for command, expected in commands(block):
            done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"{page.name}: `{command}` exited {done.returncode}\n{done.stderr}"
            printed = {line.rstrip() for line in (done.stdout + done.stderr).splitlines()}
            missing = [line for line in expected if line not in printed]
            assert not missing, (
                f"{page.name}: `{command}` did not print:\n" + "\n".join(missing) + "\n---\n" + done.stdout + done.stderr
            )


@pytest.mark.slow
@pytest.mark.parametrize("page", PYTHON, ids=[str(p.relative_to(DOCS)) for p in PYTHON])
def test_python_examples_run(page, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    names: dict = {}
    for k, code in enumerate(runnable(page, "python")):
        exec(compile(code, f"{page.relative_to(ROOT)} (block {k + 1})", "exec"), names)


def _reference():
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.pages()


def test_a_reference_page_per_command_and_per_view():
    from typer.main import get_command

    from nsys_tools import views
    from nsys_tools.cli import app

    pages = _reference()
    group = get_command(app)
    for name, command in group.commands.items():
        page = pages[f"commands/{name}.md"]
        assert page.startswith(f"# `nsys-tools {name}`")
        for option in (p for p in command.params if p.param_type_name == "option"):
            assert option.opts[-1] in page, f"{name}: {option.opts[-1]} is not on its page"
        for sub in getattr(command, "commands", {}):
            assert f"commands/{name}-{sub}.md" in pages and f"nsys-tools {name} {sub}" in page
    for name in views.names():
        page = pages[f"views/{name}.md"]
        assert all(f"`{column}`" in page for column in views.spec(name).columns), name
        assert all(f"`{option.flag}`" in page for option in views.spec(name).options), name
        assert f"[`{name}`]({name}.md)" in pages["views/index.md"]
    from nsys_tools import rules

    for name in rules.names():
        page = pages[f"rules/{name}.md"]
        assert page.startswith(f"# Rule `{name}`") and all(f"`{o}`" in page for o in rules.spec(name).options), name
        assert f"[`{name}`]({name}.md)" in pages["rules/index.md"]
