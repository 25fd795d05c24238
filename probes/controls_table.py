"""The tables of "Against torch.compile and Liger" in reports/variants.md, from explore outputs.

    python3 probes/controls_table.py reports/explore/controls-dispatch   # here, no GPU

Reads ``<dir>/explore-g*.json`` (``nsys_tools.capture.explore --timer kernel --outputs rotate,reuse``:
CUPTI kernel medians) and prints, per output policy, one row per shape: the plan the dispatcher
now picks (measured under its explicit name, the same kernel and launch), the plan it picked
before, each control, and ours over the best control and over the copy; then the geometric mean
of ours over the best control.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from nsys_tools.errors import UsageError
from nsys_tools.kernels.cuda import launch_config
from nsys_tools.kernels.registry import get

SHAPES = "4096x768 8192x768 1024x2048 4096x4096 2048x768 8192x1024 4096x2048 2048x4096 4096x3072 1024x8192 512x16384 16384x512"
CONTROLS = ("triton", "inductor", "liger", "torch")
# The plan the dispatcher picked before these sessions, by row width and count (commit e912310).
BEFORE = {768: "held_t32_r4_c0", 1024: "held_t32_r1_c0", 512: "held_t32_r1_c0", 2048: "held_t128_c0"}


def before(m: int, n: int) -> str:
    if n in BEFORE:
        return "held_t32_r1_c0" if n == 768 and m >= 8192 else BEFORE[n]
    return "held_t512_c2" if n > 8192 else "held_t256_c2"


def measured(cells: dict[str, float], m: int, n: int, plan: str) -> str | None:
    """The explicit plan name, among those measured, whose kernel and launch are ``plan``'s
    (None when that session did not measure it)."""
    target = launch_config(plan, m, n)
    for name in cells:
        try:
            get(name)
        except UsageError:  # a plan name this build no longer has (a rejected cache bit)
            continue
        if name.startswith("held_") and launch_config(name, m, n) == target:
            return name
    return None


def main(folder: Path) -> None:
    rows = [r for f in sorted(folder.glob("explore-g*.json")) for r in json.loads(f.read_text())]
    for policy in ("rotate", "reuse"):
        print(f"\n`--outputs {policy}`\n")
        head = ["shape", "ours now", "plan", "ours before", *CONTROLS, "copy", "ours / best control", "ours / copy"]
        print("| " + " | ".join(head) + " |")
        print("|---|---:|---|" + "---:|" * (len(head) - 3))
        logs = []
        for shape in SHAPES.split():
            m, n = map(int, shape.split("x"))
            cells = {r["config"]: r["us"] for r in rows if r["shape"] == shape and r.get("outputs") == policy and "us" in r}
            plan, prior = measured(cells, m, n, "ours"), measured(cells, m, n, before(m, n))
            ours, old = (cells[p] if p else math.nan for p in (plan, prior))
            ctl = [cells[f"impl {c}"] for c in CONTROLS]
            best, copy = min(ctl), cells["impl copy"]
            if plan:
                logs.append(math.log(ours / best))
            vals = " | ".join(f"{v:.2f}" for v in (*ctl, copy))
            ratios = f"{ours / best:.3f} | {ours / copy:.3f}"
            print(f"| {shape} | {ours:.2f} | {plan or 'not measured'} | {old:.2f} | {vals} | {ratios} |")
        print(f"\nGeometric mean of ours / best control over {len(logs)} shapes: {math.exp(sum(logs) / len(logs)):.3f}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
