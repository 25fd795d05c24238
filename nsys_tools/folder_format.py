"""The capture folder's files, defined once (standard library only: the GPU machine writes them).

A capture folder holds ``manifest.json`` and, per capture unit (a shape of a sweep, the one run of
a program), ``<unit>.sqlite`` (the scrubbed export) and ``<unit>.harness.json`` (what was recorded
beside the trace). ``Manifest`` is the manifest, written by ``nsys_tools.capture.runner`` and read
by ``nsys_tools.study.folder``; ``HarnessRecord`` is the part of a harness record the reader uses.
Each is parsed once, when the folder is read: a field of the wrong JSON type is one error that
names the file and the field; a null field reads as absent.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from . import archives
from .errors import BadExport
from .files import safe_name

MANIFEST = "manifest.json"


def is_sweep(path: str | Path) -> bool:
    """A sweep folder (it holds a manifest), or a sweep archive (``<id>.tar.xz``: ``archives``)."""
    return (Path(path) / MANIFEST).is_file() or archives.is_archive(path)


# Where each kind of capture keeps its units in the manifest.
UNITS_KEY = {"sweep": "shapes", "run": "captures"}
_WRITER = "was it written by nsys-tools capture?"


def export_path(root: Path, unit: str) -> Path:
    """Where unit ``unit``'s export lies: in ``root``, whatever the name (``files.safe_name``)."""
    return root / f"{safe_name(unit)}.sqlite"


def harness_path(root: Path, unit: str) -> Path:
    return root / f"{safe_name(unit)}.harness.json"


def read_json(file: Path, hint: str) -> Any:
    """The JSON in ``file``; one error when it cannot be read, is not a regular file (a FIFO
    would hang the read, a link to ``/dev/zero`` fill the memory) or is not JSON."""
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once, and is not read
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise BadExport(file, "is not a regular file (a FIFO, socket or device)", "remove it, or replace it by the file")
            return json.loads(fh.read().decode())
    except (OSError, UnicodeDecodeError) as exc:
        raise BadExport(file, f"cannot be read ({exc})", hint) from exc
    except json.JSONDecodeError as exc:
        raise BadExport(file, f"is not valid JSON ({exc.msg})", hint) from exc


class _Fields:
    """Typed reads of one JSON object of ``file`` (``where``: its path in the file, for errors)."""

    def __init__(self, file: Path, data: dict, where: str = "", hint: str = _WRITER):
        self.file, self.data, self.where, self.hint = file, data, where, hint

    def _bad(self, key: str, value: Any, want: str) -> BadExport:
        return BadExport(self.file, f"has {self.where}{key} of type {type(value).__name__}, not {want}", self.hint)

    def text(self, key: str) -> str | None:
        value = self.data.get(key)
        if not isinstance(value, (str, type(None))):
            raise self._bad(key, value, "text")
        return value

    def number(self, key: str) -> float | None:
        value = self.data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise self._bad(key, value, "a number")
        return value

    def texts(self, key: str) -> list[str]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._bad(key, value, "a list of text")
        return value

    def object(self, key: str) -> dict:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._bad(key, value, "an object")
        return value

    def inner(self, key: str) -> _Fields:
        return _Fields(self.file, self.object(key), f"{self.where}{key}.", self.hint)

    def table(self, key: str, kinds: tuple[type, ...], want: str) -> dict[str, Any]:
        """An object whose values all hold one of ``kinds`` (``{impl: relative error}``, ...)."""
        value = self.object(key)
        for inner in value.values():
            if isinstance(inner, bool) and bool not in kinds or not isinstance(inner, kinds):
                raise self._bad(key, value, f"an object of {want}")
        return value

    def orders(self, key: str) -> list[list[str]]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(o, list) and all(isinstance(v, str) for v in o) for o in value):
            raise self._bad(key, value, "a list of lists of text")
        return value


def _json(record: Any) -> dict:
    """A record's fields as JSON, leaving out what is unset (None)."""
    return {f.name: getattr(record, f.name) for f in fields(record) if getattr(record, f.name) is not None}


@dataclass
class Spec:
    """What the capture ran: a sweep's ``SweepSpec`` (with the op's title, dtype and floor), or a
    program's ``RunSpec``. Unset fields are None (or empty)."""

    op: str | None = None
    title: str | None = None
    dtype: str | None = None
    name: str | None = None  # a program's capture: the export is <name>.sqlite
    control: str | None = None
    outputs: str | None = None
    l2: str | None = None
    floor: str | None = None
    shapes: list[str] = field(default_factory=list)
    impls: list[str] = field(default_factory=list)
    impl_entries: list[str] = field(default_factory=list)  # the implementations as given (names, pkg.module:factory)
    plugins: list[str] = field(default_factory=list)
    program: list[str] = field(default_factory=list)
    rounds: int | None = None
    iters: int | None = None
    warmup: int | None = None
    settle: float | None = None
    seed: int | None = None

    @classmethod
    def parse(cls, f: _Fields) -> Spec:
        lists = {"shapes", "impls", "impl_entries", "plugins", "program"}
        numbers = {"rounds", "iters", "warmup", "settle", "seed"}
        return cls(
            **{
                k.name: f.texts(k.name) if k.name in lists else f.number(k.name) if k.name in numbers else f.text(k.name)
                for k in fields(cls)
            }
        )

    def to_json(self) -> dict:
        return _json(self)


@dataclass
class GpuSnapshot:
    """One nvidia-smi reading before or after the capture (``readings``: all of it, as written)."""

    readings: dict = field(default_factory=dict)
    name: str | None = None
    driver_version: str | None = None
    max_sm_mhz: str | None = None  # nvidia-smi's clocks.max.sm, as it printed it
    compute_pids: list[int] = field(default_factory=list)  # other compute processes on the GPU

    @classmethod
    def parse(cls, f: _Fields) -> GpuSnapshot:
        apps = f.data.get("compute_apps") or []
        try:
            pids = [int(app[0]) for app in apps]
        except (TypeError, ValueError, KeyError, IndexError):
            raise f._bad("compute_apps", apps, "a list of (pid, name, memory) rows") from None
        max_sm = f.data.get("clocks.max.sm")
        return cls(f.data, f.text("name"), f.text("driver_version"), None if max_sm is None else str(max_sm), pids)


@dataclass
class UnitEntry:
    """The manifest's record of one capture unit. ``status``: running, ok, failed or skipped."""

    status: str | None = None
    commit: str | None = None  # the build it was captured with
    impls: list[str] | None = None  # a sweep's implementations that support the shape
    unsupported: dict[str, str] | None = None  # implementation -> why it cannot run the shape
    error: str | None = None
    checks: dict[str, float] | None = None
    errors: dict[str, str] | None = None
    orders: list[list[str]] | None = None  # each round's order of implementations, as it ran
    ranges: dict[str, int] | None = None  # a program's capture: range -> rounds found
    files: list[str] | None = None
    profile_s: float | None = None
    export_s: float | None = None
    harness_timings_s: dict[str, float] | None = None

    @classmethod
    def parse(cls, f: _Fields) -> UnitEntry:
        entry = cls(
            status=f.text("status"),
            commit=f.text("commit"),
            impls=f.texts("impls"),
            unsupported=f.object("unsupported"),
            error=f.text("error"),
            checks=f.object("checks"),
            errors=f.object("errors"),
            orders=f.orders("orders"),
            ranges=f.object("ranges"),
            files=f.texts("files"),
            profile_s=f.number("profile_s"),
            export_s=f.number("export_s"),
            harness_timings_s=f.object("harness_timings_s"),
        )
        for k in fields(cls):  # what the file does not hold stays unset, so it is written back as it was
            if f.data.get(k.name) is None:
                setattr(entry, k.name, None)
        return entry

    def to_json(self) -> dict:
        return _json(self)


@dataclass
class Manifest:
    """``manifest.json``: what ran, with which build and tools, on which GPU, and each unit's record."""

    id: str | None = None
    kind: str = "sweep"  # sweep (our harness, per shape) or run (a program's own); sweeps from before it say neither
    created_utc: str | None = None
    command: list[str] = field(default_factory=list)
    spec: Spec = field(default_factory=Spec)
    git_commit: str | None = None
    git_dirty: bool | None = None
    nsys_version: str | None = None
    nsys_options: list[str] = field(default_factory=list)
    range_format: str | None = None
    units: dict[str, UnitEntry] = field(default_factory=dict)
    gpu_before: GpuSnapshot = field(default_factory=GpuSnapshot)
    gpu_after: GpuSnapshot = field(default_factory=GpuSnapshot)
    wall_s: float | None = None

    @classmethod
    def read(cls, root: Path) -> Manifest:
        """The manifest of the folder ``root``: one error when it is absent or not a manifest."""
        file = root / MANIFEST
        if not file.is_file():
            raise BadExport(root, "is not a sweep folder (no manifest.json)", "pass a folder written by nsys-tools capture sweep")
        return cls.parse(file, read_json(file, "was the sweep interrupted? re-run it with --resume"))

    @classmethod
    def parse(cls, file: Path, data: Any) -> Manifest:
        sections = [data.get(k) or {} for k in UNITS_KEY.values()] if isinstance(data, dict) else [None]
        if not all(isinstance(x, dict) and all(isinstance(e, dict) for e in x.values()) for x in sections):
            raise BadExport(
                file,
                "is not a sweep manifest (a JSON object with a shapes or captures object)",
                "pass a folder written by nsys-tools capture sweep or capture run",
            )
        f = _Fields(file, data)
        units = {unit: UnitEntry.parse(_Fields(file, e, f"{unit}.")) for x in sections for unit, e in x.items()}
        git, nsys = f.inner("git"), f.inner("nsys")
        return cls(
            id=f.text("id"),
            kind=f.text("kind") or "sweep",
            created_utc=f.text("created_utc"),
            command=[str(c) for c in data.get("command") or []],
            spec=Spec.parse(f.inner("spec")),
            git_commit=git.text("commit"),
            git_dirty=git.data.get("dirty"),
            nsys_version=nsys.text("version"),
            nsys_options=[str(o) for o in nsys.data.get("options") or []],
            range_format=f.text("range_format"),
            units=units,
            gpu_before=GpuSnapshot.parse(f.inner("gpu_before")),
            gpu_after=GpuSnapshot.parse(f.inner("gpu_after")),
            wall_s=f.number("wall_s"),
        )

    def to_json(self) -> dict:
        out = {
            "id": self.id,
            "kind": self.kind,
            "created_utc": self.created_utc,
            "command": self.command,
            "spec": self.spec.to_json(),
            "git": {"commit": self.git_commit, "dirty": self.git_dirty},
            "nsys": {"version": self.nsys_version, "options": self.nsys_options},
            "range_format": self.range_format,
            UNITS_KEY[self.kind]: {unit: e.to_json() for unit, e in self.units.items()},
            "gpu_before": self.gpu_before.readings or None,
            "gpu_after": self.gpu_after.readings or None,
            "wall_s": self.wall_s,
        }
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class ImplRecord:
    """What the harness recorded of one implementation, so a report needs no plugin."""

    family: str | None = None
    outputs: str | None = None  # the output policy it ran under, or allocates
    bytes: int | None = None
    flops: int | None = None
    tolerance: float | None = None


@dataclass
class Clocks:
    """The clock sampler's columns: one value per sample (``reasons``: NVML's clock-event bits, or
    empty where the sampler recorded none)."""

    phase: list[str] = field(default_factory=list)
    sm_mhz: list[float] = field(default_factory=list)
    util_gpu: list[float] = field(default_factory=list)
    reasons: list[int] = field(default_factory=list)


_CLOCK_COLUMNS = (("phase", str), ("sm_mhz", float), ("util_gpu", float), ("reasons", int))


@dataclass
class HarnessRecord:
    """``<unit>.harness.json``: what the harness (or ``capture run``) recorded beside the trace."""

    file: Path
    spans: dict | None  # impl, round, span_ns columns; None where none were measured (a program's capture)
    op: str | None = None
    shape: str | None = None
    l2: str | None = None
    rounds: int | None = None
    iters: int | None = None
    impls: list[str] = field(default_factory=list)
    orders: list[list[str]] = field(default_factory=list)
    implementations: dict[str, ImplRecord] = field(default_factory=dict)
    checks: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)
    gpu_name: str | None = None
    l2_bytes: int | None = None
    buffer_sets: int | None = None
    versions: dict[str, str] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)  # seconds of each phase
    span_method: str | None = None
    clocks: Clocks = field(default_factory=Clocks)
    other_pids: list[int] = field(default_factory=list)  # other compute processes, before and after

    @classmethod
    def read(cls, file: Path) -> HarnessRecord:
        data = read_json(file, "was the sweep interrupted? re-run it with --resume")
        if not isinstance(data, dict):
            raise BadExport(file, "is not a harness record (not a JSON object)", "was it written by capture/harness.py?")
        if "spans" not in data:
            raise BadExport(file, "has no 'spans' entry", "was it written by capture/harness.py? re-run the shape")
        f = _Fields(file, data, hint="was it written by capture/harness.py? re-run the shape")
        impls = {}
        for name, info in f.object("implementations").items():
            g = _Fields(file, info if isinstance(info, dict) else {}, f"implementations.{name}.", f.hint)
            impls[name] = ImplRecord(
                g.text("family"), g.text("outputs"), g.number("bytes"), g.number("flops"), g.number("tolerance")
            )
        gpu, clocks, others = f.inner("gpu"), f.inner("clocks"), f.inner("other_processes")
        try:
            pids = [int(p) for when in ("before", "after") for p in others.data.get(when) or []]
            sampled = Clocks(*(list(map(kind, clocks.data.get(k) or [])) for k, kind in _CLOCK_COLUMNS))
        except (TypeError, ValueError) as exc:
            raise BadExport(file, f"its clock samples cannot be read ({exc})", f.hint) from exc
        return cls(
            file=file,
            spans=f.data["spans"],
            op=f.text("op"),
            shape=f.text("shape"),
            l2=f.text("l2"),
            rounds=f.number("rounds"),
            iters=f.number("iters"),
            impls=f.texts("impls"),
            orders=f.orders("orders"),
            implementations=impls,
            checks=f.table("checks", (int, float), "numbers"),
            errors=f.table("errors", (str,), "text"),
            unsupported=f.table("unsupported", (str,), "text"),
            gpu_name=gpu.text("name"),
            l2_bytes=gpu.number("l2_bytes"),
            buffer_sets=f.number("buffer_sets"),
            versions=f.object("versions"),
            timings_s=f.table("timings_s", (int, float), "numbers"),
            span_method=f.text("span_method"),
            clocks=sampled,
            other_pids=pids,
        )
