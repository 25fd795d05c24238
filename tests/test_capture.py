"""The capture side without a GPU: sweep bookkeeping, locking, the harness's conventions.

``nsys`` is replaced by a script (``fake_nsys.py``) that answers ``profile`` and ``export`` the
way nsys does, with files from a real H200 sweep, so the sweep's own logic runs for real:
per-shape status, failures recorded while the sweep goes on, resume, atomic files, scrubbing,
the manifest, and the plugins handed to the harness in its own process and folder.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from nsys_tools.capture.harness import buffer_sets
from nsys_tools.capture.runner import gpu_lock
from nsys_tools.capture.sweep import SweepRunner, SweepSpec
from nsys_tools.convention import predecessors, range_name, rotated, round_orders, unit_seed
from nsys_tools.errors import CaptureError, UsageError
from nsys_tools.plugin import Registry
from nsys_tools.study import folder as sweep_reader

from . import fake_nsys as fake

DEMO = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"


def test_range_names_round_trip():
    name = range_name("layernorm", "ours_nc", "4096x768", "cold", 2)
    m = sweep_reader.RANGE.match(name)
    assert name == "layernorm/ours_nc/4096x768/cold/r2"
    assert m.group("impl", "shape", "l2", "round", "calls") == ("ours_nc", "4096x768", "cold", "2", None)
    counted = range_name("matmul_bf16", "torch", "4096x4096x1024", "cold", 0, 100)
    assert counted == "matmul_bf16/torch/4096x4096x1024/cold/r0/n100"
    assert sweep_reader.RANGE.match(counted).group("shape", "round", "calls") == ("4096x4096x1024", "0", "100")
    assert not sweep_reader.RANGE.match("layernorm/ours/4096x768/cold/r2/n")


def test_rotation_and_buffer_sets():
    assert [rotated(["a", "b", "c"], r) for r in range(4)] == [list("abc"), list("bca"), list("cab"), list("abc")]
    l2 = 62914560
    x_and_y = 2 * 4096 * 768 * 4
    sets = buffer_sets(x_and_y, l2, "cold")
    assert sets * x_and_y > 2 * l2 and sets == 6
    assert buffer_sets(x_and_y // 2, l2, "cold") == 11  # outputs reused: only x rotates
    assert buffer_sets(2 * 4096 * 4096 * 4, l2, "cold") == 2 and buffer_sets(x_and_y, l2, "warm") == 1


@pytest.mark.parametrize(
    "spec, message",
    [
        (SweepSpec(op="layernorm", shapes=["4096"]), "unknown layernorm shape"),
        (SweepSpec(op="layernorm", impls=["ours", "copy"]), "no control among --impls \\(the op's is triton\\)"),
        (SweepSpec(op="layernorm", impls=["ours", "copy"], control="triton"), "control 'triton' is not among --impls"),
        (SweepSpec(op="softmax"), "unknown op 'softmax'"),
        (SweepSpec(op="layernorm", rounds=0), "at least 1"),
        (SweepSpec(op="layernorm", outputs="fresh"), "unknown output policy"),
    ],
)
def test_spec_validation(spec, message):
    with pytest.raises(UsageError, match=message):
        spec.resolve(Registry())


def test_spec_takes_the_ops_defaults():
    spec = SweepSpec()
    op, impls = spec.resolve(Registry())
    assert op.name == spec.op == "layernorm" and spec.control == "triton" and spec.outputs == "reuse"
    assert spec.shapes == ["4096x768", "8192x768", "1024x2048", "4096x4096"] and spec.impls == ["ours", "triton", "torch", "copy"]


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
def fake_nsys(tmp_path, monkeypatch):
    """``nsys`` replaced by ``tests/fake_nsys.py``; the lock and nvidia-smi kept out of the way."""
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(
        "nsys_tools.capture.gpu_state.smi_snapshot", lambda index=None: {"name": "NVIDIA H200", "driver_version": "580"}
    )
    folder = tmp_path / "bin"
    folder.mkdir()
    return fake.install(folder)


def test_a_capture_killed_part_way_leaves_nothing_in_the_sweep_folder(fake_nsys, tmp_path, monkeypatch):
    """Scratch files (the .nsys-rep, the log, the export before it is scrubbed) live outside the
    sweep folder, so a run stopped between profiling and export leaves no hidden folder in it."""
    out, seen = tmp_path / "sweep", []

    def stopped(self, unit, report, work, entry):
        seen.append(work)
        raise KeyboardInterrupt

    monkeypatch.setattr(SweepRunner, "_finish", stopped)
    with pytest.raises(KeyboardInterrupt):
        SweepRunner(SweepSpec(), out, nsys=fake_nsys).run()
    assert seen and seen[0].exists() and not seen[0].is_relative_to(out)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json"]


@pytest.mark.slow
def test_sweep_records_failures_and_resumes(fake_nsys, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL", "1024x2048")
    out = tmp_path / "sweep"
    stages = []
    spec = SweepSpec(outputs="rotate")
    manifest = (
        SweepRunner(spec, out, nsys=fake_nsys, progress=lambda s, st, d: stages.append((s, st)), commit="abc", prepare_jobs=2)
        .run()
        .to_json()
    )
    status = {s: e["status"] for s, e in manifest["shapes"].items()}
    # Every shape is prepared (here without torch, in vain) before the first capture; a failed
    # preparation is left to the capture.
    first_profile = stages.index(next(x for x in stages if x[1] == "profile"))
    assert sorted(s for s, st in stages[:first_profile] if st == "prepared") == sorted(status)
    assert status == {"4096x768": "ok", "8192x768": "ok", "1024x2048": "failed", "4096x4096": "ok"}
    assert "out of memory" in manifest["shapes"]["1024x2048"]["error"]
    assert manifest["git"]["commit"] == "abc" and manifest["nsys"]["version"].endswith("2025.3.1.0")
    assert manifest["kind"] == "sweep" and manifest["spec"]["outputs"] == "rotate" and manifest["spec"]["floor"] == "copy"
    assert ("4096x4096", "ok") in stages and ("1024x2048", "failed") in stages
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{s}.{k}" for s in ("4096x768", "8192x768", "4096x4096") for k in ("sqlite", "harness.json")] + ["manifest.json"]
    )
    with pytest.raises(CaptureError, match="already holds a capture"):
        SweepRunner(SweepSpec(), out, nsys=fake_nsys).run()

    monkeypatch.setenv("FAKE_FAIL", "")
    stages.clear()
    before = (out / "4096x768.sqlite").stat().st_mtime_ns
    manifest = (
        SweepRunner(
            SweepSpec(outputs="rotate"),
            out,
            nsys=fake_nsys,
            resume=True,
            progress=lambda s, st, d: stages.append((s, st)),
            commit="def",
            prepare_jobs=2,
        )
        .run()
        .to_json()
    )
    assert {s: e["status"] for s, e in manifest["shapes"].items()} == dict.fromkeys(status, "ok")
    # Finished at another build: each shape keeps the build it was captured with, and the header says so.
    assert {s: e["commit"] for s, e in manifest["shapes"].items()} == {**dict.fromkeys(status, "abc"), "1024x2048": "def"}
    assert sweep_reader.load(out).commits == {"abc": ["4096x768", "8192x768", "4096x4096"], "def": ["1024x2048"]}
    from nsys_tools.study import issue

    header = issue.compose(sweep_reader.load(out), None, None).markdown
    assert "commits `abc` (4096x768, 8192x768, 4096x4096), `def` (1024x2048)" in header
    assert ("4096x768", "skipped") in stages and ("1024x2048", "ok") in stages
    assert [s for s, st in stages if st == "prepare"] == ["1024x2048"]  # only what is left to capture
    assert (out / "4096x768.sqlite").stat().st_mtime_ns == before
    summary = sweep_reader.summary(sweep_reader.load(out))
    assert summary.height == 16 and set(summary["shape"]) == set(status)
    assert dict(summary.select("impl", "outputs").unique().iter_rows()) == {
        "ours": "rotate",
        "triton": "rotate",
        "torch": "allocates",
        "copy": "rotate",
    }


@pytest.mark.slow
def test_cli_sweep_adds_itself_to_the_ledger(fake_nsys, tmp_path):
    from nsys_tools.cli import app
    from nsys_tools.study import ledger

    from .cli import CliRunner

    args = [
        "capture",
        "sweep",
        "--op",
        "layernorm",
        "--shapes",
        "4096x768",
        "--nsys",
        str(fake_nsys),
        "--out",
        str(tmp_path / "s"),
    ]
    res = CliRunner().invoke(app, [*args, "--ledger", str(tmp_path / "l.sqlite")])
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip() == str(tmp_path / "s")
    assert "4096x768 done" in res.stderr and "Added to the ledger" in res.stderr
    sessions = ledger.sessions(tmp_path / "l.sqlite")
    assert sessions["id"].to_list() == ["s"] and sessions["outputs"].to_list() == ["reuse"]


def test_unsupported_shapes_are_recorded(fake_nsys, tmp_path):
    spec = SweepSpec(shapes=["1x65536"], impls=["row_held", "triton"], control="triton")
    manifest = SweepRunner(spec, tmp_path / "s", nsys=fake_nsys).run().to_json()
    entry = manifest["shapes"]["1x65536"]
    assert entry["status"] == "skipped"
    assert set(entry["unsupported"]) == {"row_held", "triton"} and "N = 65536" in entry["unsupported"]["triton"]


def test_capture_side_imports_without_polars():
    """The GPU machine has no polars or altair: capture/ and kernels/ must not need them."""
    code = (
        "import sys; sys.modules['polars'] = None; sys.modules['altair'] = None\n"
        "import nsys_tools.capture.sweep, nsys_tools.capture.run, nsys_tools.capture.harness, nsys_tools.capture.gpu_state\n"
        "import nsys_tools.kernels.layernorm, nsys_tools.kernels.cuda\n"
        "import nsys_tools.read.scrub, nsys_tools.cli, nsys_tools.plugin\n"
        "from nsys_tools.plugin import Registry; Registry().op('layernorm')\n"
    )
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 0, done.stderr


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "softmax_op.py"
SCALE = Path(__file__).resolve().parent / "plugins" / "scale_op.py"


def _cli(*args: str):
    from nsys_tools.cli import app

    from .cli import CliRunner

    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--plugin", "no_such_plugin.py"], "no_such_plugin.py: no such plugin file"),
        (
            ["--op", "layernorm", "--impls", "ours,triton,nsys_tools.kernels.torch_ln:make_nothing"],
            "nsys_tools.kernels.torch_ln: has no 'make_nothing'",
        ),
        (["--plugin", str(EXAMPLE), "--op", "softmax", "--shapes", "4096"], "unknown softmax shape '4096'"),
        (["--plugin", str(EXAMPLE)], "choose an op with --op (known: layernorm, softmax)"),
    ],
)
def test_bad_plugins_get_one_error_line(fake_nsys, tmp_path, args, message):
    res = _cli("capture", "sweep", *args, "--nsys", str(fake_nsys), "--out", str(tmp_path / "s"))
    assert res.exit_code == 1, res.output
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "s").exists()  # refused before anything was written


@pytest.mark.slow
def test_a_factory_that_raises_fails_the_shape_in_one_line(fake_nsys, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SETUP", "1")
    args = ["--plugin", str(SCALE), "--op", "scale", "--impls", "raises", "--control", "raises", "--shapes", "4x8"]
    res = _cli("capture", "sweep", *args, "--nsys", str(fake_nsys), "--out", str(tmp_path / "s"), "--ledger", str(tmp_path / "l"))
    assert res.exit_code == 1
    error = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and "no implementation of scale ran at 4x8; raises: ValueError: the kernel did not compile" in error[0]
    assert (tmp_path / "s" / "manifest.json").exists()  # what was written stays


@pytest.mark.slow
def test_the_example_op_end_to_end(fake_nsys, tmp_path, monkeypatch):
    """A user's op, no file of the package edited: capture sweep with the plugin file, then the
    report and the issue comment, which know its implementations, bytes and output policies from
    what the harness recorded."""
    monkeypatch.chdir(tmp_path)  # the plugin path reaches the harness, which runs elsewhere, absolute
    out = tmp_path / "softmax-sweep"
    args = ["--plugin", os.path.relpath(EXAMPLE), "--op", "softmax"]
    res = _cli(
        "capture", "sweep", *args, "--shapes", "4096x1000", "--nsys", str(fake_nsys), "--out", str(out), "--ledger", "l.sqlite"
    )
    assert res.exit_code == 0, res.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert (
        manifest["spec"]["op"] == "softmax" and manifest["spec"]["control"] == "torch" and manifest["spec"]["outputs"] == "reuse"
    )
    assert manifest["spec"]["impls"] == ["rowwise", "torch", "torch_alloc", "copy"] and manifest["spec"]["title"] == "Softmax"
    summary = sweep_reader.summary(sweep_reader.load(out))
    rows = {r["impl"]: r for r in summary.iter_rows(named=True)}
    assert set(rows) == {"rowwise", "torch", "torch_alloc", "copy"} and {r["op"] for r in rows.values()} == {"softmax"}
    assert rows["rowwise"]["bytes"] == 2 * 4096 * 1000 * 4 and rows["rowwise"]["flops"] == 4 * 4096 * 1000
    assert rows["torch_alloc"]["outputs"] == "allocates" and rows["rowwise"]["outputs"] == "reuse"
    res = _cli("report", str(out), "--issue", "--ledger", "l.sqlite", "--charts", str(tmp_path / "charts"))
    assert res.exit_code == 0, res.stderr
    md = res.stdout
    assert md.startswith("### Softmax: rowwise, torch, torch\\_alloc, copy (control: torch)")
    assert "Outputs: reuse (every implementation writes the same buffer at a shape" in md
    assert "except torch\\_alloc †, which allocates its output inside the call" in md
    assert "| shape | rowwise | torch\\_alloc † | copy |" in md  # marked in the ratio table too
    assert "Warning: the implementations did not all run under one output policy" in md
    assert "% of copy)" in md


def _program(tmp_path: Path, code: int) -> list[str]:
    script = tmp_path / f"bench{code}.py"
    script.write_text(f"import sys\nprint('timing 3 rounds')\nsys.exit({code})\n")
    return [sys.executable, str(script)]


@pytest.mark.slow
def test_capture_run_bookkeeping(fake_nsys, tmp_path, monkeypatch):
    """capture run: the program runs under (fake) nsys; its export, scrubbed, manifest and GPU
    state land in a folder that report and report --issue read, with no event spans."""
    monkeypatch.setenv("FAKE_EXPORT", str(DEMO / "1024x2048.sqlite"))
    out = tmp_path / "run"
    args = [
        "--control",
        "triton",
        "--outputs",
        "rotate",
        "--nsys",
        str(fake_nsys),
        "--out",
        str(out),
        "--ledger",
        str(tmp_path / "l"),
    ]
    res = _cli("capture", "run", *args, "--", *_program(tmp_path, 0))
    assert res.exit_code == 0, res.stderr
    assert "layernorm/ours/1024x2048/cold (3 rounds)" in res.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "run" and manifest["spec"]["program"][-1].endswith("bench0.py")
    entry = manifest["captures"]["capture"]
    assert entry["status"] == "ok" and entry["ranges"]["layernorm/triton/1024x2048/cold"] == 3
    assert sorted(p.name for p in out.iterdir()) == ["capture.harness.json", "capture.sqlite", "manifest.json"]
    loaded = sweep_reader.load(out)
    assert not loaded.has_spans and loaded.outputs == "rotate"
    summary = sweep_reader.summary(loaded)
    assert summary.height == 4 and summary["span_median_ns"].is_null().all()
    res = _cli("report", str(out), "--issue", "--ledger", str(tmp_path / "l"), "--charts", str(tmp_path / "c"))
    assert res.exit_code == 0, res.stderr
    assert "#### Event span: absent" in res.stdout and "captured with `nsys-tools capture run`" in res.stdout
    assert "**Correctness.** Not checked by nsys-tools" in res.stdout


def test_capture_run_failures_are_one_line(fake_nsys, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_EXPORT", str(DEMO / "1024x2048.sqlite"))
    res = _cli("capture", "run", "--nsys", str(fake_nsys), "--out", str(tmp_path / "a"), "--", *_program(tmp_path, 3))
    assert res.exit_code == 1 and "the program failed (exit 3)" in res.stderr and "timing 3 rounds" in res.stderr
    assert len([line for line in res.stderr.splitlines() if line.startswith("Error:")]) == 1
    plain = Path(__file__).parent / "fixtures" / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
    monkeypatch.setenv("FAKE_EXPORT", str(plain))
    res = _cli("capture", "run", "--nsys", str(fake_nsys), "--out", str(tmp_path / "b"), "--", *_program(tmp_path, 0))
    assert res.exit_code == 1 and "emitted no NVTX range named <op>/<impl>/<shape>/<l2>/r<round>" in res.stderr
    res = _cli("capture", "run", "--nsys", str(fake_nsys), "--out", str(tmp_path / "c"))
    assert res.exit_code == 2  # no program: a usage error


@pytest.mark.slow
def test_a_hung_nsys_fails_the_capture_within_the_timeout(fake_nsys, tmp_path, monkeypatch):
    """Every nsys call has a timeout: a profile that outlives it fails this capture in one line."""
    monkeypatch.setenv("FAKE_EXPORT", str(DEMO / "1024x2048.sqlite"))
    monkeypatch.setenv("NSYS_TOOLS_NSYS_TIMEOUT", "3")
    script = tmp_path / "hangs.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(8)\n")
    res = _cli("capture", "run", "--nsys", str(fake_nsys), "--out", str(tmp_path / "a"), "--", sys.executable, str(script))
    assert res.exit_code == 1 and "profiling failed: nsys profile did not finish within 3 s" in res.stderr
    assert "set NSYS_TOOLS_NSYS_TIMEOUT to allow longer" in res.stderr and "Traceback" not in res.stderr
    entry = json.loads((tmp_path / "a" / "manifest.json").read_text())["captures"]["capture"]
    assert entry["status"] == "failed" and "did not finish within 3 s" in entry["error"]


def test_round_orders_are_seeded_shuffles_that_change_predecessors():
    names = ["ours", "triton", "torch", "copy", "liger"]
    orders = round_orders(names, 8, seed=3)
    assert orders == round_orders(names, 8, seed=3)  # the seed alone decides
    assert orders != round_orders(names, 8, seed=4)
    assert all(sorted(order) == sorted(names) for order in orders)  # every implementation once a round
    assert len({order[0] for order in orders}) > 1  # not always the same one first
    for before, after in zip(orders, orders[1:], strict=False):
        kept = {n: p for n, p in predecessors(after).items() if p is not None and predecessors(before)[n] == p}
        assert not kept, f"{kept} ran after the same implementation two rounds running"
    # Each implementation meets several predecessors over the rounds (a rotation gives each one).
    assert all(len({predecessors(o)[n] for o in orders}) >= 3 for n in names)
    assert [rotated(names, r)[:2] for r in range(2)] == [["ours", "triton"], ["triton", "torch"]]
    assert round_orders(["a", "b"], 4, seed=0) in ([list("ab"), list("ba")] * 2, [list("ba"), list("ab")] * 2)
    assert round_orders(["only"], 2, seed=0) == [["only"], ["only"]]


@pytest.mark.slow
def test_sweep_records_each_rounds_order(fake_nsys, tmp_path):
    out = tmp_path / "sweep"
    spec = SweepSpec(shapes=["4096x768", "8192x768"], seed=7)
    manifest = SweepRunner(spec, out, nsys=fake_nsys, commit="abc").run().to_json()
    impls = ["ours", "triton", "torch", "copy"]
    assert manifest["spec"]["seed"] == 7
    for shape in spec.shapes:  # each shape draws its own seed from the sweep's
        orders = round_orders(impls, 3, unit_seed(7, shape))
        assert manifest["shapes"][shape]["orders"] == orders
        assert json.loads((out / f"{shape}.harness.json").read_text())["orders"] == orders
    read = sweep_reader.load(out)
    assert read.order == "shuffled" and read.round_orders("4096x768") == round_orders(impls, 3, unit_seed(7, "4096x768"))
    from nsys_tools.study import issue

    assert "order shuffled each round (seed 7; each shape's own orders)" in issue.compose(read, None, None).markdown
    # The default seed is recorded too.
    assert SweepRunner(SweepSpec(), tmp_path / "other", nsys=fake_nsys).spec().seed == 0


def test_each_shape_of_a_sweep_draws_its_own_seed():
    seeds = {unit_seed(0, shape) for shape in ("4096x768", "8192x768", "1024x2048", "4096x4096")}
    assert len(seeds) == 4 and unit_seed(0, "4096x768") == unit_seed(0, "4096x768") != unit_seed(1, "4096x768")
    names = ["ours", "triton", "inductor", "liger", "torch", "copy"]
    firsts = {round_orders(names, 3, unit_seed(0, shape))[0][0] for shape in ("4096x768", "8192x768", "1024x2048", "4096x4096")}
    assert len(firsts) > 1  # with one seed for all, every shape put the same implementation first
