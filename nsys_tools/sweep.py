"""Read a sweep folder (written by ``nsys-tools capture sweep``) into frames.

A sweep folder holds ``manifest.json`` and, per shape, ``<shape>.sqlite`` and
``<shape>.harness.json``. Timed calls sit in NVTX ranges named ``RANGE``:
``<op>/<impl>/<M>x<N>/<l2>/r<round>``; anything else in the trace (warm-up, setup) is ignored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import polars as pl

from . import metrics
from .errors import BadExport
from .export import open_export, reading
from .report import attributed

MANIFEST = "manifest.json"
RANGE = re.compile(r"^(?P<op>[^/]+)/(?P<impl>[^/]+)/(?P<shape>\d+x\d+)/(?P<l2>cold|warm)/r(?P<round>\d+)$")
RANGE_REGEX = RANGE.pattern
KEYS = ["op", "impl", "shape", "l2"]


def is_sweep(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


@dataclass
class Sweep:
    """A sweep folder: its manifest, and per completed shape the export and the harness output."""

    path: Path
    manifest: dict
    shapes: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.manifest.get("id") or self.path.name

    @property
    def control(self) -> str:
        return self.manifest.get("spec", {}).get("control", "triton")

    def export(self, shape: str) -> Path:
        return self.path / f"{shape}.sqlite"

    @cached_property
    def harness(self) -> dict[str, dict]:
        out = {}
        for shape in self.shapes:
            file = self.path / f"{shape}.harness.json"
            try:
                out[shape] = json.loads(file.read_text())
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise BadExport(file, f"cannot be read ({exc})", "was the sweep interrupted? re-run it with --resume") from exc
            if not isinstance(out[shape], dict):
                raise BadExport(file, "is not a harness record (not a JSON object)", "was it written by capture/harness.py?")
        return out

    @property
    def setup(self) -> dict:
        """What the harness recorded that every shape shares (GPU, versions, how spans were
        measured): the first shape's record, or {} for a sweep with no completed shape."""
        return next(iter(self.harness.values()), {})

    @property
    def gpu(self) -> str:
        """The GPU's name, as the harness saw it or else as nvidia-smi did before the sweep."""
        return self.setup.get("gpu", {}).get("name") or self.manifest.get("gpu_before", {}).get("name") or ""

    @cached_property
    def calls(self) -> pl.DataFrame:
        """One row per GPU operation in a timed range: op, impl, shape, l2, round, kernel, duration_ns."""
        frames = []
        for shape in self.shapes:
            with reading(self.export(shape)):
                ex = open_export(self.export(shape))
                ops = attributed(ex, names="short", include_memops=True, keep=("name_id", "label", "start_ns", "duration_ns"))
                ops = ops.filter(pl.col("range").str.contains(RANGE_REGEX))
                frames.append(ops.select("range", "name_id", "label", "start_ns", "duration_ns").collect().pipe(_named, ex))
        if not frames:
            return pl.DataFrame(
                schema={
                    **{k: pl.String for k in KEYS},
                    "round": pl.Int64,
                    "kernel": pl.String,
                    "start_ns": pl.Int64,
                    "duration_ns": pl.Int64,
                }
            )
        return pl.concat(frames).pipe(parse_ranges)

    @cached_property
    def spans(self) -> pl.DataFrame:
        """One row per event-timed call (untraced phase): op, impl, shape, l2, round, span_ns."""
        frames = []
        for shape, h in self.harness.items():
            try:
                frames.append(
                    pl.DataFrame(h["spans"], schema={"impl": pl.String, "round": pl.Int64, "span_ns": pl.Int64}).with_columns(
                        op=pl.lit(h["op"]), shape=pl.lit(shape), l2=pl.lit(h["l2"])
                    )
                )
            except (KeyError, TypeError, ValueError, pl.exceptions.PolarsError) as exc:
                what = f"no {exc.args[0]!r} entry" if isinstance(exc, KeyError) else f"unreadable spans ({exc})"
                raise BadExport(
                    self.path / f"{shape}.harness.json", f"has {what}", "was it written by capture/harness.py? re-run the shape"
                ) from exc
        schema = {"impl": pl.String, "round": pl.Int64, "span_ns": pl.Int64, "op": pl.String, "shape": pl.String, "l2": pl.String}
        return pl.concat(frames) if frames else pl.DataFrame(schema=schema)


def _named(df: pl.DataFrame, ex) -> pl.DataFrame:
    from .report import _name

    return _name(df, ex).select("range", "start_ns", "duration_ns", "kernel")


def parse_ranges(df: pl.DataFrame) -> pl.DataFrame:
    """Split the NVTX ``range`` column into op, impl, shape, l2 and round."""
    parts = pl.col("range").str.extract_groups(RANGE_REGEX)
    return df.with_columns(parts.alias("p")).unnest("p").with_columns(pl.col("round").cast(pl.Int64)).drop("range")


def load(path: str | Path) -> Sweep:
    """Open a sweep folder. Shapes whose capture failed are left out (the manifest says why)."""
    root = Path(path)
    file = root / MANIFEST
    if not file.is_file():
        raise BadExport(root, "is not a sweep folder (no manifest.json)", "pass a folder written by nsys-tools capture sweep")
    try:
        manifest = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise BadExport(file, f"cannot be read ({exc})", "check the file") from exc
    except json.JSONDecodeError as exc:
        raise BadExport(file, f"is not valid JSON ({exc.msg})", "was the sweep interrupted? re-run it with --resume") from exc
    entries = manifest.get("shapes", {}) if isinstance(manifest, dict) else None
    if not isinstance(entries, dict) or not all(isinstance(e, dict) for e in entries.values()):
        raise BadExport(
            file,
            "is not a sweep manifest (a JSON object with a shapes object)",
            "pass a folder written by nsys-tools capture sweep",
        )
    shapes = [s for s, e in entries.items() if e.get("status") == "ok" and (root / f"{s}.sqlite").exists()]
    return Sweep(root, manifest, shapes)


def summary(sweep: Sweep) -> pl.DataFrame:
    """One row per (op, impl, shape, l2): kernel-time statistics from the trace and event-span
    statistics from the untraced phase, with the bytes the implementation must move."""
    from kernels.registry import get, parse_shape

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
    moved = [get(i).moves(*parse_shape(s)) if i else None for i, s in zip(out["impl"], out["shape"], strict=True)]
    order = {s: k for k, s in enumerate(sweep.manifest.get("spec", {}).get("shapes", sweep.shapes))}
    impl_order = {s: k for k, s in enumerate(sweep.manifest.get("spec", {}).get("impls", []))}
    return (
        out.with_columns(bytes=pl.Series(moved, dtype=pl.Int64))
        .with_columns(gb_per_s=pl.col("bytes") / pl.col("kernel_median_ns"))
        .with_columns(
            _s=pl.col("shape").replace_strict(order, default=len(order)),
            _i=pl.col("impl").replace_strict(impl_order, default=len(impl_order)),
        )
        .sort("_s", "_i", "impl")
        .drop("_s", "_i")
    )


SUMMARY_COLUMNS = (
    "op",
    "impl",
    "shape",
    "l2",
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
    "kernels",
)


def sweep_table(paths: list[Path]) -> pl.DataFrame:
    """``summary`` of each sweep folder, in the report's column order; a leading ``sweep``
    column when there are several."""
    sweeps = [load(p) for p in paths]
    frames = [summary(s).select(*SUMMARY_COLUMNS).with_columns(sweep=pl.lit(s.id)) for s in sweeps]
    frame = pl.concat(frames)
    return frame.select("sweep", *SUMMARY_COLUMNS) if len(paths) > 1 else frame.drop("sweep")
