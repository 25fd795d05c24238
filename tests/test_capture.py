"""The capture side without a GPU: sweep bookkeeping, locking, the harness's conventions.

``nsys`` is replaced by a script that answers ``profile`` and ``export`` the way nsys does,
with files from a real H200 sweep, so the sweep's own logic runs for real: per-shape status,
failures recorded while the sweep goes on, resume, atomic files, scrubbing, the manifest.
"""

from __future__ import annotations

import fcntl
import os
import stat
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest

from capture.harness import buffer_sets, range_name, rotated
from capture.sweep import Sweep, SweepSpec, gpu_lock
from nsys_tools import sweep as sweep_reader
from nsys_tools.errors import CaptureError, UsageError

DEMO = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"


def test_range_names_round_trip():
    name = range_name("layernorm", "ours_nc", "4096x768", "cold", 2)
    m = sweep_reader.RANGE.match(name)
    assert name == "layernorm/ours_nc/4096x768/cold/r2"
    assert m.group("impl", "shape", "l2", "round") == ("ours_nc", "4096x768", "cold", "2")


def test_rotation_and_buffer_sets():
    assert [rotated(["a", "b", "c"], r) for r in range(4)] == [list("abc"), list("bca"), list("cab"), list("abc")]
    l2 = 62914560
    sets = buffer_sets(4096, 768, l2, "cold")
    assert sets * 2 * 4096 * 768 * 4 > 2 * l2 and sets == 6
    assert buffer_sets(4096, 4096, l2, "cold") == 2 and buffer_sets(4096, 768, l2, "warm") == 1


@pytest.mark.parametrize(
    "spec, message",
    [
        (SweepSpec(shapes=["4096"]), "unknown shape"),
        (SweepSpec(impls=["ours", "copy"]), "control 'triton' is not among --impls"),
        (SweepSpec(op="softmax"), "unknown op"),
        (SweepSpec(rounds=0), "at least 1"),
    ],
)
def test_spec_validation(spec, message):
    with pytest.raises(UsageError, match=message):
        spec.validate()


def test_lock_no_wait_and_wait(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with gpu_lock(wait=False, on_wait=lambda p: None) as path:
        assert path.name == "nsys-tools-gpu3.lock"
        with pytest.raises(CaptureError, match="another sweep holds this GPU"):
            with gpu_lock(wait=False, on_wait=lambda p: None):
                pass
    holder = open(tmp_path / "nsys-tools-gpu3.lock", "a+")
    fcntl.flock(holder, fcntl.LOCK_EX)
    waited = []
    threading.Timer(0.3, lambda: fcntl.flock(holder, fcntl.LOCK_UN)).start()
    with gpu_lock(wait=True, on_wait=waited.append):
        pass
    holder.close()
    assert waited == [tmp_path / "nsys-tools-gpu3.lock"]


@pytest.fixture
def fake_nsys(tmp_path):
    """A stand-in for nsys: profile writes the report and the harness output (the real ones of
    the demo sweep), failing for shapes listed in $FAKE_FAIL; export copies the real export."""
    script = tmp_path / "nsys"
    script.write_text(
        textwrap.dedent(f"""\
        #!{sys.executable}
        import os, shutil, sys
        from pathlib import Path
        demo = Path({str(DEMO)!r})
        args = sys.argv[1:]
        if args[0] == "--version":
            print("NVIDIA Nsight Systems version 2025.3.1.0"); sys.exit(0)
        if args[0] == "profile":
            shape = args[args.index("--shape") + 1]
            if shape in os.environ.get("FAKE_FAIL", "").split(","):
                print("CUDA error: out of memory", file=sys.stderr); sys.exit(3)
            Path(args[args.index("-o") + 1] + ".nsys-rep").write_text("report")
            shutil.copy(demo / f"{{shape}}.harness.json", Path(args[args.index("--out") + 1]))
        elif args[0] == "export":
            shape = Path(args[-1]).stem
            shutil.copy(demo / f"{{shape}}.sqlite", args[args.index("--output") + 1])
        """)
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_sweep_records_failures_and_resumes(fake_nsys, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr("capture.sweep.smi_snapshot", lambda index=0: {"name": "test"})
    monkeypatch.setenv("FAKE_FAIL", "1024x2048")
    out = tmp_path / "sweep"
    stages = []
    manifest = Sweep(SweepSpec(), out, nsys=fake_nsys, progress=lambda s, st, d: stages.append((s, st)), commit="abc").run()
    status = {s: e["status"] for s, e in manifest["shapes"].items()}
    assert status == {"4096x768": "ok", "8192x768": "ok", "1024x2048": "failed", "4096x4096": "ok"}
    assert "out of memory" in manifest["shapes"]["1024x2048"]["error"]
    assert manifest["git"]["commit"] == "abc" and manifest["nsys"]["version"].endswith("2025.3.1.0")
    assert ("4096x4096", "ok") in stages and ("1024x2048", "failed") in stages
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{s}.{k}" for s in ("4096x768", "8192x768", "4096x4096") for k in ("sqlite", "harness.json")] + ["manifest.json"]
    )
    with pytest.raises(CaptureError, match="already holds a sweep"):
        Sweep(SweepSpec(), out, nsys=fake_nsys).run()

    monkeypatch.setenv("FAKE_FAIL", "")
    stages.clear()
    before = (out / "4096x768.sqlite").stat().st_mtime_ns
    manifest = Sweep(SweepSpec(), out, nsys=fake_nsys, resume=True, progress=lambda s, st, d: stages.append((s, st))).run()
    assert {s: e["status"] for s, e in manifest["shapes"].items()} == dict.fromkeys(status, "ok")
    assert ("4096x768", "skipped") in stages and ("1024x2048", "ok") in stages
    assert (out / "4096x768.sqlite").stat().st_mtime_ns == before
    assert sweep_reader.summary(sweep_reader.load(out)).height == 16


def test_cli_sweep_adds_itself_to_the_ledger(fake_nsys, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from nsys_tools import ledger
    from nsys_tools.cli import app

    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr("capture.sweep.smi_snapshot", lambda index=0: {"name": "NVIDIA H200"})
    res = CliRunner().invoke(
        app,
        [
            "capture",
            "sweep",
            "--shapes",
            "4096x768",
            "--nsys",
            str(fake_nsys),
            "--out",
            str(tmp_path / "s"),
            "--ledger",
            str(tmp_path / "l.sqlite"),
        ],
    )
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip() == str(tmp_path / "s")
    assert "4096x768 done" in res.stderr and "Added to the ledger" in res.stderr
    assert ledger.sessions(tmp_path / "l.sqlite")["id"].to_list() == ["s"]


def test_unsupported_shapes_are_recorded(fake_nsys, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr("capture.sweep.smi_snapshot", lambda index=0: {})
    spec = SweepSpec(shapes=["1x65536"], impls=["row_held", "triton"], control="triton")
    manifest = Sweep(spec, tmp_path / "s", nsys=fake_nsys).run()
    entry = manifest["shapes"]["1x65536"]
    assert entry["status"] == "skipped"
    assert set(entry["unsupported"]) == {"row_held", "triton"} and "N = 65536" in entry["unsupported"]["triton"]


def test_capture_side_imports_without_polars():
    """The GPU machine has no polars or altair: capture/ and kernels/ must not need them."""
    code = (
        "import sys; sys.modules['polars'] = None; sys.modules['altair'] = None\n"
        "import capture.sweep, capture.harness, capture.gpu_state, kernels, kernels.cuda, nsys_tools.scrub, nsys_tools.cli\n"
    )
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 0, done.stderr
