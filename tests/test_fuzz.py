"""Seeded fuzzing: real exports corrupted at random offsets, read by the report, the scrub check
and the CLI. Whatever the damage, the answer is a table or an error naming the file: never a
traceback, never an exception the toolkit did not mean to raise."""

from __future__ import annotations

import random

import polars as pl
import pytest

from nsys_tools.cli import BUG, app
from nsys_tools.errors import NsysToolsError
from nsys_tools.read.scrub import check
from nsys_tools.run.report import kernel_summary

from .cli import CliRunner
from .conftest import FIXTURES

pytestmark = pytest.mark.slow  # 240 corruptions of real exports (about 18 s)

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


# -- Hypothesis: hostile text in an export and hostile manifests in a sweep folder ---------------
import json  # noqa: E402
import shutil  # noqa: E402
import sqlite3  # noqa: E402
from pathlib import Path  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

HOSTILE_CHARS = st.sampled_from(list("|`*_[]<>&@#\\\r\n\t\x00\x1b\x07\x9b\x85\u2028\u2029\u202e\u2066\u200b\ufeff;:=/~ "))
HOSTILE_TEXT = st.text(alphabet=st.one_of(HOSTILE_CHARS, st.characters(codec="utf-8", exclude_categories=("Cs",))), max_size=300)
QUIET = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"
NEUTRALIZED = ("\x1b", "\u202e", "\u2066", "\u200b", "\x07", "\x9b")


@pytest.fixture(scope="module")
def hostile_export(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "run.sqlite"
    shutil.copyfile(SOURCES[0], path)
    con = sqlite3.connect(path)
    sid = con.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
    con.close()
    return path, sid


@pytest.mark.slow  # 60 names x 3 formats: about 40 s on 2 cores
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(HOSTILE_TEXT.filter(bool), st.binary(min_size=1, max_size=200)))
def test_any_kernel_name_gives_a_neutral_table_or_one_error(hostile_export, name):
    path, sid = hostile_export
    con = sqlite3.connect(path)
    with con:
        con.execute("UPDATE StringIds SET value = CAST(? AS TEXT) WHERE id = ?", (name, sid))
    con.close()
    data = path.read_bytes()
    runner = CliRunner()
    for fmt in ("markdown", "table", "csv"):
        res = runner.invoke(app, ["report", str(path), "-f", fmt])
        assert "Traceback" not in res.stderr and BUG not in res.stderr, res.stderr
        assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
        assert res.exit_code == 0 or (res.exit_code == 1 and res.stderr.startswith("Error: ")), res.stderr
        if res.exit_code == 0 and fmt != "csv":
            assert not any(c in res.stdout for c in NEUTRALIZED)
        if res.exit_code == 0 and fmt == "markdown":
            rows = [line for line in res.stdout.splitlines() if line.startswith("|") and not line.startswith("|-")]
            assert len({_pipes(line) for line in rows}) == 1  # one cell per column, every row
    assert path.read_bytes() == data  # reading changed nothing


def _pipes(line: str) -> int:
    """The unescaped pipes of a markdown row (a backslash escapes the next character)."""
    n, k = 0, 0
    while k < len(line):
        if line[k] == "\\":
            k += 2
            continue
        n += line[k] == "|"
        k += 1
    return n


MANIFEST_VALUES = st.one_of(
    HOSTILE_TEXT,
    st.integers(),
    st.none(),
    st.lists(HOSTILE_TEXT, max_size=3),
    st.dictionaries(HOSTILE_TEXT, HOSTILE_TEXT, max_size=2),
)


@pytest.fixture(scope="module")
def one_shape_sweep(tmp_path_factory):
    """The bundled sweep cut to one shape, as a starting point for hostile manifests."""
    folder = tmp_path_factory.mktemp("sweep") / "s"
    folder.mkdir()
    for name in ("4096x768.sqlite", "4096x768.harness.json"):
        shutil.copyfile(QUIET / name, folder / name)
    manifest = json.loads((QUIET / "manifest.json").read_text())
    manifest["shapes"] = {"4096x768": manifest["shapes"]["4096x768"]}
    manifest["spec"]["shapes"] = ["4096x768"]
    return folder, manifest


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    changes=st.dictionaries(
        st.sampled_from(["spec.title", "spec.plugins", "spec.op", "spec.control", "spec.impls", "id", "created_utc", "kind",
                         "gpu_before", "spec.outputs", "spec.shapes", "git", "nsys"]),
        MANIFEST_VALUES,
        max_size=4,
    )
)  # fmt: skip
def test_any_manifest_gives_a_report_or_one_error_and_runs_no_code(one_shape_sweep, tmp_path_factory, changes):
    folder, manifest = one_shape_sweep
    marker = folder.parent / "ran"
    planted = folder.parent / "planted.py"
    planted.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    edited = json.loads(json.dumps(manifest))
    edited["spec"]["plugins"] = [str(planted), "planted"]
    for key, value in changes.items():
        where = edited["spec"] if key.startswith("spec.") else edited
        where[key.removeprefix("spec.")] = value
    (folder / "manifest.json").write_text(json.dumps(edited))
    runner = CliRunner()
    for args in (["-f", "csv"], ["-f", "markdown"]):
        res = runner.invoke(app, ["report", str(folder), *args])
        assert "Traceback" not in res.stderr and BUG not in res.stderr, (changes, res.stderr)
        assert res.exception is None or isinstance(res.exception, SystemExit), (changes, repr(res.exception))
        assert res.exit_code in (0, 1, 2), res.stderr
        if res.exit_code == 1:
            assert [line for line in res.stderr.splitlines() if line.startswith("Error: ")], res.stderr
    assert not marker.exists(), changes
