"""The bad-input corpus (tests/fixtures/bad-input/corpus.py): every case gets the outcome it
names, with one ``Error:`` line per failure and never a traceback."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from typer.testing import CliRunner

from nsys_tools.cli import BUG, app

from .conftest import FIXTURES

_spec = importlib.util.spec_from_file_location("bad_input_corpus", FIXTURES / "bad-input" / "corpus.py")
corpus = sys.modules["bad_input_corpus"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)
runner = CliRunner()


def test_corpus_is_large_and_in_the_manifest():
    assert len(corpus.CASES) >= 60
    text = (FIXTURES / "bad-input" / "MANIFEST.md").read_text()
    assert corpus.manifest() in text  # regenerate with: python tests/fixtures/bad-input/corpus.py --manifest


@pytest.mark.parametrize("name", list(corpus.CASES))
def test_case(name, tmp_path, monkeypatch):
    case = corpus.CASES[name]
    monkeypatch.delenv("NSYS", raising=False)
    args = case.build(tmp_path)
    res = runner.invoke(app, ["report", *args, "--format", "csv"])
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
    assert "Traceback" not in res.stderr and BUG not in res.stderr, res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    if case.expect == "ok":
        assert res.exit_code == 0, res.stderr
        assert res.stdout.startswith("range,kernel,instances")
    elif case.expect == "error":
        assert res.exit_code == 1 and res.stdout == ""
        assert len(res.stderr.strip().splitlines()) == len(errors) and case.message in errors[-1], res.stderr
    else:
        assert res.exit_code == 1 and res.stdout.startswith("range,kernel,instances") and len(res.stdout.splitlines()) > 1
        assert case.message in errors[-1] and len(errors) >= 2, res.stderr
