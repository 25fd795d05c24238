"""Kernels at a small fraction of a same-shape sibling's speed: ranges that run one piece of work
in several implementations, named by parts separated by ``/`` with a shape among them
(``torch/4096x768``, ``layernorm/ours/4096x768/cold/r2``: a part of numbers joined by ``x``),
compared with their siblings, the ranges whose names differ from theirs in one other part only
(rounds, ``r<k>`` and ``n<calls>``, merged). An implementation whose kernel time per instance of
its range is more than ``ratio`` times (2 unless given) its fastest sibling's runs at a small
fraction of its speed; the time at stake is what it took beyond the sibling."""

from __future__ import annotations

import re

import polars as pl

from . import Finding, Rule

RULE = Rule("slow_sibling", "kernels far slower than a same-shape sibling implementation")

OPTIONS = {"ratio": (float, 2.0, "how many times its fastest sibling's time makes an implementation slow")}
SHAPE = re.compile(r"^\d+(x\d+)+$")
ROUND = re.compile(r"^[rn]\d+$")
ADVICE = (
    "Look at the slow implementation's kernels against its sibling's (report --view kernels "
    "--range, then Nsight Compute on the slowest)."
)


def sibling_key(name: str) -> list[tuple[str, str]]:
    """For a range name with a shape part: each (family, member) it belongs to, the family being
    the name with one non-shape part blanked, the member that part; [] without a shape part."""
    parts = [p for p in name.split("/") if not ROUND.match(p)]
    if len(parts) < 2 or not any(SHAPE.match(p) for p in parts):
        return []
    return [("/".join([*parts[:i], "*", *parts[i + 1 :]]), p) for i, p in enumerate(parts) if not SHAPE.match(p)]


def rows(run, **options) -> pl.DataFrame:
    ranges = run.view("ranges")
    if ranges.is_empty():
        return pl.DataFrame()
    per = ranges.group_by("range").agg(instances=pl.col("instances").sum(), kernel_ns=pl.col("busy_ns").sum())
    keyed = [
        (family, member, r["range"], r["instances"], r["kernel_ns"])
        for r in per.iter_rows(named=True)
        for family, member in sibling_key(r["range"])
    ]
    schema = ["family", "member", "range", "instances", "kernel_ns"]
    table = pl.DataFrame(keyed, schema=schema, orient="row").with_columns(
        per_instance_ns=pl.col("kernel_ns") / pl.col("instances")
    )
    table = (
        table.group_by("family", "member")
        .agg(pl.col("range").sort().first(), pl.col("instances").sum(), pl.col("kernel_ns").sum())
        .with_columns(per_instance_ns=pl.col("kernel_ns") / pl.col("instances"))
    )
    families = table.group_by("family").agg(members=pl.len()).filter(pl.col("members") >= 2)
    table = table.join(families, on="family")
    fastest = pl.col("per_instance_ns").min().over("family")
    best = pl.col("member").sort_by("per_instance_ns").first().over("family")
    return table.with_columns(fastest_ns=fastest, fastest=best, ratio=pl.col("per_instance_ns") / fastest).sort(
        "family", "per_instance_ns"
    )


def findings(run, table: pl.DataFrame, *, ratio: float = 2.0, **options) -> list[Finding]:
    if table.is_empty():
        return []
    out = []
    for r in table.filter(pl.col("ratio") > ratio).iter_rows(named=True):
        extra = int((r["per_instance_ns"] - r["fastest_ns"]) * r["instances"])
        out.append(
            Finding(
                RULE.name,
                f"{r['range']} runs at {100 / r['ratio']:.0f}% of its sibling {r['fastest']}'s speed: "
                f"{r['per_instance_ns'] / 1e3:,.1f} µs of kernels against {r['fastest_ns'] / 1e3:,.1f} µs",
                extra,
                range=r["range"],
                evidence=table.filter(pl.col("family") == r["family"]).to_dicts(),
                advice=ADVICE,
            )
        )
    return out
