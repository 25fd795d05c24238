"""Files and folders from anyone: no code runs from data, outputs are escaped for where they go,
no write escapes its output, and inputs keep their bytes. Hand-written cases, each one a way
a shared file or folder could turn the tool against whoever reads it."""

from __future__ import annotations

import json
import os
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from nsys_tools.cli import BUG, app

from .cli import CliRunner
from .conftest import FIXTURES

REPO = Path(__file__).resolve().parents[1]
QUIET = REPO / "reports" / "sweeps" / "20261129-183449-quiet"
NEW = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
runner = CliRunner()


def _clean(res) -> None:
    assert "Traceback" not in res.stderr and BUG not in res.stderr, res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)


def _planted_sweep(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A copy of a real sweep whose manifest names a plugin file and a module that record being imported."""
    folder = tmp_path / "sweep"
    shutil.copytree(QUIET, folder)
    marker = tmp_path / "ran"
    code = f"from pathlib import Path\nPath({str(marker)!r}).write_text('planted code ran')\n"
    (folder / "evil.py").write_text(code)
    (tmp_path / "evil_module.py").write_text(code)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["spec"]["plugins"] = [str(folder / "evil.py"), "evil.py", "evil_module"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder, marker, tmp_path / "evil_module.py"


@pytest.mark.parametrize(
    "command",
    [
        ["report", "{sweep}"],
        ["report", "{sweep}", "-f", "csv"],
        ["ledger", "add", "{sweep}", "--ledger", "{tmp}/ledger.sqlite"],
        ["compare", "{sweep}", "{sweep}"],
    ],
)
def test_a_folder_never_names_code_to_run(command, tmp_path, monkeypatch):
    folder, marker, _ = _planted_sweep(tmp_path)
    monkeypatch.chdir(folder)  # "evil.py" relative to the folder, as a manifest could write it
    monkeypatch.syspath_prepend(str(tmp_path))  # and a module that would import
    monkeypatch.delenv("NSYS_TOOLS_PLUGINS", raising=False)
    res = runner.invoke(app, [a.format(sweep=folder, tmp=tmp_path) for a in command])
    _clean(res)
    assert not marker.exists(), "a plugin named by the folder was imported"
    assert res.exit_code == 0, res.stderr
    notes = [line for line in res.stderr.splitlines() if "names op plugins that are not loaded" in line]
    assert len(notes) == 1, res.stderr
    assert "evil_module" in notes[0] and "--plugin" in notes[0] and "NSYS_TOOLS_PLUGINS" in notes[0]


def test_the_issue_comment_runs_no_code_from_the_folder(tmp_path, monkeypatch):
    folder, marker, _ = _planted_sweep(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("NSYS_TOOLS_PLUGINS", raising=False)
    res = runner.invoke(app, ["report", str(folder), "--issue", "-o", "c.md", "--charts", "charts", "--ledger", "none.sqlite"])
    _clean(res)
    assert res.exit_code == 0 and not marker.exists(), res.stderr
    assert "names op plugins that are not loaded" in res.stderr


@pytest.mark.parametrize("how", ["option", "environment"])
def test_plugins_the_user_passes_are_loaded(how, tmp_path, monkeypatch):
    folder, marker, module = _planted_sweep(tmp_path)
    monkeypatch.chdir(tmp_path)
    if how == "option":
        monkeypatch.delenv("NSYS_TOOLS_PLUGINS", raising=False)
        args = ["report", str(folder), "--plugin", str(module)]
    else:
        monkeypatch.setenv("NSYS_TOOLS_PLUGINS", str(module))
        args = ["report", str(folder)]
    res = runner.invoke(app, args)
    _clean(res)
    assert marker.exists(), "the user's own plugin was not loaded"  # it defines no OPS: an error names it


def _logging_nsys(folder: Path) -> tuple[Path, Path]:
    """An nsys that records its arguments and exports a copy of a real export."""
    log = folder / "nsys-argv.jsonl"
    script = folder / "bin" / "nsys"
    script.parent.mkdir()
    script.write_text(
        f"#!{sys.executable}\nimport json, shutil, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"shutil.copyfile({str(NEW)!r}, sys.argv[sys.argv.index('--output') + 1])\n"
    )
    script.chmod(0o755)
    return script, log


def _stale_pair(folder: Path, export: bytes | None = None) -> tuple[Path, Path]:
    """``run.nsys-rep`` newer than ``run.sqlite`` beside it (a copy of a real export, or ``export``)."""
    sqlite, rep = folder / "run.sqlite", folder / "run.nsys-rep"
    if export is None:
        shutil.copyfile(NEW, sqlite)
    else:
        sqlite.write_bytes(export)
    rep.write_bytes(b"a report")
    os.utime(sqlite, (1_000_000_000, 1_000_000_000))
    return sqlite, rep


def _one_error(res, text: str) -> None:
    _clean(res)
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
    assert res.exit_code == 1 and len(errors) == 1 and text in errors[0], res.stderr


def test_a_re_export_never_writes_through_a_symlink(tmp_path, monkeypatch):
    nsys, _ = _logging_nsys(tmp_path)
    monkeypatch.setenv("NSYS", str(nsys))
    victim = tmp_path / "victim.sqlite"
    shutil.copyfile(NEW, victim)
    before = victim.read_bytes()
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"a report")
    (tmp_path / "run.sqlite").symlink_to(victim)
    os.utime(victim, (1_000_000_000, 1_000_000_000))
    _one_error(runner.invoke(app, ["report", str(rep)]), "is a symlink: a re-export never writes through one")
    assert victim.read_bytes() == before and (tmp_path / "run.sqlite").is_symlink()


@pytest.mark.parametrize("kind", ["text", "hard-link"])
def test_a_re_export_writes_only_over_a_plain_export(kind, tmp_path, monkeypatch):
    nsys, _ = _logging_nsys(tmp_path)
    monkeypatch.setenv("NSYS", str(nsys))
    sqlite, rep = _stale_pair(tmp_path, b"precious notes, not an export" if kind == "text" else None)
    if kind == "hard-link":
        os.link(sqlite, tmp_path / "elsewhere.sqlite")
    before = sqlite.read_bytes()
    message = "is not an SQLite export" if kind == "text" else "other hard link(s)"
    _one_error(runner.invoke(app, ["report", str(rep)]), message)
    assert sqlite.read_bytes() == before


def test_re_exporting_over_a_scrubbed_export_needs_reexport(tmp_path, monkeypatch):
    nsys, log = _logging_nsys(tmp_path)
    monkeypatch.setenv("NSYS", str(nsys))
    sqlite, rep = _stale_pair(tmp_path)
    assert runner.invoke(app, ["scrub", str(sqlite)]).exit_code == 0
    os.utime(sqlite, (1_000_000_000, 1_000_000_000))
    scrubbed = sqlite.read_bytes()
    _one_error(runner.invoke(app, ["report", str(rep)]), "is a scrubbed export older than run.nsys-rep")
    assert sqlite.read_bytes() == scrubbed and not log.exists()
    res = runner.invoke(app, ["report", str(rep), "--reexport", "-f", "csv"])
    _clean(res)
    assert res.exit_code == 0 and log.exists() and sqlite.read_bytes() != scrubbed, res.stderr


def test_reexport_is_a_value_of_the_call_not_of_the_process(tmp_path, monkeypatch):
    """The permission to export again over a scrubbed export travels with the call that gives it:
    a call without it, later in the same process, is refused as before."""
    from nsys_tools.errors import BadExport
    from nsys_tools.read.export import open_export

    nsys, log = _logging_nsys(tmp_path)
    monkeypatch.setenv("NSYS", str(nsys))
    sqlite, rep = _stale_pair(tmp_path)
    assert runner.invoke(app, ["scrub", str(sqlite)]).exit_code == 0
    os.utime(sqlite, (1_000_000_000, 1_000_000_000))
    assert open_export(rep, reexport=True).path == sqlite and log.exists()
    assert runner.invoke(app, ["scrub", str(sqlite)]).exit_code == 0
    os.utime(sqlite, (1_000_000_000, 1_000_000_000))
    with pytest.raises(BadExport, match="is a scrubbed export older than run.nsys-rep"):
        open_export(rep)


def test_file_names_reach_nsys_as_paths(tmp_path, monkeypatch):
    nsys, log = _logging_nsys(tmp_path)
    monkeypatch.setenv("NSYS", str(nsys))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "--stats=true.nsys-rep").write_bytes(b"a report")
    res = runner.invoke(app, ["report", "-f", "csv", "--", "--stats=true.nsys-rep"])
    _clean(res)
    assert res.exit_code == 0, res.stderr
    argv = json.loads(log.read_text().splitlines()[0])
    assert argv[-1] == str(tmp_path / "--stats=true.nsys-rep") and Path(argv[argv.index("--output") + 1]).is_absolute()
    assert not any(a.startswith("--stats") for a in argv)


@pytest.mark.parametrize("target", ["run.nsys-rep", "run.qdrep", "run.sqlite"])
def test_output_is_never_an_input_nor_its_capture_sibling(target, tmp_path):
    sqlite = tmp_path / "run.sqlite"
    shutil.copyfile(NEW, sqlite)
    (tmp_path / "run.nsys-rep").write_bytes(b"the report this export came from")
    os.utime(tmp_path / "run.nsys-rep", (1_000_000_000, 1_000_000_000))
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    _one_error(runner.invoke(app, ["report", str(sqlite), "-o", str(tmp_path / target)]), "is ")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files


@pytest.mark.parametrize("target", ["source", "/dev/null", "folder"])
def test_bench_output_follows_the_output_rule(target, tmp_path):
    source = tmp_path / "src.sqlite"
    shutil.copyfile(NEW, source)
    out = {"source": str(source), "/dev/null": "/dev/null", "folder": str(tmp_path)}[target]
    res = runner.invoke(app, ["bench", "--source", str(source), "--kernels", "10", "--baseline", "none", "-o", out])
    _one_error(res, {"source": "is an input", "/dev/null": "special file", "folder": "is a folder"}[target])
    assert source.read_bytes() == NEW.read_bytes() and not (tmp_path / "bench-exports").exists()


def _plant_packages(folder: Path, marker: Path) -> None:
    """``kernels/`` and ``nsys_tools/`` in the working folder, each recording that it was imported."""
    for name in ("kernels", "nsys_tools"):
        pkg = folder / name
        pkg.mkdir()
        (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write({name!r} + ' shadowed\\n')\n")
        (pkg / "layernorm.py").write_text(f"open({str(marker)!r}, 'a').write({name!r} + '.layernorm shadowed\\n')\n")
        (pkg / "__main__.py").write_text(f"open({str(marker)!r}, 'a').write({name!r} + ' main shadowed\\n')\n")


@pytest.mark.parametrize("how", ["-m", "-P -m", "console script"])
def test_the_installed_package_is_not_shadowed_from_the_working_folder(how, tmp_path):
    """``python -m nsys_tools`` puts the working folder first on sys.path, and an empty entry in
    PYTHONPATH does so for the console script: a kernels/ there is still never imported. A
    nsys_tools/ there is Python's to resolve before any of our code runs: ``python -P`` (or the
    console script with a clean PYTHONPATH) does not take it."""
    import subprocess

    marker = tmp_path / "shadowed.log"
    work = tmp_path / "work"
    work.mkdir()
    _plant_packages(work, marker)
    sweep = tmp_path / "sweep"
    shutil.copytree(QUIET, sweep)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if how == "console script":
        script = tmp_path / "bin" / "nsys-tools"
        script.parent.mkdir()
        script.write_text("import sys\nfrom nsys_tools.cli import run\nsys.exit(run())\n")  # as pip writes it
        env["PYTHONPATH"] = f"{os.pathsep}{REPO}"  # an empty entry: the working folder, first
        shutil.rmtree(work / "nsys_tools")  # found before any of our code could run: see the docstring
        cmd = [sys.executable, str(script)]
    else:
        if how == "-m":
            shutil.rmtree(work / "nsys_tools")
        cmd = [sys.executable, *how.split(), "nsys_tools"]
    res = subprocess.run(
        [*cmd, "report", str(sweep), "-f", "csv"], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and res.stdout.startswith("op,impl,shape"), res.stderr
    assert not marker.exists(), marker.read_text()


# -- output escaped for where it goes -----------------------------------------------------------

INJECT = "x</script><script>alert(1)</script>\u2028\u2029&<!--"


def test_chart_html_keeps_manifest_text_inside_its_script(tmp_path):
    import altair as alt
    import polars as pl

    from nsys_tools.render.charts import save

    chart = alt.Chart(pl.DataFrame({"session_id": [INJECT, "b"], "us": [1.0, 2.0]})).mark_point()
    html = next(p for p in save(chart.encode(x="session_id:N", y="us:Q"), tmp_path / "c") if p.suffix == ".html")
    text = html.read_text()
    assert "alert(1)" in text and "</script><script>alert" not in text and "<!--" not in text.split("alert(1)")[0][-40:]
    assert "\u2028" not in text and "\u2029" not in text
    scripts = _scripts(text)  # as a browser splits the page: the text cannot end its data block or add a script
    assert [attrs.get("type") for attrs, _ in scripts] == [None, "application/json", None]
    spec = json.loads(scripts[1][1])  # the spec reads back as the same data, the line separators drawable
    assert INJECT.translate({0x2028: "\ufffd", 0x2029: "\ufffd"}) in json.dumps(spec, ensure_ascii=False)


def _scripts(page: str) -> list[tuple[dict, str]]:
    """Each <script> element of ``page``: its attributes and its text, as an HTML parser reads them."""

    class Scripts(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.found: list[tuple[dict, str]] = []
            self.inside = False

        def handle_starttag(self, tag, attrs):
            if tag == "script":
                self.found.append((dict(attrs), ""))
                self.inside = True

        def handle_endtag(self, tag):
            self.inside = self.inside and tag != "script"

        def handle_data(self, data):
            if self.inside:
                attrs, text = self.found[-1]
                self.found[-1] = (attrs, text + data)

    parser = Scripts()
    parser.feed(page)
    parser.close()
    return parser.found


def test_the_issue_comment_heading_and_header_are_one_escaped_line(tmp_path):
    folder = tmp_path / "sweep"
    shutil.copytree(QUIET, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["spec"]["title"] = "LayerNorm\n# injected heading <img src=x onerror=alert(1)> \u202e"
    manifest["id"] = "id`](http://evil.example) </script>"
    manifest["created_utc"] = "2026\n## also injected"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "c.md"
    res = runner.invoke(
        app, ["report", str(folder), "--issue", "-o", str(out), "--charts", str(tmp_path / "ch"), "--ledger", "none.sqlite"]
    )
    _clean(res)
    assert res.exit_code == 0, res.stderr
    md = out.read_text()
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert all(not h.startswith("# ") and "injected" not in h[4:] or h.startswith("### LayerNorm") for h in headings)
    assert not any(line.startswith(("# injected", "## also")) for line in md.splitlines())
    # the id stays one code span (its backtick cannot end it, so no link forms); markup elsewhere is escaped
    span = "`id'](http://evil.example) </script>`"
    assert span in md and "](http://evil" not in md.replace(span, "")
    assert "<img" not in md and "\u202e" not in md and "</script>" not in md.replace(span, "")


ANSI_NAME = "\x1b]8;;http://evil.example\x07click\x1b]8;;\x07 \x1b[2J\x1b[31mkern\u202eel|`x`\nnext"


@pytest.mark.parametrize("fmt", ["markdown", "table", "csv", "json"])
def test_hostile_names_are_neutral_in_markdown_and_table_exact_in_csv_and_json(fmt, tmp_path):
    import sqlite3

    path = tmp_path / "run.sqlite"
    shutil.copyfile(NEW, path)
    con = sqlite3.connect(path)
    with con:
        sid = con.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
        con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (ANSI_NAME + "y" * 300, sid))
    con.close()
    res = runner.invoke(app, ["report", str(path), "-f", fmt])
    _clean(res)
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    if fmt in ("markdown", "table"):
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
        if fmt == "markdown":
            rows = [line for line in out.splitlines() if line.startswith("|")]
            assert all(line.count(" | ") == rows[0].count(" | ") for line in rows[2:] if "\\|" not in line)
            assert max(len(c) for line in rows for c in line.split(" | ")) <= 130
    elif fmt == "csv":
        import csv
        import io

        assert any(ANSI_NAME + "y" * 300 in row for row in csv.reader(io.StringIO(out)))
    else:
        assert any(r.get("kernel") == ANSI_NAME + "y" * 300 for r in json.loads(out))


# -- right answers or a clear refusal -----------------------------------------------------------


def _edited(tmp_path: Path, *statements: str, src: Path = NEW) -> Path:
    import sqlite3

    path = tmp_path / "run.sqlite"
    shutil.copyfile(src, path)
    con = sqlite3.connect(path)
    with con:
        for statement in statements:
            con.execute(statement)
    con.close()
    return path


def test_totals_past_int64_are_refused_not_wrapped(tmp_path):
    path = _edited(tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + 4611686018427387904")
    _one_error(runner.invoke(app, ["report", str(path), "-f", "csv"]), "holds a total beyond 64-bit integers")


def test_totals_near_int64_are_exact(tmp_path):
    """Two kernels of 2**62 - 1 ns each: the total is 2**63 - 2, exact (an Int64 sum holds it; a
    float would not)."""
    big = 2**62 - 1
    path = _edited(
        tmp_path,
        f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + {big} WHERE rowid IN "
        "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid LIMIT 2)",
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid NOT IN (SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "ORDER BY rowid LIMIT 2)",
    )
    res = runner.invoke(app, ["report", str(path), "-f", "json"])
    _clean(res)
    rows = json.loads(res.stdout)
    assert res.exit_code == 0 and sum(r["total_ns"] for r in rows) == 2 * big and all(r["total_ns"] > 0 for r in rows)


def test_duplicate_string_ids_are_an_error_naming_the_table(tmp_path):
    path = _edited(
        tmp_path,
        "ALTER TABLE StringIds RENAME TO s_old",
        "CREATE TABLE StringIds (id INTEGER, value TEXT)",
        "INSERT INTO StringIds SELECT * FROM s_old",
        "INSERT INTO StringIds SELECT id, value || '_dup' FROM s_old WHERE id IN "
        "(SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL)",
        "DROP TABLE s_old",
    )
    _one_error(runner.invoke(app, ["report", str(path), "-f", "csv"]), "StringIds holds")


def test_a_file_replaced_during_the_read_is_an_error(tmp_path, monkeypatch):
    from nsys_tools.run import chunked

    path = _edited(tmp_path)
    other = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite"
    real = chunked.view_partials

    def swapped(ex, *args, **kwargs):
        out = real(ex, *args, **kwargs)
        shutil.copyfile(other, tmp_path / "new.sqlite")
        os.replace(tmp_path / "new.sqlite", path)  # another program writes the export mid-read
        return out

    monkeypatch.setattr(chunked, "view_partials", swapped)
    monkeypatch.setenv("NSYS_TOOLS_CACHE", "0")
    _one_error(runner.invoke(app, ["report", str(path), "-f", "csv"]), "changed while it was read")


_EVERY_VIEW = """
import sys, tempfile
from html.parser import HTMLParser
from pathlib import Path
import nsys_tools
from nsys_tools import views
from nsys_tools.render import timeline
from nsys_tools.run.report import view_table
from nsys_tools.study.summary import summary
for view in views.names():
    for path in sys.argv[1:]:
        sys.stdout.write(view_table([path], view).write_csv())
for path in sys.argv[1:]:
    sys.stdout.write(summary([path]))
    with tempfile.TemporaryDirectory() as tmp, nsys_tools.open(path) as trace:
        timeline.write(trace, Path(tmp) / "t.json")
        sys.stdout.write((Path(tmp) / "t.json").read_text())
"""


def test_every_view_gives_the_same_bytes_at_any_thread_count(tmp_path):
    """Every view, the summary and the timeline of each bundled schema, at 1 thread and twice at
    2 (the cache off, so each run computes): the same bytes."""
    import subprocess

    exports = [
        NEW,
        FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite",
        FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite",
    ]
    outs = []
    for threads in ("1", "2", "2"):
        env = {**os.environ, "POLARS_MAX_THREADS": threads, "NSYS_TOOLS_CACHE": "0", "PYTHONPATH": str(REPO)}
        res = subprocess.run([sys.executable, "-c", _EVERY_VIEW, *map(str, exports)], env=env, capture_output=True, timeout=300)
        assert res.returncode == 0, res.stderr.decode()
        outs.append(res.stdout)
    assert outs[0] == outs[1] == outs[2] and outs[0].count(b"\n") > 50


# -- one rule for bad entries; refused up front -------------------------------------------------


def _messy_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copyfile(NEW, folder / "UPPER.SQLITE")  # extensions in any case
    (folder / "dangling.sqlite").symlink_to(tmp_path / "gone.sqlite")
    os.mkfifo(folder / "pipe.sqlite")
    return folder


@pytest.mark.parametrize("how", ["folder", "glob"])
def test_bad_entries_are_skipped_with_one_warning_each_or_fatal_with_strict(how, tmp_path):
    folder = _messy_folder(tmp_path)
    arg = str(folder) if how == "folder" else str(folder / "*")
    res = runner.invoke(app, ["report", arg, "-f", "csv"])
    _clean(res)
    assert res.exit_code == 0 and res.stdout.startswith("range,kernel"), res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 2 and any("a broken symlink" in w for w in warnings) and any("a FIFO" in w for w in warnings)
    assert "Skipped 2 bad entries" in res.stderr
    _one_error(runner.invoke(app, ["report", arg, "-f", "csv", "--strict"]), "--strict")


def test_a_fifo_named_as_input_is_refused_before_any_read(tmp_path):
    os.mkfifo(tmp_path / "run.sqlite")
    _one_error(runner.invoke(app, ["report", str(tmp_path / "run.sqlite")]), "is a FIFO, not an export file")


def test_compare_skips_a_bad_export_in_a_folder(tmp_path):
    base, new = tmp_path / "base", tmp_path / "new"
    for folder in (base, new):
        folder.mkdir()
        shutil.copyfile(NEW, folder / "a.sqlite")
    (new / "b.sqlite").write_bytes(b"not an export at all, " * 100)
    res = runner.invoke(app, ["compare", str(base), str(new), "--session-noise", "1"])
    _clean(res)
    assert res.exit_code == 0 and "Skipped 1 bad entry" in res.stderr, res.stderr
    _one_error(runner.invoke(app, ["compare", str(base), str(new), "--session-noise", "1", "--strict"]), "b.sqlite")


def test_a_sweep_shape_without_its_export_is_listed_as_missing(tmp_path):
    folder = tmp_path / "sweep"
    shutil.copytree(QUIET, folder)
    (folder / "8192x768.sqlite").unlink()
    res = runner.invoke(app, ["report", str(folder), "-f", "csv"])
    _clean(res)
    assert res.exit_code == 0 and "8192x768: its export 8192x768.sqlite is missing" in res.stderr
    assert "8192x768" not in res.stdout


def test_parameter_errors_are_named_as_such():
    res = runner.invoke(app, ["report", str(NEW), "--view", "gaps", "--min-gap", "1e300"])
    assert res.exit_code == 2 and "--min-gap" in res.stderr and "damaged" not in res.stderr


@pytest.mark.parametrize(
    "grid, block, message",
    [(1, 2048, "a block of 2048 threads"), (0, 256, "a grid of 0 blocks"), ((2**31) * 65535 * 65535, 32, "a grid of")],
)
def test_census_checks_grid_and_block_against_cudas_limits(grid, block, message):
    from nsys_tools.errors import UsageError
    from nsys_tools.plugin import Cubin
    from nsys_tools.study.census import checked_launch

    assert checked_launch("ok", (4096, 768), Cubin("k", b"", 4096, 256)).grid == 4096
    with pytest.raises(UsageError, match=message):
        checked_launch("mine", (4096, 768), Cubin("k", b"", grid, block))


# -- bounded and interruptible ------------------------------------------------------------------

_RUN = (
    "import sys, nsys_tools.run.chunked as c; c.SPILL_BYTES = 1; "
    "from nsys_tools.cli import run; sys.argv[0] = 'nsys-tools'; run()"
)


def _long_report(tmp_path: Path):
    """A report that spills to disk for a few seconds: 30 exports, the cache off, a 1-byte budget."""
    import subprocess

    folder = tmp_path / "many"
    folder.mkdir()
    for k in range(30):
        shutil.copyfile(NEW, folder / f"r{k}.sqlite")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "NSYS_TOOLS_CACHE": "0", "PYTHONPATH": str(REPO)}

    def start():
        return subprocess.Popen(
            [sys.executable, "-c", _RUN, "report", str(folder), "-f", "csv"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    return start, tmp, env


@pytest.mark.slow
def test_a_child_nsys_dies_with_its_parent(tmp_path):
    """A run killed while nsys works (SIGKILL: no handler runs) leaves no orphan nsys."""
    import stat
    import subprocess
    import time

    fake = tmp_path / "nsys"
    fake.write_text(f'#!/bin/sh\necho $$ > "{tmp_path}/child.pid"\nexec sleep 60\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    code = f"from nsys_tools.read.export import run_nsys; run_nsys([{str(fake)!r}, 'export'], None)"
    parent = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)})
    pid_file, deadline = tmp_path / "child.pid", time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pid_file.read_text())
    parent.kill()
    parent.wait(timeout=10)

    def alive() -> bool:
        try:
            return "\nState:\tZ" not in Path(f"/proc/{child}/status").read_text()
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 5
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(), f"nsys (pid {child}) outlived the run that started it"


def test_an_interrupt_that_surfaces_as_another_error_exits_130(monkeypatch):
    """A Ctrl-C whose KeyboardInterrupt a native library swallowed (raised in a Polars dtype
    check, it came back as "TypeError: '<unprintable str object>' is not a Polars data type")
    is still an interrupt: exit 130, not a bug report; the same error without one is a bug."""
    import typer

    from nsys_tools import files
    from nsys_tools.cli.app import friendly

    @friendly
    def command():
        raise TypeError("'<unprintable str object>' is not a Polars data type")

    for signalled, code in ((False, 1), (True, 130)):
        monkeypatch.setitem(files._SIGNALLED, "on", signalled)
        with pytest.raises(typer.Exit) as exited:
            command()
        assert exited.value.exit_code == code


def test_interrupts_stop_within_a_second_and_leave_nothing(tmp_path):
    import random
    import signal
    import subprocess
    import time

    start, tmp, env = _long_report(tmp_path)
    rng = random.Random(23)
    left_by_kill = 0
    for k in range(6):
        proc = start()
        time.sleep(rng.uniform(0.6, 2.0))
        if k % 2 == 0:  # Ctrl-C
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=10)
            assert time.monotonic() - sent < 1.5 and code in (130, 0), (code, proc.stderr.read())
            assert "Traceback" not in proc.stderr.read()
            assert not list(tmp.iterdir()), list(tmp.iterdir())
        else:  # SIGKILL while a spill folder exists: what it left goes at the next start
            deadline = time.monotonic() + 20
            while not list(tmp.iterdir()) and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.01)
            proc.kill()
            proc.wait(timeout=10)
            left_by_kill += len(list(tmp.iterdir()))
            res = subprocess.run([sys.executable, "-c", _RUN, "--version"], env=env, capture_output=True, timeout=60)
            assert res.returncode == 0 and not list(tmp.iterdir()), list(tmp.iterdir())
    assert left_by_kill > 0  # the kills did leave spill folders behind for the next run to remove


_LONG_QUERY = """
import sys
from pathlib import Path
from nsys_tools.files import stop_on_interrupt
from nsys_tools.read.export import _connect
stop_on_interrupt()
con = _connect(Path(sys.argv[1]))
print("started", flush=True)
con.execute("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 1e10) SELECT count(*) FROM n")
"""


def test_sigterm_stops_a_long_query_on_the_main_thread(tmp_path):
    """A signal's Python handler runs only between Python steps: without a call back into Python,
    a SIGTERM during a long query waited for the query's end (a quadratic join: minutes)."""
    import signal
    import sqlite3
    import subprocess
    import time

    export = tmp_path / "empty.sqlite"
    sqlite3.connect(export).close()
    proc = subprocess.Popen(
        [sys.executable, "-c", _LONG_QUERY, str(export)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    try:
        assert proc.stdout.readline() == "started\n"
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        assert time.monotonic() - sent < 1.5
    finally:
        proc.kill()
        proc.wait()
