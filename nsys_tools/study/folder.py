"""Read a sweep folder (written by ``nsys-tools capture sweep`` or ``capture run``) into frames.

A sweep folder holds ``manifest.json`` and, per capture unit (a shape of a sweep, the one
run of a program), ``<unit>.sqlite`` and ``<unit>.harness.json``. Timed calls sit in NVTX
ranges named ``<op>/<impl>/<shape>/<l2>/r<round>`` (``convention.RANGE``); anything else in the
trace (warm-up, setup) is ignored.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import polars as pl

from .. import archives
from ..convention import RANGE, RANGE_REGEX, rotated
from ..errors import BadExport, NsysToolsError
from ..folder_format import HarnessRecord, Manifest, Spec, UnitEntry, export_path, harness_path, is_sweep
from ..read.export import reading
from ..read.inputs import unreadable
from ..read.trace import open as open_trace
from ..views import stats as metrics

__all__ = ["RANGE", "RANGE_REGEX", "KEYS", "Sweep", "load", "summary", "sweep_table", "is_sweep", "parse_ranges", "into_calls"]

KEYS = ["op", "impl", "shape", "l2"]


def shape_text(text: str) -> str:
    """A shape as the folders and the ledger write it: ``" 4096×768 "`` -> ``"4096x768"``."""
    return text.strip().lower().replace("×", "x")


@dataclass
class Sweep:
    """A sweep folder: its manifest, and per completed capture unit (a shape of a sweep, or the
    run of a program) the export and what was recorded beside it (``harness``)."""

    path: Path
    manifest: Manifest
    units: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # unit -> why its files are not read
    plugins: list[str] = field(default_factory=list)  # what the user allowed (--plugin), besides the entry points

    @property
    def id(self) -> str:
        return self.manifest.id or self.path.name

    @property
    def spec(self) -> Spec:
        return self.manifest.spec

    @property
    def kind(self) -> str:
        """``sweep`` (our harness, per shape) or ``run`` (a program's own, ``capture run``)."""
        return self.manifest.kind

    @property
    def entries(self) -> dict[str, UnitEntry]:
        """The manifest's record of every capture unit, completed or not."""
        return self.manifest.units

    @property
    def not_captured(self) -> dict[str, str]:
        """Units the spec asked for, or the manifest records, that have no completed capture:
        unit -> its status ("failed", "running" for one stopped mid-way, "not started")."""
        planned = dict.fromkeys([*self.spec.shapes, *self.entries])
        entries = self.entries
        status = {u: (entries[u].status if u in entries else None) or "not started" for u in planned if u not in self.units}
        status = {u: self.skipped.get(u, s) for u, s in status.items()}  # recorded done, files not regular
        return {u: "missing export" if s == "ok" else s for u, s in status.items()}  # recorded done, file gone

    @property
    def commits(self) -> dict[str, list[str]]:
        """Build -> the completed units captured with it. One build, unless the folder was
        finished with ``--resume`` at another; units recorded before builds were kept per unit
        belong to the manifest's build."""
        default = self.manifest.git_commit or "unknown"
        out: dict[str, list[str]] = {}
        for unit in self.units:
            out.setdefault(self.entries[unit].commit or default, []).append(unit)
        return out

    @property
    def control(self) -> str:
        """The implementation the others are compared with, or "" when none was named."""
        return self.spec.control or ""

    @property
    def outputs(self) -> str:
        """The output policy: rotate or reuse; sweeps from before the policy was recorded
        rotated every output; a program's is what its author declared, or unknown."""
        return self.spec.outputs or ("rotate" if self.kind == "sweep" else "unknown")

    @property
    def order(self) -> str:
        """How a round ordered the implementations: ``shuffled`` anew each round from the recorded
        seed (each round's order is in the manifest), ``rotated`` by one each round for sweeps
        recorded before that, ``unknown`` for a program's own capture (``capture run``)."""
        if self.kind != "sweep":
            return "unknown"
        recorded = any(self.entries[u].orders or self.harness[u].orders for u in self.units)
        return "shuffled" if recorded else "rotated"

    def round_orders(self, unit: str) -> list[list[str]]:
        """Each round's order of implementations for ``unit``: as recorded (manifest, else the
        harness record), or for a sweep recorded before orders were, the rotation it ran: the
        implementations that set up, in the harness's order, rotated left by the round number.
        [] where neither says (a program's capture)."""
        record = self.harness.get(unit)
        recorded = (self.entries[unit].orders if unit in self.entries else None) or (record.orders if record else None)
        if recorded or self.kind != "sweep" or not record:
            return recorded or []
        left_out = {**record.errors, **record.unsupported}
        names = [name for name in record.impls if name not in left_out]
        return [rotated(names, rnd) for rnd in range(record.rounds or self.spec.rounds or 0)] if names else []

    @cached_property
    def registry(self):
        """The op plugins loaded here: installed entry points, then what the user passed
        (``--plugin``, ``$NSYS_TOOLS_PLUGINS``), and of what the manifest names only the studies
        shipped inside nsys-tools (``plugin.shipped_plugins``). Never other code the manifest names:
        a shared folder must not run code on the reader's machine (``unloaded_plugins`` says what
        it named). ``None`` where they cannot be loaded (the report then leaves bytes and FLOPs out)."""
        from ..plugin.loader import Registry, shipped_plugins, user_plugins

        try:
            return Registry([*user_plugins(self.plugins), *shipped_plugins(self.spec.plugins)])
        except NsysToolsError:
            try:
                return Registry()
            except NsysToolsError:
                return None

    @property
    def unloaded_plugins(self) -> list[str]:
        """The plugins the manifest names that are not loaded here (they are never imported
        from the folder: the user allows them with ``--plugin`` or ``$NSYS_TOOLS_PLUGINS``)."""
        from ..plugin.loader import plugin_key

        loaded = {plugin_key(s) for s in [*self.registry.sources, *self.registry.modules]} if self.registry else set()
        return [p for p in self.spec.plugins if plugin_key(p) not in loaded]

    @property
    def plugin_note(self) -> str | None:
        """One line for stderr when the manifest names plugins that are not loaded, or None."""
        missing = self.unloaded_plugins
        if not missing:
            return None
        return (
            f"Note: {self.id} names op plugins that are not loaded ({', '.join(missing)}): they are never imported from "
            "a folder; pass --plugin or set NSYS_TOOLS_PLUGINS to allow them. Bytes and FLOPs the harness did not "
            "record are left out."
        )

    def op(self, name: str):
        """The op plugin called ``name``, or ``None`` where it is not installed here."""
        return self.registry.ops.get(name) if self.registry else None

    @property
    def title(self) -> str:
        """The op's title for headings ("" for a program's capture that names none)."""
        name = self.spec.op or ""
        plugin = self.op(name) if name else None
        return self.spec.title or (plugin.title if plugin else "") or name

    @property
    def floor(self) -> str | None:
        """The implementation that is a bandwidth floor (a copy), if the sweep ran one."""
        if self.spec.floor is not None:
            return self.spec.floor
        plugin = self.op(self.spec.op or "")
        return plugin.floor if plugin and plugin.floor in self.spec.impls else None

    def export(self, unit: str) -> Path:
        return export_path(self.path, unit)

    @cached_property
    def harness(self) -> dict[str, HarnessRecord]:
        return {unit: HarnessRecord.read(harness_path(self.path, unit)) for unit in self.units}

    @property
    def setup(self) -> HarnessRecord | None:
        """What the harness recorded that every shape shares (GPU, versions, how spans were
        measured): the first shape's record, or None for a sweep with no completed shape."""
        return next(iter(self.harness.values()), None)

    @property
    def gpu(self) -> str:
        """The GPU's name, as the harness saw it or else as nvidia-smi did before the sweep."""
        return (self.setup.gpu_name if self.setup else None) or self.manifest.gpu_before.name or ""

    @property
    def has_spans(self) -> bool:
        """Whether event spans were measured (``capture run`` measures none)."""
        return any(h.spans for h in self.harness.values())

    @cached_property
    def calls(self) -> pl.DataFrame:
        """One row per timed call: op, impl, shape, l2, round, start_ns, duration_ns (the sum of
        the call's GPU operations), kernel (their names, in order) and ops (how many)."""
        frames = []
        for unit in self.units:
            with reading(self.export(unit)), open_trace(self.export(unit)) as trace:
                kernel = pl.coalesce("short_name", "name").cast(pl.String)
                ops = timed_ops(trace, ["name", "short_name", "start_ns", "duration_ns"]).select(
                    *KEYS, "round", "calls", "start_ns", "duration_ns", kernel=kernel
                )
                # Sweeps from before ranges carried their call count: the harness's iterations.
                iters = self.harness[unit].iters if self.kind == "sweep" else None
                frames.append(timed_calls(ops, calls_if_unsaid=iters))
        if not frames:
            return pl.DataFrame(schema=CALL_SCHEMA)
        return pl.concat(frames, how="vertical_relaxed")

    @cached_property
    def spans(self) -> pl.DataFrame:
        """One row per event-timed call (untraced phase): op, impl, shape, l2, round, span_ns."""
        frames = []
        for shape, h in self.harness.items():
            if h.spans is None:  # none measured (a program's capture)
                continue
            try:
                if h.op is None or h.l2 is None:
                    raise KeyError("op" if h.op is None else "l2")
                frames.append(
                    pl.DataFrame(h.spans, schema={"impl": pl.String, "round": pl.Int64, "span_ns": pl.Int64}).with_columns(
                        op=pl.lit(h.op), shape=pl.lit(shape), l2=pl.lit(h.l2)
                    )
                )
            except (KeyError, TypeError, ValueError, pl.exceptions.PolarsError) as exc:
                what = f"no {exc.args[0]!r} entry" if isinstance(exc, KeyError) else f"unreadable spans ({exc})"
                raise BadExport(h.file, f"has {what}", "was it written by capture/harness.py? re-run the shape") from exc
        schema = {"impl": pl.String, "round": pl.Int64, "span_ns": pl.Int64, "op": pl.String, "shape": pl.String, "l2": pl.String}
        return pl.concat(frames) if frames else pl.DataFrame(schema=schema)


CALL_SCHEMA = {
    **{k: pl.String for k in KEYS},
    "round": pl.Int64,
    "start_ns": pl.Int64,
    "duration_ns": pl.Int64,
    "kernel": pl.String,
    "ops": pl.UInt32,
}


def parse_ranges(df: pl.DataFrame) -> pl.DataFrame:
    """Split the NVTX ``range`` column into op, impl, shape, l2, round and calls (null where the
    range does not say how many calls it holds)."""
    parts = pl.col("range").str.extract_groups(RANGE_REGEX)
    return (
        df.with_columns(parts.alias("p"))
        .unnest("p")
        .with_columns(pl.col("round").cast(pl.Int64), pl.col("calls").cast(pl.Int64))
        .drop("range")
    )


def timed_ops(trace, columns: Sequence[str]) -> pl.DataFrame:
    """A trace's GPU operations inside timed ranges (the capture convention's NVTX names), with
    ``columns`` of ``Trace.gpu_ops`` and the range split by ``parse_ranges``."""
    ops = trace.gpu_ops(attributed=True, columns=list(columns))
    return ops.filter(pl.col("range").str.contains(RANGE_REGEX)).collect().pipe(parse_ranges)


def timed_calls(ops: pl.DataFrame, by: Sequence[str] = (), calls_if_unsaid: int | None = None) -> pl.DataFrame:
    """The one way from an export's GPU operations to calls: operations with ``range`` (or the
    columns ``parse_ranges`` makes of it), ``start_ns``, ``duration_ns`` and ``kernel`` -> one row
    per timed call (``into_calls``). Operations outside timed ranges are left out.
    ``calls_if_unsaid``: the call count of ranges that do not carry one (sweeps from before ranges
    said it: the harness's iterations)."""
    if "range" in ops.columns:
        ops = ops.filter(pl.col("range").str.contains(RANGE_REGEX)).pipe(parse_ranges)
    if calls_if_unsaid is not None:
        ops = ops.with_columns(pl.col("calls").fill_null(pl.lit(calls_if_unsaid, pl.Int64)))
    return into_calls(ops, by=by)


def into_calls(ops: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """GPU operations of timed ranges (``parse_ranges`` rows with start_ns, duration_ns, kernel)
    -> one row per call. A range's operations, in the order they started, are split into
    ``calls`` equal runs; a call's time is the sum of its operations' times. Where ``calls`` is
    null or does not divide the operations evenly, each operation is one call. ``by``: columns
    that tell ranges of the same name apart (the file of each)."""
    keys = [*by, *KEYS, "round"]
    n = pl.len().over(keys)
    even = pl.col("calls").is_not_null() & (pl.col("calls") > 0) & (n % pl.col("calls").clip(1) == 0)
    per = pl.when(even).then(n // pl.col("calls").clip(1)).otherwise(1)
    return (
        ops.with_row_index("_row")
        .sort([*keys, "start_ns"])
        .with_columns(call=pl.int_range(pl.len()).over(keys) // per)
        .group_by([*keys, "call"], maintain_order=True)
        .agg(
            pl.col("_row").min(),
            pl.col("start_ns").first(),
            pl.col("duration_ns").sum(),
            pl.col("kernel").unique(maintain_order=True).str.join(" + "),
            ops=pl.len(),
        )
        .sort("_row")  # the ranges in the order they came
        .select(*by, *CALL_SCHEMA)
    )


def load(path: str | Path) -> Sweep:
    """Open a sweep folder, or a sweep archive unpacked into a private folder that lives as long
    as the process (``archives.unpacked``). Units whose capture failed are left out (the manifest
    says why)."""
    root = archives.unpacked(path) if archives.is_archive(path) else Path(path)
    sweep = Sweep(root, Manifest.read(root))
    for unit in (u for u, e in sweep.entries.items() if e.status == "ok" and os.path.lexists(sweep.export(u))):
        special = [(f.name, why) for f in (sweep.export(unit), harness_path(root, unit)) if (why := _special(f))]
        if special:
            sweep.skipped[unit] = "; ".join(f"{name} is {why}" for name, why in special)
        else:
            sweep.units.append(unit)
    return sweep


def _special(file: Path) -> str | None:
    """Why a sweep's file is skipped unread, as in plain folders (``inputs.unreadable``): a
    FIFO, socket, device or broken link (a missing harness record is left to its reader)."""
    why = unreadable(file)
    return None if why in (None, "no such file") else why


def implementations(sweep: Sweep, keys: pl.DataFrame) -> pl.DataFrame:
    """Per (op, impl, shape) of ``keys``: ``family``, ``outputs`` (the output policy it ran
    under: the sweep's, or ``allocates``), ``bytes`` and ``flops`` of one call. From what the
    harness recorded; else from the op's plugin where it is installed here; else null."""
    recorded = {
        (h.op, impl, h.shape or unit): {"family": r.family, "outputs": r.outputs, "bytes": r.bytes, "flops": r.flops}
        for unit, h in sweep.harness.items()
        for impl, r in h.implementations.items()
    }
    rows = []
    for op_name, impl_name, shape in keys.select("op", "impl", "shape").unique().iter_rows():
        info = recorded.get((op_name, impl_name, shape)) or _from_plugin(sweep, op_name, impl_name, shape)
        rows.append({"op": op_name, "impl": impl_name, "shape": shape, **info})
    schema = {"op": pl.String, "impl": pl.String, "shape": pl.String, "family": pl.String, "outputs": pl.String}
    schema |= {"bytes": pl.Int64, "flops": pl.Int64}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _from_plugin(sweep: Sweep, op_name: str, impl_name: str, shape: str) -> dict:
    unknown = {"family": None, "outputs": sweep.outputs, "bytes": None, "flops": None}
    op = sweep.op(op_name)
    if op is None:
        return unknown
    try:
        dims = op.parse_shape(shape)
    except NsysToolsError:  # a shape the op does not know
        return unknown
    try:
        impl = op.impl(impl_name)
    except NsysToolsError:  # a program's own implementation: the op's bytes and FLOPs still hold
        return {**unknown, "bytes": op.bytes_moved(dims), "flops": op.flops(dims)}
    return {"family": impl.family, "outputs": "allocates" if impl.allocates else sweep.outputs, **op.work(impl, dims)}


def summary(sweep: Sweep) -> pl.DataFrame:
    """One row per (op, impl, shape, l2): kernel-time statistics from the trace and event-span
    statistics from the untraced phase, with the output policy each implementation ran under
    and the bytes and FLOPs one call must move and do (where known)."""
    kernel = (
        sweep.calls.lazy()
        .group_by(KEYS)
        .agg(
            pl.len().alias("instances"),
            pl.col("kernel").unique().sort().str.join(", ").alias("kernels"),
            *[e.alias(f"kernel_{k}") for k, e in metrics.distribution("duration_ns").items()],
        )
    )
    span = sweep.spans.lazy().group_by(KEYS).agg(*[e.alias(f"span_{k}") for k, e in metrics.distribution("span_ns").items()])
    out = kernel.join(span, on=KEYS, how="full", coalesce=True).collect()
    order = {s: k for k, s in enumerate(sweep.spec.shapes or sweep.units)}
    impl_order = {s: k for k, s in enumerate(sweep.spec.impls)}
    return (
        out.join(implementations(sweep, out), on=["op", "impl", "shape"], how="left")
        .with_columns(
            gb_per_s=pl.col("bytes") / pl.col("kernel_median_ns"), tflops=pl.col("flops") / pl.col("kernel_median_ns") / 1000
        )
        .with_columns(
            _s=pl.col("shape").replace_strict(order, default=len(order)),
            _i=pl.col("impl").replace_strict(impl_order, default=len(impl_order)),
        )
        # A program's capture lists no shapes: its rows go by shape name, not by the group-by's hash order.
        .sort("_s", "_i", "impl", "shape", "l2")
        .drop("_s", "_i")
    )


SUMMARY_COLUMNS = (
    "op",
    "impl",
    "shape",
    "l2",
    "outputs",
    "instances",
    "kernel_median_ns",
    "kernel_p10_ns",
    "kernel_p90_ns",
    "kernel_p99_ns",
    "kernel_min_ns",
    "kernel_max_ns",
    "span_median_ns",
    "span_p10_ns",
    "span_p90_ns",
    "bytes",
    "gb_per_s",
    "flops",
    "tflops",
    "kernels",
)


def sweep_table(paths: list[Path]) -> pl.DataFrame:
    """``summary`` of each sweep folder, in the report's column order; a leading ``sweep``
    column when there are several."""
    sweeps = [load(p) for p in paths]
    frames = [summary(s).select(*SUMMARY_COLUMNS).with_columns(sweep=pl.lit(s.id)) for s in sweeps]
    frame = pl.concat(frames)
    return frame.select("sweep", *SUMMARY_COLUMNS) if len(paths) > 1 else frame.drop("sweep")
