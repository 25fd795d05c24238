"""What every capture shares: one GPU at a time, Nsight Systems with one set of options, exports
scrubbed on a worker thread, files renamed into place when whole, and a manifest.

A capture folder holds ``manifest.json`` and, per capture unit (a shape of a sweep, or one run
of a program), ``<unit>.sqlite`` (the scrubbed export) and ``<unit>.harness.json`` (what was
recorded beside the trace: checks, event spans, clock samples). ``nsys_tools.capture.sweep`` and
``nsys_tools.capture.run`` are the two kinds of run. Standard library only: this runs on the GPU machine.
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
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from nsys_tools.convention import RANGE_FORMAT
from nsys_tools.errors import CaptureError, NsysToolsError
from nsys_tools.files import write_text_atomically
from nsys_tools.folder_format import MANIFEST, GpuSnapshot, HarnessRecord, Manifest, Spec, UnitEntry, harness_path
from nsys_tools.read.export import export_report, find_nsys, run_nsys
from nsys_tools.read.scrub import scrub

from .gpu_state import visible_gpu

PROJECT_ROOT = Path(__file__).resolve().parents[1]
NSYS_TRACE = ("-t", "cuda,nvtx", "-s", "none", "--cpuctxsw=none")
NSYS_RANGE = ("--capture-range=cudaProfilerApi", "--capture-range-end=stop")

Progress = Callable[[str, str, dict], None]  # (unit, stage, details)


def write_json(path: Path, data: dict) -> None:
    write_text_atomically(path, json.dumps(data, indent=1))


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def commit_info() -> tuple[str | None, bool | None]:
    """The checkout's commit, and whether tracked files differ from it (None: not known)."""
    head = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return head, bool(dirty) if dirty is not None else None


def nsys_version(nsys: Path) -> str:
    out = run_nsys([str(nsys), "--version"], nsys, capture_output=True, text=True, errors="replace")
    return (out.stdout or out.stderr).strip()


@contextmanager
def gpu_lock(wait: bool, on_wait: Callable[[Path], None]):
    """One capture per GPU at a time: an exclusive lock on a file named after the GPU."""
    path = Path(tempfile.gettempdir()) / f"nsys-tools-gpu{visible_gpu()}.lock"
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


def tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def child_env(extra_paths: list[str]) -> dict[str, str]:
    """The environment for the profiled program: this project and the caller's working folder
    importable (so ``--plugin pkg.module`` and ``--impls pkg.module:factory`` resolve there as
    they did here), the rest inherited."""
    paths = [*extra_paths, os.environ.get("PYTHONPATH")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


class CaptureRunner:
    """The bookkeeping of one capture folder. Subclasses say what the units are (``units``) and
    how one is profiled (``profile``), and add their settings to the manifest (``spec``)."""

    kind = ""  # a key of folder_format.UNITS_KEY

    def __init__(
        self,
        out: Path,
        *,
        nsys: str | Path | None = None,
        resume: bool = False,
        wait: bool = True,
        keep_rep: bool = False,
        progress: Progress | None = None,
        argv: list[str] | None = None,
        commit: str | None = None,
    ):
        self.out, self.resume, self.wait, self.keep_rep = Path(out).resolve(), resume, wait, keep_rep
        self.progress = progress or (lambda unit, stage, details: None)
        self.nsys = find_nsys(nsys)
        self.argv = argv if argv is not None else sys.argv
        self.commit = commit
        self._lock = threading.Lock()
        self.manifest = Manifest()

    # -- what subclasses define ----------------------------------------------------------------
    def spec(self) -> Spec:
        raise NotImplementedError

    def units(self) -> list[str]:
        raise NotImplementedError

    def plan(self, unit: str, entry: UnitEntry) -> bool:
        """Fill ``entry`` before profiling ``unit``; False skips it (the entry says why)."""
        return True

    def profile(self, unit: str, rep: Path, work: Path, log: Path) -> None:
        """Run nsys for ``unit``, writing ``<rep>.nsys-rep`` and ``<work>/<unit>.harness.json``."""
        raise NotImplementedError

    def prepare(self, units: list[str]) -> None:
        """Work to do for the units still to profile before the first one is (none by default)."""

    # -- shared ------------------------------------------------------------------------------
    def check_export(self, unit: str, sqlite: Path, entry: UnitEntry) -> None:
        """Look at ``unit``'s scrubbed export before it is moved into place; raise to fail it."""

    def nsys_command(self, rep: Path, program: list[str]) -> list[str]:
        return [str(self.nsys), "profile", *NSYS_TRACE, *NSYS_RANGE, "--force-overwrite=true", "-o", str(rep), *program]

    def nsys_profile(self, rep: Path, program: list[str], log: Path, **kwargs) -> subprocess.CompletedProcess:
        """Run ``program`` under nsys into ``<rep>.nsys-rep``, its output into ``log``, within the nsys
        timeout. A hung or vanished nsys fails this unit, not the whole capture."""
        try:
            with log.open("w") as fh:
                return run_nsys(self.nsys_command(rep, program), rep, stdout=fh, stderr=subprocess.STDOUT, **kwargs)
        except NsysToolsError as exc:
            raise CaptureError(rep, f"profiling failed: {exc.problem}: {tail(log)}", exc.hint) from exc

    def paths(self, unit: str) -> dict[str, Path]:
        return {"sqlite": self.out / f"{unit}.sqlite", "harness": harness_path(self.out, unit)}

    def _load(self) -> None:
        path = self.out / MANIFEST
        if path.exists() and not self.resume:
            raise CaptureError(path, "this folder already holds a capture", "pass --resume to finish it, or choose a new --out")
        previous = Manifest.read(self.out) if path.exists() else Manifest()
        for entry in previous.units.values():  # a resumed folder keeps the build of each unit made before
            entry.commit = entry.commit or previous.git_commit
        commit, dirty = (self.commit, None) if self.commit else commit_info()
        self.manifest = Manifest(
            id=self.out.name,
            kind=self.kind,
            created_utc=previous.created_utc or datetime.now(timezone.utc).isoformat(timespec="seconds"),
            command=self.argv,
            spec=self.spec(),
            git_commit=commit,
            git_dirty=dirty,
            nsys_version=nsys_version(self.nsys),
            nsys_options=[*NSYS_TRACE, NSYS_RANGE[0]],
            range_format=RANGE_FORMAT,
            units=previous.units,
        )

    def save(self) -> None:
        with self._lock:
            write_json(self.out / MANIFEST, self.manifest.to_json())

    def _done(self, unit: str) -> bool:
        entry = self.manifest.units.get(unit)
        return entry is not None and entry.status == "ok" and all(p.exists() for p in self.paths(unit).values())

    def _profile(self, unit: str, work: Path) -> Path:
        rep, log = work / unit, work / f"{unit}.log"
        try:
            self.profile(unit, rep, work, log)
        except OSError as exc:
            raise CaptureError(rep, f"could not run nsys ({exc})", "check --nsys") from exc
        report = rep.with_suffix(".nsys-rep")
        if not report.exists() or not harness_path(work, unit).exists():
            raise CaptureError(report, f"profiling failed: {tail(log)}", "see the log in the manifest")
        return report

    def _finish(self, unit: str, report: Path, work: Path, entry: UnitEntry) -> None:
        """Export, scrub and move one unit's files into place (runs on the worker thread)."""
        t0 = time.perf_counter()
        try:
            self.progress(unit, "export", {})
            sqlite = export_report(report, self.nsys)
            scrub(sqlite)
            self.check_export(unit, sqlite, entry)
            harness = HarnessRecord.read(harness_path(work, unit))
            entry.checks, entry.errors, entry.harness_timings_s = harness.checks, harness.errors, harness.timings_s
            entry.orders = harness.orders or None  # each round's order of implementations, as it ran
            if harness.unsupported:
                entry.unsupported = {**(entry.unsupported or {}), **harness.unsupported}
            paths = self.paths(unit)
            shutil.move(str(harness_path(work, unit)), paths["harness"])
            shutil.move(str(sqlite), paths["sqlite"])
            if self.keep_rep:
                shutil.move(str(report), self.out / report.name)
            entry.status, entry.files = "ok", [p.name for p in paths.values()]
        except Exception as exc:  # recorded; the other units go on
            entry.status, entry.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            entry.export_s = round(time.perf_counter() - t0, 2)
            shutil.rmtree(work, ignore_errors=True)
            self.progress(unit, entry.status, entry.to_json())
            self.save()

    def run(self) -> Manifest:
        from concurrent.futures import Future, ThreadPoolExecutor

        from .gpu_state import smi_snapshot

        self.out.mkdir(parents=True, exist_ok=True)
        self._load()
        t0 = time.perf_counter()
        entries = self.manifest.units
        with gpu_lock(self.wait, lambda p: self.progress("", "waiting", {"lock": str(p)})):
            self.manifest.gpu_before = GpuSnapshot(smi_snapshot())
            self.save()
            self.prepare([u for u in self.units() if not (self.resume and self._done(u))])
            pending: list[Future] = []
            with ThreadPoolExecutor(max_workers=1) as pool:
                for unit in self.units():
                    if self.resume and self._done(unit):
                        self.progress(unit, "skipped", {"reason": "complete in an earlier run"})
                        continue
                    entry = entries[unit] = UnitEntry(status="running", commit=self.manifest.git_commit)
                    if not self.plan(unit, entry):
                        entry.status = "skipped"
                        self.progress(unit, "skipped", entry.to_json())
                        self.save()
                        continue
                    # Scratch lives outside the sweep folder (TMPDIR), so a run killed part way leaves
                    # nothing hidden inside the folder that gets shared or committed.
                    work = Path(tempfile.mkdtemp(prefix="nsys-tools-capture-"))
                    self.progress(unit, "profile", entry.to_json())
                    t1 = time.perf_counter()
                    try:
                        report = self._profile(unit, work)
                    except CaptureError as exc:
                        entry.status, entry.error, entry.profile_s = "failed", str(exc), round(time.perf_counter() - t1, 2)
                        shutil.rmtree(work, ignore_errors=True)
                        self.progress(unit, "failed", entry.to_json())
                        self.save()
                        continue
                    entry.profile_s = round(time.perf_counter() - t1, 2)
                    pending.append(pool.submit(self._finish, unit, report, work, entry))
                for fut in pending:
                    fut.result()
            self.manifest.gpu_after = GpuSnapshot(smi_snapshot())
        self.manifest.wall_s = round(time.perf_counter() - t0, 2)
        self.save()
        return self.manifest
