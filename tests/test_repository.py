"""The repository itself: light to clone, and nothing unscrubbed in it.

Sweeps and issue charts are kept as ``.tar.xz`` archives (reports/README.md). No Nsight Systems
report (``.nsys-rep``, which holds the capture machine's environment) and no capture scratch (a
hidden folder under reports/) is tracked, and every tracked export, those inside archives included,
passes ``scrub --check``.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest

from nsys_tools import archives
from nsys_tools.read.scrub import check

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 40 << 20  # bytes: the tracked tree
LEDGERS = {"ledger.sqlite"}  # sqlite-utils databases of sessions, not exports


def tracked() -> list[PurePosixPath]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout (the tracked files are what is checked)")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [PurePosixPath(p) for p in out.decode().split("\0") if p]


def test_no_nsys_report_is_tracked():
    assert [str(p) for p in tracked() if p.name.lower().endswith(".nsys-rep")] == []


def test_nothing_is_tracked_under_a_hidden_folder_in_reports():
    hidden = [str(p) for p in tracked() if p.parts[0] == "reports" and any(part.startswith(".") for part in p.parts[1:-1])]
    assert hidden == []


def test_the_tracked_tree_is_light():
    size = sum((ROOT / p).stat().st_size for p in tracked() if (ROOT / p).is_file())
    assert size <= LIMIT, f"{size / 2**20:.1f} MiB tracked, over {LIMIT >> 20} MiB"


def _exports(tmp_path: Path) -> list[Path]:
    """Every tracked export: plain, gzip-compressed (unpacked here) and inside archives (unpacked here)."""
    found = []
    for p in tracked():
        path = ROOT / p
        if p.name.lower().endswith(".sqlite") and p.name not in LEDGERS:
            found.append(path)
        elif p.name.lower().endswith(".sqlite.gz"):
            plain = tmp_path / "gz" / p.parent / p.name.removesuffix(".gz")
            plain.parent.mkdir(parents=True, exist_ok=True)
            plain.write_bytes(gzip.decompress(path.read_bytes()))
            found.append(plain)
        elif archives.is_archive(path):
            into = tmp_path / "archives" / p.parent
            into.mkdir(parents=True, exist_ok=True)
            found.extend(sorted(archives.unpack(path, into).rglob("*.sqlite")))
    return found


@pytest.mark.slow
def test_every_tracked_export_passes_the_scrub_check(tmp_path):
    exports = _exports(tmp_path)
    assert len(exports) >= 150  # the fixtures and every sweep's exports
    found = {}
    for path in exports:
        report = check(path)
        if not report.clean:
            found[str(path.relative_to(tmp_path if path.is_relative_to(tmp_path) else ROOT))] = (report.changed, report.kept)
    assert found == {}
