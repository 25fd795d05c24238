"""Writes go only where they were asked for: a symlink planted inside an output folder (``export
--to``, chart folders) is replaced, never followed; ``export --to`` refuses the input's own
folder; names from a file (a sweep's id, its shape names) never become path parts."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from nsys_tools.cli import app
from nsys_tools.files import replaced_atomically, safe_name, write_text_atomically
from nsys_tools.folder_format import export_path

from .cli import CliRunner
from .conftest import FIXTURES, QUIET

EXPORT = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
runner = CliRunner()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_link_planted_in_a_folder_is_replaced_not_followed(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "a.md").symlink_to(outside)
    (folder / "b.md").symlink_to(tmp_path / "nowhere" / "made.txt")  # dangling: nothing is created there
    write_text_atomically(folder / "a.md", "new")
    write_text_atomically(folder / "b.md", "new")
    assert outside.read_text() == "keep" and not (tmp_path / "nowhere").exists()
    for name in ("a.md", "b.md"):
        assert not (folder / name).is_symlink() and (folder / name).read_text() == "new"
    assert sorted(p.name for p in folder.iterdir()) == ["a.md", "b.md"]  # no partial file left


def test_a_link_the_user_names_is_written_through(tmp_path):
    real = tmp_path / "real.md"
    real.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(real)
    write_text_atomically(link, "new", through_link=True)
    assert link.is_symlink() and real.read_text() == "new"


def test_the_partial_file_has_a_name_nobody_can_plant(tmp_path):
    names = []
    for _ in range(2):
        with replaced_atomically(tmp_path / "x.parquet") as partial:
            names.append(partial.name)
            assert partial.exists() and not partial.is_symlink()
            partial.write_bytes(b"x")
    assert names[0] != names[1] and all(n.startswith(".x.") and n.endswith(".partial.parquet") for n in names)


def test_a_partial_file_swapped_for_a_link_is_an_error(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    with pytest.raises(Exception, match="swapped by another process"):
        with replaced_atomically(tmp_path / "x.md") as partial:
            partial.unlink()
            partial.symlink_to(victim)
    assert victim.read_text() == "keep" and not (tmp_path / "x.md").exists()


def test_export_to_a_folder_with_planted_links(tmp_path):
    src = tmp_path / "in" / EXPORT.name
    src.parent.mkdir()
    shutil.copyfile(EXPORT, src)
    before = digest(src)
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(b"keep")
    to = tmp_path / "frames"
    to.mkdir()
    (to / "SCHEMA.md").symlink_to(src)
    (to / "kernels.parquet").symlink_to(outside)
    res = runner.invoke(app, ["export", str(src), "--to", str(to), "--frames", "kernels"])
    assert res.exit_code == 0, res.output
    assert digest(src) == before and outside.read_bytes() == b"keep"
    assert not (to / "SCHEMA.md").is_symlink() and (to / "SCHEMA.md").read_text().startswith("#")
    assert not (to / "kernels.parquet").is_symlink() and (to / "kernels.parquet").read_bytes()[:4] == b"PAR1"


def test_export_to_the_inputs_own_folder_is_refused(tmp_path, monkeypatch):
    src = tmp_path / EXPORT.name
    shutil.copyfile(EXPORT, src)
    before = sorted(p.name for p in tmp_path.iterdir())
    for to in (str(tmp_path), str(tmp_path / "." / ""), "."):
        monkeypatch.chdir(tmp_path)
        res = runner.invoke(app, ["export", str(src), "--to", to])
        assert res.exit_code == 1, res.output
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and "is the folder of the input" in lines[0]
    link = tmp_path / "sub"
    link.symlink_to(tmp_path)  # the same folder by another name
    assert runner.invoke(app, ["export", str(src), "--to", str(link)]).exit_code == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "sub"])


HOSTILE_IDS = ["/abs/olute", "../../escaped", "a/../../b", "..", ".", "x" * 5000, "ok\nline", "name with spaces"]


@pytest.mark.parametrize("text", HOSTILE_IDS)
def test_safe_name_is_one_file_name(text, tmp_path):
    name = safe_name(text)
    assert "/" not in name and "\x00" not in name and not name.startswith(".") and 0 < len(name) <= 64
    assert (tmp_path / name).parent == tmp_path
    (tmp_path / name).write_text("x")  # a name the file system takes


def test_safe_names_keep_safe_text_and_tell_texts_apart():
    assert safe_name("4096x4096") == "4096x4096" and safe_name("20261129-183449-quiet") == "20261129-183449-quiet"
    assert len({safe_name(t) for t in [*HOSTILE_IDS, "_abs_olute", "x" * 4999, "ok line"]}) == len(HOSTILE_IDS) + 3


def test_a_shape_name_reads_inside_its_folder(tmp_path):
    for shape in ("../x", "/etc/passwd", "a/b"):
        assert export_path(tmp_path, shape).parent == tmp_path


def _sweep_with_id(tmp_path: Path, sweep_id: str) -> Path:
    folder = tmp_path / "sweep"
    shutil.copytree(QUIET, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["id"] = sweep_id
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("sweep_id", ["/abs/charts", "../../up", "x" * 5000])
def test_a_sweep_id_never_chooses_where_charts_go(tmp_path, monkeypatch, sweep_id):
    folder = _sweep_with_id(tmp_path, sweep_id)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    outside = tmp_path / "charts"
    res = runner.invoke(app, ["report", str(folder), "--issue", "-o", str(work / "comment.md")])
    assert res.exit_code == 0, res.output
    charts = work / "charts"
    [made] = list(charts.iterdir())
    assert made.name == safe_name(sweep_id) and any(made.glob("*.html"))
    assert not outside.exists() and not Path("/abs").exists()
    assert sorted(p.name for p in work.iterdir()) == ["charts", "comment.md"]


@pytest.mark.slow
def test_links_planted_in_a_chart_folder_are_replaced(tmp_path, monkeypatch):
    folder = _sweep_with_id(tmp_path, "s1")
    victim = folder / "4096x4096.sqlite"
    before = digest(victim)
    charts = tmp_path / "charts"
    charts.mkdir()
    (charts / "ratio.html").symlink_to(victim)
    (charts / "ratio.png").symlink_to(tmp_path / "elsewhere.png")
    res = runner.invoke(app, ["report", str(folder), "--issue", "--charts", str(charts), "-o", str(tmp_path / "c.md")])
    assert res.exit_code == 0, res.output
    assert digest(victim) == before and not (tmp_path / "elsewhere.png").exists()
    assert not (charts / "ratio.html").is_symlink() and not (charts / "ratio.png").is_symlink()
