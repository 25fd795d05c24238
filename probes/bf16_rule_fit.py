"""The bf16 forward's rule against the explicit plans an exploration timed: per shape, the plan
the rule picks (``forward_plan`` without a name, the shipped rule itself), its time, the best
explicit plan, the best of the controls timed beside it, and the copy.

    python3 probes/bf16_rule_fit.py reports/probes/explore-bf16-h100.json.xz > reports/probes/bf16-rule-fit.md

The exploration is ``python -m nsys_tools.capture.explore --op layernorm_bf16 --fwd-plans``
(``reports/kernels-35.sh explore-bf16``): CUPTI kernel times, medians of rounds, every plan
checked against the float64 reference first. The rule's plan is looked up among the explicit
plans by its kernel (template arguments and launch), so a plan the exploration did not time is
reported as missing, not guessed.
"""

from __future__ import annotations

import json
import lzma
import math
import sys
from collections import defaultdict

from nsys_tools.kernels.train_cuda import forward_plan

CONTROLS = ("liger", "triton", "inductor", "torch")


def main(path: str) -> None:
    with lzma.open(path, "rt") if path.endswith(".xz") else open(path) as f:
        rows = json.load(f)
    times: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        if "us" in r:
            times[r["shape"]][r["impl"]] = r["us"]
    print("| shape | rule's plan | µs | best plan | µs | best control | µs | rule / control | rule / copy |")
    print("|---|---|---:|---|---:|---|---:|---:|---:|")
    ratios = []
    for shape, t in times.items():
        m, n = (int(v) for v in shape.split("x"))
        vector = n % 8 == 0
        rule = forward_plan(m, n, "bf16", vector)
        same = [k for k in t if k.startswith("fwd_") and forward_plan(m, n, "bf16", vector, named=k) == rule]
        plans = {k: v for k, v in t.items() if k.startswith("fwd_")}
        best = min(plans, key=plans.get)
        control = min((k for k in t if k in CONTROLS), key=t.get)
        if not same:
            print(f"| {shape} | {rule.kernel} (not timed) | | {best} | {plans[best]:.2f} | {control} | {t[control]:.2f} | | |")
            continue
        us = t[same[0]]
        ratios.append(us / t[control])
        print(
            f"| {shape} | {same[0]} | {us:.2f} | {best} | {plans[best]:.2f} | {control} | {t[control]:.2f} "
            f"| {us / t[control]:.3f} | {us / t['copy']:.3f} |"
        )
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    above = sum(r > 1 for r in ratios)
    print(f"\n{len(ratios)} shapes: rule / best control worst {max(ratios):.3f}, geomean {geo:.3f}, above 1 at {above}")


if __name__ == "__main__":
    main(sys.argv[1])
