"""Every command on every bundled export and committed sweep gives the output stored under tests/golden/out.

An intended change of output regenerates them: ``python -m tests.golden --update`` (then read the diff).
"""

from __future__ import annotations

import pytest

from tests.golden.cases import OUT, cases, run_case

CASES = cases()


def test_every_case_has_a_stored_output_and_no_stored_output_is_orphaned():
    stored = {p.stem for p in OUT.glob("*.txt")}
    assert stored == set(CASES)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=[pytest.mark.census] if CASES[name][0] == "census" else []) for name in sorted(CASES)]
)
def test_output_is_unchanged(name):
    expected = (OUT / f"{name}.txt").read_text(encoding="utf-8")
    assert run_case(CASES[name]) == expected, f"{name} changed; if on purpose: python -m tests.golden --update '{name}'"
