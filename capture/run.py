"""Profile a program we did not write: ``nsys-tools capture run -- CMD ARGS``.

Any program, in any language, that follows the convention (``nsys_tools.convention``) can be
captured the way a sweep is: it names each timed range ``<op>/<impl>/<shape>/<l2>/r<round>``,
rotates the order of its implementations each round, keeps the buffers it times preallocated,
and marks what to capture with cudaProfilerStart/cudaProfilerStop. The capture gets the sweep's
Nsight Systems options, scrubbing, manifest and lock, and GPU-state sampling from outside the
program (NVML clocks while it runs; other compute processes just before and just after). It
writes a capture folder that ``nsys-tools report`` reads like a sweep; there are no event spans
(the program measured none that we know of) and no correctness checks, and the report says so.

Standard library only: this runs on the GPU machine.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nsys_tools.convention import OUTPUT_POLICIES, RANGE
from nsys_tools.errors import CaptureError, UsageError
from nsys_tools.files import write_text_atomically
from nsys_tools.folder_format import Spec, UnitEntry, harness_path

from .gpu_state import ClockSampler, visible_gpu
from .runner import CaptureRunner, child_env, tail

DECLARED_OUTPUTS = (*OUTPUT_POLICIES, "unknown")


@dataclass
class RunSpec:
    """The program and what the caller declares about it."""

    program: list[str]
    name: str = "capture"  # the export is <name>.sqlite
    control: str = ""  # the implementation the others are compared with
    outputs: str = "unknown"  # the program's output policy, as its author states it
    plugins: list[str] = field(default_factory=list)  # op plugins for bytes and FLOPs, read when reporting

    def validate(self) -> None:
        if not self.program:
            raise UsageError(None, "no program given", "write it after --: nsys-tools capture run -- ./bench --iters 100")
        if not self.name or "/" in self.name or self.name.startswith("."):
            raise UsageError(None, f"capture name {self.name!r} is not a file name", "use letters, digits and dashes")
        if self.outputs not in DECLARED_OUTPUTS:
            raise UsageError(None, f"unknown output policy {self.outputs!r}", "use rotate, reuse or unknown")


def convention_ranges(sqlite: Path) -> dict[str, int]:
    """``{"<op>/<impl>/<shape>/<l2>": rounds}`` for the NVTX ranges in an export that follow the
    convention (NVTX text inline, or by id in ``StringIds`` as newer nsys versions write it)."""
    con = sqlite3.connect(f"file:{sqlite}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "NVTX_EVENTS" not in tables:
            return {}
        cols = {r[1] for r in con.execute("PRAGMA table_info(NVTX_EVENTS)")}
        if "textId" in cols and "StringIds" in tables:
            query = "SELECT COALESCE(e.text, s.value) FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS s ON s.id = e.textId"
        else:
            query = "SELECT text FROM NVTX_EVENTS"
        found: dict[str, set[str]] = {}
        for (text,) in con.execute(query):
            m = RANGE.match(text or "")
            if m:
                found.setdefault("/".join(m.group("op", "impl", "shape", "l2")), set()).add(m.group("round"))
        return {k: len(v) for k, v in sorted(found.items())}
    finally:
        con.close()


class ProgramRunner(CaptureRunner):
    """One program under Nsight Systems: ``ProgramRunner(spec, out, ...).run()``."""

    kind = "run"

    def __init__(self, spec: RunSpec, out: Path, *, sample_interval: float = 0.005, **kw):
        spec.validate()
        self.spec_, self.sample_interval = spec, sample_interval
        super().__init__(out, **kw)

    def spec(self) -> Spec:
        return Spec(**asdict(self.spec_))

    def units(self) -> list[str]:
        return [self.spec_.name]

    def profile(self, unit: str, rep: Path, work: Path, log: Path) -> None:
        sampler = ClockSampler(visible_gpu(), interval_s=self.sample_interval)
        before = sampler.other_processes()
        sampler.start()
        sampler.phase("run")
        t0 = time.perf_counter()
        try:
            done = self.nsys_profile(rep, self.spec_.program, log, env=child_env([]))
        finally:
            sampler.stop()
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            raise CaptureError(
                rep.with_suffix(".nsys-rep"), f"the program failed (exit {done.returncode}): {tail(log)}", "see its output"
            )
        record = {
            "harness": "external",
            "program": self.spec_.program,
            "outputs": self.spec_.outputs,
            "checks": {},
            "errors": {},
            "spans": None,
            "span_method": None,
            "clocks": sampler.samples(),
            "other_processes": {"before": before, "after": sampler.other_processes()},
            "timings_s": {"run": seconds},
        }
        write_text_atomically(harness_path(work, unit), json.dumps(record))

    def check_export(self, unit: str, sqlite: Path, entry: UnitEntry) -> None:
        ranges = convention_ranges(sqlite)
        if not ranges:
            raise CaptureError(
                sqlite,
                "the program emitted no NVTX range named <op>/<impl>/<shape>/<l2>/r<round> inside its capture range",
                "see docs/guides/own-kernel.md",
            )
        entry.ranges = ranges
