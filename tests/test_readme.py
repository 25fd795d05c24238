"""The README's quick start is two commands, and CI runs the second one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start\n\n```sh\n(.*?)```", readme, re.S).group(1).strip().splitlines()
    assert len(block) == 2
    assert "nsys-tools report --demo" in block[0] and "pytest" in block[1]
    assert block[1] in (ROOT / ".ci" / "run").read_text().splitlines()
