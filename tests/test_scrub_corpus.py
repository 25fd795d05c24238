"""The planted corpus (tests/identity_corpus.py) through scrub: each kind is named by --check,
none survives anywhere in the file's bytes, and no report changes."""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

import pytest

from nsys_tools.cli import app
from nsys_tools.read.scrub import _Identity, check, scrub

from . import identity_corpus as corpus
from .cli import CliRunner
from .conftest import FIXTURES

VIEWS = (
    ["-f", "csv"],
    ["--view", "ranges", "-f", "csv"],
    ["--view", "api", "-f", "csv"],
    ["--view", "memops", "-f", "csv"],
    ["--view", "gaps", "-f", "csv"],
    ["--by", "device,process,stream", "-f", "csv"],
)


def _copy(name: str, tmp_path: Path) -> Path:
    src = FIXTURES / name
    dst = tmp_path / "planted.sqlite"
    if src.suffix == ".gz":
        dst.write_bytes(gzip.decompress(src.read_bytes()))
    else:
        shutil.copyfile(src, dst)
    return dst


def _reports(path: Path) -> dict[str, str]:
    out = {}
    for args in VIEWS:
        res = CliRunner().invoke(app, ["report", str(path), *args])
        assert res.exit_code == 0, res.output
        out[" ".join(args)] = res.stdout
    return out


def test_each_probe_is_found_as_its_kind_and_replaced_once():
    who = _Identity({corpus.USER, corpus.SHORT_USER}, {corpus.HOST}, "")
    for probe in corpus.PROBES:
        done = who.clean(probe.text)
        assert done is not None, probe
        assert probe.label in done[1], (probe, done)
        assert probe.needle not in done[0], (probe, done)
        assert who.clean(done[0]) is None, (probe, done)  # what scrub writes, --check passes
    assert len({p.kind for p in (*corpus.PROBES, *corpus.SCHEMA_PROBES)}) >= 40


def test_pseudonyms_are_the_same_for_the_same_value_within_a_file():
    who = _Identity(set(), set(), "")
    first, _ = who.clean("a 10.0.0.7 b 10.0.0.8 c ana@lab.example.org")
    again, _ = who.clean("10.0.0.8 then 10.0.0.7, mail ANA@lab.example.org")
    assert first == "a <ip-1> b <ip-2> c <email-1>" and again == "<ip-2> then <ip-1>, mail <email-1>"


@pytest.mark.slow
@pytest.mark.parametrize(
    "fixture",
    ["layernorm-3impl/layernorm-3impl-nsys2024.2.sqlite", "multi-gpu/multi-gpu-nsys2025.3.sqlite", "torch-train/run-a.sqlite.gz"],
)
def test_planted_corpus_is_named_then_gone_and_no_report_changes(fixture, tmp_path):
    path = _copy(fixture, tmp_path)
    probes = corpus.plant(path)
    raw = path.read_bytes()
    assert all(p.needle.encode() in raw for p in probes), [p for p in probes if p.needle.encode() not in raw]
    before = _reports(path)
    res = CliRunner().invoke(app, ["scrub", "--check", str(path)])
    assert res.exit_code == 1 and "hold identity" in res.stderr
    named = res.stderr.split("would remove", 1)[1].splitlines()[0]
    for label in {p.label for p in probes}:
        assert label in named, (label, named)
    assert path.read_bytes() == raw  # --check writes nothing
    res = CliRunner().invoke(app, ["scrub", str(path)])
    assert res.exit_code == 0, res.output
    raw = path.read_bytes()
    assert [p for p in probes if p.needle.encode() in raw] == []
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA freelist_count").fetchone()[0] == 0  # no freed page keeps old rows
        assert con.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'").fetchone()[0] == 0
        # the trigger never ran: the foreign table holds the rows planted, scrubbed
        assert con.execute(f"SELECT count(*) FROM {corpus.FOREIGN_TABLE}").fetchone()[0] == len(corpus.PROBES)
        # the view and index were made again under scrubbed names, and the view still reads
        views = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'view'")]
        assert views == ["jobs on host"] and con.execute(f'SELECT owner, n FROM "{views[0]}"').fetchall() == [("email-1", 1)]
        assert con.execute("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'by_ip-2'").fetchone()[0] == 1
    con.close()
    res = CliRunner().invoke(app, ["scrub", "--check", str(path)])
    assert res.exit_code == 0 and "nothing to remove" in res.stderr, res.output
    assert _reports(path) == before


def test_identity_in_analysis_names_is_listed_and_left(tmp_path):
    path = _copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite", tmp_path)
    scrub(path)
    with sqlite3.connect(path) as con:
        kernel = con.execute("SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
        name = con.execute("SELECT value FROM StringIds WHERE id = ?", (kernel,)).fetchone()[0]
        con.execute("UPDATE StringIds SET value = value || '_10.4.4.4' WHERE id = ?", (kernel,))
        con.execute("UPDATE NVTX_EVENTS SET text = 'batch from /data/pkim/x' WHERE rowid = (SELECT min(rowid) FROM NVTX_EVENTS)")
    con.close()
    before = _reports(path)
    found = check(path)
    assert found.total == 0 and len(found.kept) == 2, found.kept
    assert any("StringIds.value (id " in k and "IPv4 addresses" in k for k in found.kept)
    assert any("NVTX_EVENTS.text" in k and "shared-storage folder" in k for k in found.kept)
    res = CliRunner().invoke(app, ["scrub", "--check", str(path)])
    assert res.exit_code == 1 and "left as it is" in res.stderr
    scrub(path)
    raw = path.read_bytes()
    assert f"{name}_10.4.4.4".encode() in raw and b"/data/pkim/x" in raw
    assert _reports(path) == before


def test_no_hint_rules_out_a_text_its_pattern_matches():
    """Each kind skips a text holding none of its hints: never one that its pattern would match."""
    from nsys_tools.read import identity

    texts = [p.text for p in (*corpus.PROBES, *corpus.SCHEMA_PROBES)] + [corpus.ENVIRONMENT]
    for kind in identity.KINDS:
        for text in texts:
            if any(not kind.keep(m.group()) for m in kind.pattern.finditer(text)):
                assert any(h in text.lower() for h in kind.hint), (kind.label, text)
