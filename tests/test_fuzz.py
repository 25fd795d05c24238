"""Seeded fuzzing: real exports corrupted at random offsets, read by the report, the scrub check
and the CLI. Whatever the damage, the answer is a table or an error naming the file: never a
traceback, never an exception the toolkit did not mean to raise."""

from __future__ import annotations

import random

import polars as pl
import pytest
from typer.testing import CliRunner

from nsys_tools.cli import BUG, app
from nsys_tools.errors import NsysToolsError
from nsys_tools.report import kernel_summary
from nsys_tools.scrub import check

from .conftest import FIXTURES

SOURCES = [
    FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite",
    FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite",
    FIXTURES / "bad-input" / "no-nvtx.sqlite",
]
CASES = 240
SEED = 20261130


def _page_size(data: bytes) -> int:
    size = int.from_bytes(data[16:18], "big")
    return 65536 if size == 1 else size


def corrupt(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One random corruption of ``data`` and what it was."""
    b = bytearray(data)
    size = _page_size(data)
    pages = len(b) // size
    kind = rng.choice(["bytes", "bytes", "bits", "page-noise", "page-zero", "page-swap", "cut"])
    if kind == "bytes":
        n = rng.choice([1, 4, 32, 256])
        at = rng.randrange(len(b) - n)
        b[at : at + n] = rng.randbytes(n)
        return bytes(b), f"{n} random bytes at {at}"
    if kind == "bits":
        spots = [rng.randrange(len(b)) for _ in range(rng.choice([1, 8, 64]))]
        for at in spots:
            b[at] ^= 1 << rng.randrange(8)
        return bytes(b), f"{len(spots)} bits flipped from {min(spots)}"
    page = rng.randrange(pages)
    span = slice(page * size, (page + 1) * size)
    if kind == "page-noise":
        b[span] = rng.randbytes(size) if page else b[:100] + rng.randbytes(size - 100)
        return bytes(b), f"page {page + 1} noise"
    if kind == "page-zero":
        b[span] = bytes(size) if page else b[:100] + bytes(size - 100)
        return bytes(b), f"page {page + 1} zeroed"
    if kind == "page-swap":
        other = rng.randrange(1, pages)
        page = max(page, 1)
        first, second = bytes(b[page * size : (page + 1) * size]), bytes(b[other * size : (other + 1) * size])
        b[page * size : (page + 1) * size], b[other * size : (other + 1) * size] = second, first
        return bytes(b), f"pages {page + 1} and {other + 1} swapped"
    keep = rng.randrange(1, pages)  # cut to whole pages and make the header agree, so the read goes deep
    b = b[: keep * size]
    b[28:32] = keep.to_bytes(4, "big")
    return bytes(b), f"cut to {keep} pages, header patched"


def test_fuzzed_exports_give_a_table_or_a_named_error(tmp_path):
    rng = random.Random(SEED)
    outcomes = {"table": 0, "error": 0}
    runner = CliRunner()
    for k in range(CASES):
        src = SOURCES[k % len(SOURCES)]
        data, what = corrupt(src.read_bytes(), rng)
        path = tmp_path / f"case{k}.sqlite"
        path.write_bytes(data)
        label = f"case {k} ({src.name}: {what})"
        try:
            assert isinstance(kernel_summary([path]), pl.DataFrame)
            outcomes["table"] += 1
        except NsysToolsError as err:
            assert err.path is not None and err.path.name == path.name, label
            outcomes["error"] += 1
        except BaseException as exc:  # noqa: B036 - anything else is the failure under test
            pytest.fail(f"{label}: {type(exc).__name__}: {exc}")
        try:
            check(path)
        except NsysToolsError:
            pass
        except BaseException as exc:  # noqa: B036
            pytest.fail(f"{label}: scrub --check raised {type(exc).__name__}: {exc}")
        if k % 6 == 0:
            res = runner.invoke(app, ["report", str(path), "-f", "csv"])
            assert res.exit_code in (0, 1) and BUG not in res.stderr and "Traceback" not in res.stderr, label
            assert res.exit_code == 0 or res.stderr.startswith("Error: ") and len(res.stderr.strip().splitlines()) == 1, label
        path.unlink()
    assert outcomes["error"] > CASES // 4 and outcomes["table"] > 0, outcomes  # the corruptions reach both outcomes
