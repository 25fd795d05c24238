"""The views registry: each view declares its name, summary and how it may be read in its own module
(``VIEW = View(...)``), and the registry finds it there; a view written in its own file joins every path
(one trace, the report pipeline over several exports, pieces in bounded memory), with no other file touched."""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from typer.main import get_command

from nsys_tools import views
from nsys_tools.cli import app
from nsys_tools.read.export import open_export
from nsys_tools.read.trace import Trace
from nsys_tools.run import chunked
from nsys_tools.run.report import view_table

# The view of docs/guides/new-view.md, copied into a folder of its own: no file of the package is touched.
TOY = Path(__file__).resolve().parents[1] / "examples" / "ops_view.py"


@pytest.fixture
def toy(tmp_path, monkeypatch):
    shutil.copyfile(TOY, tmp_path / "toy_ops_view.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(views, "REGISTRY", dict(views.REGISTRY))  # the built-in views, and the toy while it runs
    assert views.discover(tmp_path, "") == [views.REGISTRY["ops"]]
    yield views.REGISTRY["ops"]
    sys.modules.pop("toy_ops_view", None)


def test_the_builtin_views_declare_themselves():
    # Every module of the views package that declares a view is registered under its name, and
    # the report command offers it.
    folder = Path(views.__file__).parent
    declaring = [f for f in sorted(folder.glob("*.py")) if "\nVIEW = View(" in f.read_text()]
    assert [views.spec(n).module for n in views.names()] == [f"nsys_tools.views.{f.stem}" for f in declaring]
    report = get_command(app).commands["report"]
    option = next(p for p in report.params if p.name == "view")
    flags = option.get_help_record(report.context_class(report, info_name="report"))[0]  # --view <api|gaps|...>
    assert set(flags.split("<", 1)[1].rstrip(">").split("|")) == set(views.names())
    # A view read in time order has the steps that fold it; one read in pieces has none of them.
    for view in views.REGISTRY.values():
        steps = [hasattr(view.load(), step) for step in ("split", "window", "close")]
        assert steps == [view.ordered] * 3, view.name
    assert all(views.spec(n).rows for n in views.names())  # each says what a row of its table is (the docs show it)
    # read from the source as written, and its Options with it
    assert views.get("kernels").VIEW == replace(views.spec("kernels"), module="", options=())
    assert [o.name for o in views.spec("gaps").options] == ["min_gap_ns"]
    assert {o.name for o in views.spec("kernels").options} == {"names", "include_memops", "nesting"}
    assert views.spec("memops").columns[:2] == ("operation", "instances")
    with pytest.raises(ValueError, match="unknown view 'nope'"):
        views.spec("nope")
    with pytest.raises(ValueError, match="not both"):
        views.register(views.View("both", "", splittable=True, ordered=True, module="x"))


def test_a_declaration_with_computed_arguments_is_refused(tmp_path):
    (tmp_path / "computed.py").write_text('from nsys_tools.views import View\nVIEW = View("x" + "y", "a view")\n')
    with pytest.raises(ValueError, match="literal arguments only"):
        views.declared(tmp_path / "computed.py")
    (tmp_path / "none.py").write_text("VIEWS = 1\n")
    assert views.declared(tmp_path / "none.py") is None


def test_a_toy_view_in_its_own_file_runs_on_every_path(toy, fixture_copy):
    path = fixture_copy("multi-gpu/multi-gpu-nsys2025.3.sqlite")
    assert toy.columns == ("kind", "ops", "total_ns") and [o.flag for o in toy.options] == ["--kind"]
    one = views.table(Trace(open_export(path)), "ops")
    # Cross-checked against the built-in views, which count the same operations their own way, and
    # the fixture's MANIFEST.md: 78 kernels, 32 memcpys, 24 memsets.
    kernels = views.table(Trace(open_export(path)), "kernels")
    memops = views.table(Trace(open_export(path)), "memops")
    got = dict(zip(one["kind"], one["ops"], strict=True))
    assert got["kernel"] == kernels["instances"].sum() == 78
    assert (got["memcpy"], got["memset"]) == (32, 24) and memops["instances"].sum() == 32 + 24
    assert one.filter(pl.col("kind") == "kernel")["total_ns"].item() == kernels["total_ns"].sum()
    # The report pipeline over two exports merges the partials; pieces in bounded memory give the same.
    two = view_table([path, fixture_copy("doubled-launch/doubled-launch.sqlite")], "ops")
    assert two.filter(pl.col("kind") == "kernel")["ops"].item() > 78
    pieces = views.finalize("ops", chunked.view_partial(open_export(path), "ops", [], {}).lazy(), []).collect()
    assert pieces.equals(one)
    by_device = views.table(Trace(open_export(path)), "ops", by=["device"])
    assert by_device["ops"].sum() == one["ops"].sum() and by_device["gpu_id"].n_unique() > 1


def test_a_toy_view_joins_the_command_line_with_its_option_and_chart(toy, fixture_copy, tmp_path):
    """The command is built from the registry: the toy's ``--kind`` appears under ``--view ops``
    (and only there), is refused with another view, naming the view it belongs to, and its chart
    is drawn; no file of the package was touched."""
    import typer.main
    from click.testing import CliRunner

    from nsys_tools.cli import app

    command, runner = typer.main.get_command(app), CliRunner()
    path = fixture_copy("multi-gpu/multi-gpu-nsys2025.3.sqlite")
    assert "--kind" in runner.invoke(command, ["report", "--view", "ops", "--help"]).stdout
    assert "--kind" not in runner.invoke(command, ["report", "--view", "kernels", "--help"]).stdout
    assert "--min-gap" not in runner.invoke(command, ["report", "--view", "ops", "--help"]).stdout
    res = runner.invoke(
        command, ["report", str(path), "--view", "ops", "--kind", "memset", "-f", "csv", "--chart", str(tmp_path / "o.html")]
    )
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[1:] == [
        "memset,24," + str(views.table(Trace(open_export(path)), "ops", kind="memset")["total_ns"].item())
    ]
    assert "vegaEmbed" in (tmp_path / "o.html").read_text()
    # The Python API has its method, with its option.
    import nsys_tools

    assert nsys_tools.open(path).view.ops(kind="memset").collect()["ops"].to_list() == [24]
    res = runner.invoke(command, ["report", str(path), "--kind", "memset"])
    assert res.exit_code == 2 and "Invalid value for --kind: applies to --view ops, not --view kernels" in res.stderr


def test_the_guide_shows_the_example_view_as_it_is():
    """docs/guides/new-view.md shows examples/ops_view.py whole, the file this module's toy view is."""
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "new-view.md").read_text(encoding="utf-8")
    shown = re.findall(r"```python\n(.*?)```", guide, re.S)[0]
    assert shown == TOY.read_text(encoding="utf-8")


def test_a_view_without_a_chart_says_why_and_one_that_says_nothing_is_refused(tmp_path, monkeypatch, fixture_copy):
    """``no_chart`` is the reason ``--chart`` prints (a usage error, before any export is read); a
    view with neither a chart nor a reason breaks the contract when it is loaded."""
    import typer.main
    from click.testing import CliRunner

    source = TOY.read_text(encoding="utf-8").split("\n\ndef chart(table):")[0] + "\n"
    said = source.replace("splittable=True)", 'splittable=True, no_chart="three bars say less than the table")')
    (tmp_path / "said_view.py").write_text(said.replace('View("ops"', 'View("said"'))
    (tmp_path / "silent_view.py").write_text(source.replace('View("ops"', 'View("silent"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(views, "REGISTRY", dict(views.REGISTRY))
    assert [v.name for v in views.discover(tmp_path, "")] == ["said", "silent"]
    path = fixture_copy("multi-gpu/multi-gpu-nsys2025.3.sqlite")
    res = CliRunner().invoke(
        typer.main.get_command(app), ["report", str(path), "--view", "said", "--chart", str(tmp_path / "c.html")]
    )
    assert res.exit_code == 2 and "--view said draws no chart: three bars say less than the table" in res.stderr
    assert not (tmp_path / "c.html").exists()
    with pytest.raises(TypeError, match="view silent .* has no chart"):
        views.get("silent")
    for name in ("said_view", "silent_view"):
        sys.modules.pop(name, None)


def test_each_view_help_lists_its_own_options_and_no_other_views():
    """``report --view NAME --help``: the options every view takes, and NAME's declared flags, with
    NAME's own help; no flag another view declares."""
    from .cli import CliRunner

    runner = CliRunner()
    declared = {o.flag for name in views.names() for o in views.spec(name).options}
    for name in views.names():
        shown = runner.invoke(app, ["report", "--view", name, "--help"]).stdout
        flags = set(re.findall(r"^  (--[a-z-]+)", shown, re.M))
        own = {o.flag for o in views.spec(name).options}
        assert flags & declared == own, name
        for o in views.spec(name).options:
            assert o.help.split()[0] in shown, (name, o.flag)
