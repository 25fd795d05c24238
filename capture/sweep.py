"""Run Nsight Systems over the harness, one capture per shape, into a sweep folder.

A sweep folder holds, per shape, ``<shape>.sqlite`` (scrubbed export), ``<shape>.harness.json``
(parameters, correctness checks, event spans, clock samples), and one ``manifest.json`` for the
whole sweep (commit, command, nsys, GPU, nvidia-smi before and after, per-shape status and
timings). Every file is written under a temporary name and renamed when complete, so a killed
sweep never leaves a file that looks finished. While shape k+1 is profiled, shape k is exported
and scrubbed on a worker thread.

Standard library only (plus the registry): this runs on the GPU machine.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from kernels.registry import UnsupportedShape, format_shape, get, parse_impls, parse_shape
from nsys_tools.errors import CaptureError, NsysToolsError, UsageError
from nsys_tools.export import export_report, find_nsys, run_nsys
from nsys_tools.files import write_text_atomically
from nsys_tools.scrub import scrub

from .gpu_state import smi_snapshot

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHAPES = ("4096x768", "8192x768", "1024x2048", "4096x4096")
DEFAULT_IMPLS = ("ours", "triton", "torch", "copy")
NSYS_TRACE = ("-t", "cuda,nvtx", "-s", "none", "--cpuctxsw=none")
MANIFEST = "manifest.json"

Progress = Callable[[str, str, dict], None]  # (shape, stage, details)


@dataclass
class SweepSpec:
    op: str = "layernorm"
    shapes: list[str] = field(default_factory=lambda: list(DEFAULT_SHAPES))
    impls: list[str] = field(default_factory=lambda: list(DEFAULT_IMPLS))
    control: str = "triton"
    rounds: int = 3
    iters: int = 100
    warmup: int = 20
    l2: str = "cold"

    def validate(self) -> None:
        if self.op != "layernorm":
            raise UsageError(None, f"unknown op {self.op!r}", "the harness knows: layernorm")
        self.shapes = [format_shape(*parse_shape(s)) for s in self.shapes]
        parse_impls(",".join(self.impls))
        if self.control not in self.impls:
            raise UsageError(None, f"control {self.control!r} is not among --impls", "add it to --impls")
        if min(self.rounds, self.iters) < 1 or self.warmup < 0:
            raise UsageError(None, "rounds and iters must be at least 1, warmup at least 0")
        if self.l2 not in ("cold", "warm"):
            raise UsageError(None, f"unknown L2 mode {self.l2!r}", "use cold or warm")


def write_json(path: Path, data: dict) -> None:
    write_text_atomically(path, json.dumps(data, indent=1))


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def commit_info() -> dict:
    head = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": head, "dirty": bool(dirty) if dirty is not None else None}


def nsys_version(nsys: Path) -> str:
    out = run_nsys([str(nsys), "--version"], nsys, capture_output=True, text=True, errors="replace")
    return (out.stdout or out.stderr).strip()


@contextmanager
def gpu_lock(wait: bool, on_wait: Callable[[Path], None]):
    """One sweep per GPU at a time: an exclusive lock on a file named after the GPU."""
    gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0] or "0"
    path = Path(tempfile.gettempdir()) / f"nsys-tools-gpu{gpu}.lock"
    with path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise CaptureError(path, "another sweep holds this GPU", "wait for it, or drop --no-wait to queue") from None
            on_wait(path)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


class Sweep:
    """One sweep run: ``Sweep(spec, out, ...).run()`` returns the manifest."""

    def __init__(
        self,
        spec: SweepSpec,
        out: Path,
        *,
        nsys: str | Path | None = None,
        resume: bool = False,
        wait: bool = True,
        python: str = sys.executable,
        keep_rep: bool = False,
        progress: Progress | None = None,
        argv: list[str] | None = None,
        commit: str | None = None,
    ):
        spec.validate()
        self.spec, self.out, self.resume, self.wait = spec, Path(out).resolve(), resume, wait
        self.python, self.keep_rep = python, keep_rep
        self.progress = progress or (lambda shape, stage, details: None)
        self.nsys = find_nsys(nsys)
        self.argv = argv if argv is not None else sys.argv
        self.commit = commit
        self._lock = threading.Lock()
        self.manifest: dict = {}

    def _paths(self, shape: str) -> dict[str, Path]:
        return {"sqlite": self.out / f"{shape}.sqlite", "harness": self.out / f"{shape}.harness.json"}

    def _load(self) -> None:
        path = self.out / MANIFEST
        if path.exists() and not self.resume:
            raise CaptureError(path, "this folder already holds a sweep", "pass --resume to finish it, or choose a new --out")
        previous = json.loads(path.read_text()) if path.exists() else {}
        self.manifest = {
            "id": self.out.name,
            "created_utc": previous.get("created_utc") or datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": self.argv,
            "spec": asdict(self.spec),
            "git": {"commit": self.commit, "dirty": None} if self.commit else commit_info(),
            "nsys": {"version": nsys_version(self.nsys), "options": [*NSYS_TRACE, "--capture-range=cudaProfilerApi"]},
            "range_format": "<op>/<impl>/<M>x<N>/<l2>/r<round>",
            "shapes": previous.get("shapes", {}),
        }

    def _save(self) -> None:
        with self._lock:
            write_json(self.out / MANIFEST, self.manifest)

    def _done(self, shape: str) -> bool:
        entry = self.manifest["shapes"].get(shape, {})
        return entry.get("status") == "ok" and all(p.exists() for p in self._paths(shape).values())

    def _runnable(self, shape: str) -> tuple[list[str], dict[str, str]]:
        m, n = parse_shape(shape)
        runnable, unsupported = [], {}
        for name in self.spec.impls:
            try:
                get(name).check(m, n)
                runnable.append(name)
            except UnsupportedShape as exc:
                unsupported[name] = exc.problem
        return runnable, unsupported

    def _profile(self, shape: str, impls: list[str], work: Path) -> Path:
        rep = work / shape
        log = work / f"{shape}.log"
        cmd = [
            str(self.nsys),
            "profile",
            *NSYS_TRACE,
            "--capture-range=cudaProfilerApi",
            "--capture-range-end=stop",
            "--force-overwrite=true",
            "-o",
            str(rep),
            self.python,
            "-m",
            "capture.harness",
            "--shape",
            shape,
            "--impls",
            ",".join(impls),
            "--rounds",
            str(self.spec.rounds),
            "--iters",
            str(self.spec.iters),
            "--warmup",
            str(self.spec.warmup),
            "--l2",
            self.spec.l2,
            "--out",
            str(work),
        ]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))}
        try:
            with log.open("w") as fh:
                done = run_nsys(cmd, rep, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=work)
        except NsysToolsError as exc:  # a hung or vanished nsys fails this shape, not the sweep
            raise CaptureError(rep, f"profiling failed: {exc.problem}: {_tail(log)}", exc.hint) from exc
        report = rep.with_suffix(".nsys-rep")
        if done.returncode != 0 or not report.exists() or not (work / f"{shape}.harness.json").exists():
            raise CaptureError(report, f"profiling failed (exit {done.returncode}): {_tail(log)}", "see the log in the manifest")
        return report

    def _finish(self, shape: str, report: Path, work: Path, entry: dict) -> None:
        """Export, scrub and move one shape's files into place (runs on the worker thread)."""
        t0 = time.perf_counter()
        try:
            self.progress(shape, "export", {})
            sqlite = export_report(report, self.nsys)
            scrub(sqlite)
            harness = json.loads((work / f"{shape}.harness.json").read_text())
            entry.update(checks=harness["checks"], errors=harness["errors"], harness_timings_s=harness["timings_s"])
            paths = self._paths(shape)
            (work / f"{shape}.harness.json").replace(paths["harness"])
            shutil.move(str(sqlite), paths["sqlite"])
            if self.keep_rep:
                shutil.move(str(report), self.out / report.name)
            entry.update(status="ok", files=[p.name for p in paths.values()])
        except Exception as exc:  # recorded; the sweep goes on
            entry.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            entry["export_s"] = round(time.perf_counter() - t0, 2)
            shutil.rmtree(work, ignore_errors=True)
            self.progress(shape, entry["status"], entry)
            self._save()

    def run(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        self._load()
        t0 = time.perf_counter()
        with gpu_lock(self.wait, lambda p: self.progress("", "waiting", {"lock": str(p)})):
            self.manifest["gpu_before"] = smi_snapshot()
            self._save()
            pending: list[Future] = []
            with ThreadPoolExecutor(max_workers=1) as pool:
                for shape in self.spec.shapes:
                    if self.resume and self._done(shape):
                        self.progress(shape, "skipped", {"reason": "complete in an earlier run"})
                        continue
                    impls, unsupported = self._runnable(shape)
                    entry = {"status": "running", "impls": impls, "unsupported": unsupported}
                    self.manifest["shapes"][shape] = entry
                    if not impls:
                        entry.update(status="skipped", error="no implementation supports this shape")
                        self.progress(shape, "skipped", entry)
                        self._save()
                        continue
                    work = Path(tempfile.mkdtemp(prefix=f".{shape}.", dir=self.out))
                    self.progress(shape, "profile", entry)
                    t1 = time.perf_counter()
                    try:
                        report = self._profile(shape, impls, work)
                    except CaptureError as exc:
                        entry.update(status="failed", error=str(exc), profile_s=round(time.perf_counter() - t1, 2))
                        shutil.rmtree(work, ignore_errors=True)
                        self.progress(shape, "failed", entry)
                        self._save()
                        continue
                    entry["profile_s"] = round(time.perf_counter() - t1, 2)
                    pending.append(pool.submit(self._finish, shape, report, work, entry))
                for fut in pending:
                    fut.result()
            self.manifest["gpu_after"] = smi_snapshot()
        self.manifest["wall_s"] = round(time.perf_counter() - t0, 2)
        self._save()
        return self.manifest
