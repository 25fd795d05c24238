"""The golden cases: one command line each, run in-process from the repository root.

Each case's output file holds the command, its exit code, stdout and stderr, with the temporary folder
written as ``<tmp>`` and lines naming a module path (tracebacks, warnings) left out. Charts are recorded by
the SHA-256 of their Vega-Lite specification (``chart.to_dict()``), not as images: the PNG bytes depend on
the renderer's version, the specification is what the code decides.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "out"
FIXTURES = "tests/fixtures"
EXPORTS = [
    f"{FIXTURES}/doubled-launch/doubled-launch.sqlite",
    f"{FIXTURES}/layernorm-3impl/layernorm-3impl-nsys2024.2.sqlite",
    f"{FIXTURES}/layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite",
    f"{FIXTURES}/multi-gpu/multi-gpu-nsys2025.3.sqlite",
]
VIEWS = ["kernels", "ranges", "api", "memops", "gaps"]
FORMATS = ["markdown", "csv", "json", "table"]
LEDGER = "reports/ledger.sqlite"
DEMO = "reports/sweeps/20261129-183449-quiet"


def _sweeps() -> list[str]:
    """Every committed sweep, as the folder its archive holds (unpacked beside it first, as the tests do)."""
    from tests.conftest import unpack_sweeps

    unpack_sweeps()
    return sorted(f"reports/sweeps/{p.name}" for p in (ROOT / "reports/sweeps").iterdir() if (p / "manifest.json").exists())


def _issues() -> list[str]:
    """The sweeps whose issue comment is committed under reports/issues."""
    return sorted(f"reports/sweeps/{p.stem}" for p in (ROOT / "reports/issues").glob("*.md"))


def cases() -> dict[str, list[str]]:
    """Case name -> argv (after ``nsys-tools``); ``{tmp}`` stands for a fresh temporary folder."""
    out: dict[str, list[str]] = {}
    for export in EXPORTS:
        stem = Path(export).stem
        for view in VIEWS:
            for fmt in FORMATS:
                out[f"report-{stem}-{view}-{fmt}"] = ["report", export, "--view", view, "--format", fmt]
            out[f"report-{stem}-{view}-by"] = ["report", export, "--view", view, "--by", "device,process,stream", "-f", "csv"]
        out[f"report-{stem}-short-memops"] = ["report", export, "--names", "short", "--include-memops", "--top", "5"]
        out[f"report-{stem}-nesting-all"] = ["report", export, "--nesting", "all", "-f", "csv"]
        out[f"report-{stem}-gaps-min"] = ["report", export, "--view", "gaps", "--min-gap", "5", "--top", "10"]
        out[f"report-{stem}-filter"] = ["report", export, "--range", "*", "--kernel", "*norm*", "-f", "csv"]
    out["report-layernorm-3impl-folder-per-file"] = ["report", f"{FIXTURES}/layernorm-3impl", "--per-file", "-f", "csv"]
    out["report-layernorm-3impl-folder"] = ["report", f"{FIXTURES}/layernorm-3impl", "--merge"]  # two captures, as one
    out["report-layernorm-3impl-runs"] = ["report", f"{FIXTURES}/layernorm-3impl"]  # refused: two runs
    out["report-bad-input-folder"] = ["report", f"{FIXTURES}/bad-input", "--merge"]
    for sweep in _sweeps():
        name = Path(sweep).name
        out[f"sweep-{name}"] = ["report", sweep]
    for fmt in ("csv", "json", "table"):
        out[f"sweep-demo-{fmt}"] = ["report", DEMO, "--format", fmt]
    out["sweep-demo-flag"] = ["report", "--demo"]
    for sweep in _issues():
        name = Path(sweep).name
        out[f"issue-{name}"] = ["report", sweep, "--issue", "--ledger", LEDGER, "--charts", "{tmp}/charts"]
    out["issue-demo-control"] = ["report", DEMO, "--issue", "--ledger", LEDGER, "--charts", "{tmp}/charts", "--control", "torch"]
    out["issue-demo-base-url"] = [
        "report", DEMO, "--issue", "--ledger", LEDGER, "--charts", "{tmp}/charts", "--chart-base-url", "https://example.org/c",
    ]  # fmt: skip
    out["compare-same-build"] = ["compare", DEMO, "reports/sweeps/20261129-183620-quiet", "--ledger", LEDGER]
    out["compare-previous-build"] = [
        "compare", "reports/sweeps/20261129-202628-quiet", "reports/sweeps/20261129-231949-ln-rotate", "--ledger", LEDGER,
    ]  # fmt: skip
    out["compare-regression"] = [
        "compare", "reports/sweeps/20261129-231949-ln-rotate", "reports/sweeps/20261129-202628-quiet", "--ledger", LEDGER,
        "--fail-on-regression", "3", "-f", "csv",
    ]  # fmt: skip
    out["compare-exports"] = ["compare", EXPORTS[1], EXPORTS[2], "--session-noise", "0.5"]
    out["compare-exports-json"] = ["compare", EXPORTS[1], EXPORTS[2], "--ledger", LEDGER, "-f", "json"]
    out["census-layernorm"] = ["census", "--op", "layernorm"]
    out["census-layernorm-capture"] = ["census", "--op", "layernorm", "--shape", "4096x768", "--capture", DEMO, "-f", "csv"]
    for fmt in FORMATS:
        out[f"ledger-list-{fmt}"] = ["ledger", "list", "--ledger", LEDGER, "--format", fmt]
    out["history-ours-triton"] = ["history", "--shape", "4096x768", "--impl", "ours", "--vs", "triton", "--ledger", LEDGER]
    out["history-latest-control"] = ["history", "--shape", "4096x4096", "--impl", "ours", "--ledger", LEDGER, "-f", "csv"]
    out["history-matmul"] = ["history", "--shape", "4096x4096x4096", "--impl", "ours", "--op", "matmul_bf16", "--ledger", LEDGER]
    out["history-warm"] = ["history", "--shape", "4096x768", "--impl", "ours", "--l2", "warm", "--ledger", LEDGER]
    out["ledger-add-reject"] = ["ledger", "add", DEMO, "reports/sweeps/20261129-183620-quiet", "--ledger", "{tmp}/l.sqlite"]
    out["capture-list"] = ["capture", "list"]
    out["capture-list-plugin"] = ["capture", "list", "--plugin", "examples/softmax_op.py", "-f", "csv"]
    out["scrub-check"] = ["scrub", "--check", *EXPORTS]
    out["version"] = ["--version"]
    return out


_MODULE_LINE = re.compile(r"(nsys_tools|capture|kernels)[./][\w./]*\.py|File \"|Traceback|Warning:")


# Floats printed in full (csv, json) are cut to 12 significant digits: parallel sums differ from run
# to run in the last digit or two (summation order), and no table shows more than 12.
_LONG_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d{12,}(?:e[-+]?\d+)?")


def _short_float(m: re.Match) -> str:
    return f"{float(m.group(0)):.12g}"


def normalize(text: str, tmp: str) -> str:
    # Links to the charts are relative to the working folder: ../../tmp/... depends on where the checkout lies
    # (../nsys-tools-golden-... for a checkout in the temporary folder itself).
    text = re.sub(r"(?:\.\./)+" + re.escape(tmp.lstrip("/")), "<tmp>", text)
    text = text.replace(os.path.relpath(tmp), "<tmp>")
    text = text.replace(tmp, "<tmp>").replace(str(ROOT), "<repo>")
    text = _LONG_FLOAT.sub(_short_float, text)
    return "".join(line for line in text.splitlines(keepends=True) if not _MODULE_LINE.search(line))


@contextmanager
def _charts_recorded(record: list[str]):
    """Charts are kept as the hash of their specification (see the module docstring)."""
    from nsys_tools.render import charts

    def save(chart, stem: Path) -> list[Path]:
        spec = json.dumps(chart.to_dict(), sort_keys=True)
        record.append(f"{stem.name} {hashlib.sha256(spec.encode()).hexdigest()}")
        return [stem.with_suffix(".png"), stem.with_suffix(".html")]

    original = charts.save
    charts.save = save
    try:
        yield
    finally:
        charts.save = original


def run_case(argv: list[str]) -> str:
    """Run one command line in-process and give its normalized record."""
    from nsys_tools.cli import app
    from tests.cli import CliRunner

    tmp = tempfile.mkdtemp(prefix="nsys-tools-golden-")
    try:
        args = [a.replace("{tmp}", tmp) for a in argv]
        charts: list[str] = []
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            with _charts_recorded(charts):
                result = CliRunner().invoke(app, args, env={"COLUMNS": "160", "NSYS_TOOLS_LEDGER": None})
        finally:
            os.chdir(cwd)
        if argv[:2] == ["ledger", "add"]:
            listed = CliRunner().invoke(app, ["ledger", "list", "--ledger", f"{tmp}/l.sqlite", "-f", "csv"])
            # added_utc is the time of the run
            extra = "--- ledger list\n" + re.sub(r",[0-9T:+-]{25}$", ",<added_utc>", listed.stdout, flags=re.M)
        else:
            extra = ""
        record = (
            f"$ nsys-tools {' '.join(argv)}\nexit: {result.exit_code}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
            + (("--- charts\n" + "".join(c + "\n" for c in charts)) if charts else "")
            + extra
        )
        return normalize(record, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
