"""Run Nsight Systems over the harness, one capture per shape, into a sweep folder.

A sweep folder holds, per shape, ``<shape>.sqlite`` (scrubbed export), ``<shape>.harness.json``
(parameters, correctness checks, event spans, clock samples), and one ``manifest.json`` for the
whole sweep (commit, command, nsys, GPU, nvidia-smi before and after, per-shape status and
timings). Every file is written under a temporary name and renamed when complete, so a killed
sweep never leaves a file that looks finished. While shape k+1 is profiled, shape k is exported
and scrubbed on a worker thread (``nsys_tools.capture.runner``). With ``prepare_jobs`` > 0, the
harness first builds and checks every shape's implementations in that many parallel processes,
untraced (``harness --prepare``), so that each capture's setup finds its kernels compiled; the
captures themselves still run one at a time.

Standard library only (plus the op plugins): this runs on the GPU machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nsys_tools.convention import DEFAULT_OUTPUTS, L2_MODES, OUTPUT_POLICIES, unit_seed
from nsys_tools.errors import CaptureError, UsageError
from nsys_tools.folder_format import Spec, UnitEntry
from nsys_tools.plugin.api import Impl, Op, UnsupportedShape
from nsys_tools.plugin.loader import Registry

from .runner import PROJECT_ROOT, CaptureRunner, child_env, tail


@dataclass
class SweepSpec:
    """What a sweep runs. Empty ``op``, ``shapes``, ``impls`` or ``control`` take the op's
    defaults (the op itself is the only one installed, when there is one)."""

    op: str = ""
    plugins: list[str] = field(default_factory=list)
    shapes: list[str] = field(default_factory=list)
    impls: list[str] = field(default_factory=list)
    control: str = ""
    rounds: int = 3
    iters: int = 100
    warmup: int = 20
    settle: float = 0.0
    l2: str = "cold"
    outputs: str = DEFAULT_OUTPUTS
    seed: int = 0  # the inputs and every round's order, one seed per shape drawn from it (convention.unit_seed)

    def resolve(self, registry: Registry) -> tuple[Op, list[Impl]]:
        """Check the spec against the plugins and fill in the op's defaults."""
        op = registry.op(self.op)
        self.op = op.name
        self.shapes = [op.canonical(s) for s in (self.shapes or op.default_shapes)]
        if not self.shapes:
            raise UsageError(None, f"{op.name} has no default shapes", f"give --shapes, written {op.shape_hint}")
        impls = registry.impls(op, self.impls or None)
        self.impls = [i.strip() for i in self.impls] or [i.name for i in impls]
        names = [i.name for i in impls]
        self.control = self.control or (op.control if op.control in names else "")
        if not self.control:
            raise UsageError(None, f"no control among --impls (the op's is {op.control})", "add it, or name one with --control")
        if self.control not in names:
            raise UsageError(
                None, f"control {self.control!r} is not among --impls", "add it to --impls, or name another --control"
            )
        if min(self.rounds, self.iters) < 1 or self.warmup < 0 or not 0 <= self.settle <= 600:
            raise UsageError(None, "rounds and iters must be at least 1, warmup at least 0, settle 0 to 600 seconds")
        if self.l2 not in L2_MODES:
            raise UsageError(None, f"unknown L2 mode {self.l2!r}", "use cold or warm")
        if self.outputs not in OUTPUT_POLICIES:
            raise UsageError(None, f"unknown output policy {self.outputs!r}", "use rotate or reuse")
        return op, impls


class SweepRunner(CaptureRunner):
    """One sweep: ``SweepRunner(spec, out, ...).run()`` returns the manifest."""

    kind = "sweep"

    def __init__(
        self,
        spec: SweepSpec,
        out: Path,
        *,
        python: str = sys.executable,
        registry: Registry | None = None,
        prepare_jobs: int = 0,
        **kw,
    ):
        self.prepare_jobs = prepare_jobs
        self.registry = registry or Registry(spec.plugins)
        self.op, impls = spec.resolve(self.registry)
        self.impls = dict(zip([i.name for i in impls], spec.impls, strict=True))  # name -> the entry as given
        self.by_name = {i.name: i for i in impls}
        self.spec_, self.python = spec, python
        super().__init__(out, **kw)

    def spec(self) -> Spec:
        op = self.op
        return Spec(
            **asdict(self.spec_)
            | {
                "impls": list(self.impls),
                "impl_entries": list(self.impls.values()),
                "title": op.title or op.name,
                "dtype": op.dtype,
                "floor": op.floor if op.floor in self.impls else None,
            }
        )

    def units(self) -> list[str]:
        return self.spec_.shapes

    def plan(self, unit: str, entry: UnitEntry) -> bool:
        shape = self.op.parse_shape(unit)
        runnable, unsupported = [], {}
        for name, impl in self.by_name.items():
            try:
                impl.check(shape)
                runnable.append(name)
            except UnsupportedShape as exc:
                unsupported[name] = exc.problem
        entry.impls, entry.unsupported = runnable, unsupported
        if not runnable:
            entry.error = "no implementation supports this shape"
        return bool(runnable)

    def _harness(self, unit: str, entries: list[str]) -> list[str]:
        cmd = [self.python, "-m", "nsys_tools.capture.harness", "--op", self.spec_.op, "--shape", unit]
        cmd += ["--impls", ",".join(entries)]
        for source in self.registry.sources:
            cmd += ["--plugin", source]
        return cmd

    def prepare(self, units: list[str]) -> None:
        """Build every unit's implementations in ``prepare_jobs`` parallel processes. A shape that
        fails here is left to its capture, which records why."""
        if self.prepare_jobs < 1 or not units:
            return
        env = child_env([str(PROJECT_ROOT), os.getcwd()])

        def one(unit: str) -> None:
            self.progress(unit, "prepare", {})
            cmd = [*self._harness(unit, list(self.impls.values())), "--prepare", "--outputs", self.spec_.outputs]
            try:
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
                details = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
            except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
                details = {}
            self.progress(unit, "prepared", details)

        with ThreadPoolExecutor(max_workers=self.prepare_jobs) as pool:
            list(pool.map(one, units))

    def profile(self, unit: str, rep: Path, work: Path, log: Path) -> None:
        s = self.spec_
        harness = self._harness(unit, [self.impls[name] for name in self.manifest.units[unit].impls or []])
        harness += ["--rounds", str(s.rounds), "--iters", str(s.iters), "--warmup", str(s.warmup), "--settle", str(s.settle)]
        harness += ["--l2", s.l2, "--outputs", s.outputs, "--seed", str(unit_seed(s.seed, unit)), "--out", str(work)]
        env = child_env([str(PROJECT_ROOT), os.getcwd()])
        done = self.nsys_profile(rep, harness, log, env=env, cwd=work)
        if done.returncode != 0:
            raise CaptureError(
                rep.with_suffix(".nsys-rep"), f"profiling failed (exit {done.returncode}): {tail(log)}", "see the log"
            )
